#include "core/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "core/fs.h"

namespace igb {

namespace {

// Protobuf wire format, just what Event/Summary need.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, int field, int wire) { put_varint(out, (field << 3) | wire); }
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}
template <class T>
void put_fixed(std::string& out, int field, T value) {
  put_key(out, field, sizeof(T) == 8 ? 1 : 5);
  char buf[sizeof(T)];
  std::memcpy(buf, &value, sizeof(T));
  out.append(buf, sizeof(T));
}

std::string event_header(int64_t step) {
  std::string ev;
  double wall =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  put_fixed<double>(ev, 1, wall);
  put_key(ev, 2, 0);
  put_varint(ev, static_cast<uint64_t>(step));
  return ev;
}

struct Reader {
  const std::string& s;
  size_t pos;
  size_t end;
  bool done() const { return pos >= end; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; pos < end && shift < 64; shift += 7) {
      auto b = static_cast<uint8_t>(s[pos++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    throw InputError("malformed protobuf varint in event file");
  }
  void skip(int wire) {
    if (wire == 0)
      varint();
    else if (wire == 1)
      pos += 8;
    else if (wire == 5)
      pos += 4;
    else if (wire == 2)
      pos += varint();
    else
      throw InputError("unsupported protobuf wire type in event file");
  }
};

}  // namespace

uint32_t masked_crc32c(const void* data, size_t size) {
  uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

EventWriter::EventWriter(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  path_ = dir / ("events.out.tfevents." + std::to_string(secs) + "." + host);
  std::string ev = event_header(0);
  put_bytes(ev, 3, "brain.Event:2");
  write_record(ev);
  flush();
}

void EventWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  std::string val;
  put_bytes(val, 1, tag);
  put_fixed<float>(val, 2, static_cast<float>(value));
  std::string summary;
  put_bytes(summary, 1, val);
  std::string ev = event_header(step);
  put_bytes(ev, 5, summary);
  write_record(ev);
}

EventWriter::~EventWriter() {
  try {
    flush();
  } catch (const std::exception&) {
    // Reported by the flush the owner calls after each epoch; here nobody is left to tell.
  }
}

void EventWriter::flush() {
  if (pending_.empty()) return;
  append_file_bytes(path_, pending_);
  pending_.clear();
}

void EventWriter::write_record(const std::string& payload) {
  uint64_t len = payload.size();
  char len_bytes[8];
  std::memcpy(len_bytes, &len, 8);  // little-endian hosts only, as TFRecord
  uint32_t len_crc = masked_crc32c(len_bytes, 8);
  uint32_t data_crc = masked_crc32c(payload.data(), payload.size());
  pending_.append(len_bytes, 8);
  pending_.append(reinterpret_cast<const char*>(&len_crc), 4);
  pending_.append(payload);
  pending_.append(reinterpret_cast<const char*>(&data_crc), 4);
}

std::vector<ScalarEvent> read_event_file(const std::filesystem::path& path,
                                         std::string* file_version) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read event file " + path.string());
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<ScalarEvent> out;
  size_t pos = 0;
  while (pos < data.size()) {
    if (data.size() - pos < 12) throw InputError(path.string() + ": truncated record header");
    uint64_t len;
    uint32_t len_crc, data_crc;
    std::memcpy(&len, data.data() + pos, 8);
    std::memcpy(&len_crc, data.data() + pos + 8, 4);
    if (len_crc != masked_crc32c(data.data() + pos, 8))
      throw InputError(path.string() + ": bad length CRC at offset " + std::to_string(pos));
    if (data.size() - pos - 12 < len + 4) throw InputError(path.string() + ": truncated record");
    std::string payload = data.substr(pos + 12, len);
    std::memcpy(&data_crc, data.data() + pos + 12 + len, 4);
    if (data_crc != masked_crc32c(payload.data(), payload.size()))
      throw InputError(path.string() + ": bad payload CRC at offset " + std::to_string(pos));
    pos += 12 + len + 4;

    Reader ev{payload, 0, payload.size()};
    int64_t step = 0;
    std::vector<ScalarEvent> values;
    while (!ev.done()) {
      uint64_t key = ev.varint();
      int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
      if (field == 2 && wire == 0) {
        step = static_cast<int64_t>(ev.varint());
      } else if (field == 3 && wire == 2) {
        size_t n = ev.varint();
        if (file_version) *file_version = payload.substr(ev.pos, n);
        ev.pos += n;
      } else if (field == 5 && wire == 2) {
        size_t n = ev.varint();
        Reader sum{payload, ev.pos, ev.pos + n};
        while (!sum.done()) {
          uint64_t k = sum.varint();
          if ((k >> 3) == 1 && (k & 7) == 2) {
            size_t vn = sum.varint();
            Reader val{payload, sum.pos, sum.pos + vn};
            ScalarEvent se;
            while (!val.done()) {
              uint64_t vk = val.varint();
              if ((vk >> 3) == 1 && (vk & 7) == 2) {
                size_t tn = val.varint();
                se.tag = payload.substr(val.pos, tn);
                val.pos += tn;
              } else if ((vk >> 3) == 2 && (vk & 7) == 5) {
                std::memcpy(&se.value, payload.data() + val.pos, 4);
                val.pos += 4;
              } else {
                val.skip(static_cast<int>(vk & 7));
              }
            }
            values.push_back(se);
            sum.pos += vn;
          } else {
            sum.skip(static_cast<int>(k & 7));
          }
        }
        ev.pos += n;
      } else {
        ev.skip(wire);
      }
    }
    for (auto& v : values) {
      v.step = step;
      out.push_back(v);
    }
  }
  return out;
}

}  // namespace igb
