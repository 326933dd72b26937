#include "core/npy.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"

namespace igb {

namespace {

std::string shape_tuple(const at::IntArrayRef sizes) {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  if (sizes.size() == 1) s += ",";
  return s + ")";
}

uint32_t read_le(const std::string& bytes, size_t at, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

}  // namespace

void write_npy(const std::filesystem::path& path, const at::Tensor& tensor) {
  const auto t = tensor.detach().to(at::kCPU, at::kFloat).contiguous();
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_tuple(t.sizes()) + ", }";
  // Magic, version and length take 10 bytes; the header ends in '\n' at a multiple of 64.
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char*>(t.data_ptr()),
             static_cast<size_t>(t.numel()) * sizeof(float));
  write_atomically(path,
                   [&](const std::filesystem::path& tmp) { write_file_bytes(tmp, out, path); });
}

at::Tensor read_npy(const std::filesystem::path& path) {
  const std::string bytes = read_text_file(path);
  auto bad = [&](const std::string& why) {
    return InputError(path.string() + ": not a float32 .npy file (" + why + ")");
  };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw bad("no NUMPY magic");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t offset = 10, length = 0;
  if (major == 1) {
    length = read_le(bytes, 8, 2);
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw bad("truncated header");
    length = read_le(bytes, 8, 4);
    offset = 12;
  } else {
    throw bad("format version " + std::to_string(major));
  }
  if (offset + length > bytes.size()) throw bad("truncated header");
  const std::string header = bytes.substr(offset, length);
  std::smatch descr, order, shape;
  if (!std::regex_search(header, descr, std::regex("'descr'\\s*:\\s*'([^']*)'")) ||
      !std::regex_search(header, order, std::regex("'fortran_order'\\s*:\\s*(True|False)")) ||
      !std::regex_search(header, shape, std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)")))
    throw bad("header lacks descr, fortran_order or shape");
  if (descr[1] != "<f4") throw bad("dtype " + descr[1].str() + "; only '<f4' is read");
  if (order[1] == "True") throw bad("Fortran order");
  std::vector<int64_t> sizes;
  std::stringstream dims(shape[1].str());
  for (std::string d; std::getline(dims, d, ',');) {
    d.erase(0, d.find_first_not_of(" \t"));
    d.erase(d.find_last_not_of(" \tL") + 1);
    if (d.empty()) continue;
    if (d.find_first_not_of("0123456789") != std::string::npos || d.size() > 12)
      throw bad("shape entry '" + d + "'");
    sizes.push_back(std::stoll(d));
  }
  // The shape is checked against the data before anything is allocated: a forged header's
  // product may overflow or claim far more than the file holds.
  const size_t data = offset + length;
  const size_t available = bytes.size() - data;
  __int128 count = 1;
  for (int64_t s : sizes) {
    count *= s;
    if (count * static_cast<__int128>(sizeof(float)) > static_cast<__int128>(available))
      throw bad("its shape " + shape_tuple(sizes) + " needs more data than the " +
                std::to_string(available) + " bytes the file holds");
  }
  if (static_cast<size_t>(count) * sizeof(float) != available)
    throw bad("expected " + std::to_string(static_cast<int64_t>(count) * 4) +
              " data bytes, found " + std::to_string(available));
  auto t = at::empty(sizes, at::kFloat);
  std::memcpy(t.data_ptr(), bytes.data() + data, static_cast<size_t>(count) * sizeof(float));
  return t;
}

}  // namespace igb
