#include "data/image.h"

#include <jpeglib.h>
// jpeglib.h needs <cstdio> first; clang-format keeps this block apart.
#include <jerror.h>
#include <png.h>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "core/fs.h"

namespace igb::data {

namespace fs = std::filesystem;

namespace {

uint32_t byte_at(const std::string& b, size_t i) { return static_cast<uint8_t>(b[i]); }
uint32_t be32(const std::string& b, size_t i) {
  return (byte_at(b, i) << 24) | (byte_at(b, i + 1) << 16) | (byte_at(b, i + 2) << 8) |
         byte_at(b, i + 3);
}
uint32_t le16(const std::string& b, size_t i) { return byte_at(b, i) | (byte_at(b, i + 1) << 8); }
uint32_t le32(const std::string& b, size_t i) { return le16(b, i) | (le16(b, i + 2) << 16); }

// CRC-32 of PNG chunks (ISO 3309, polynomial 0xEDB88320).
uint32_t crc32(const std::string& b, size_t begin, size_t end) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = begin; i < end; ++i) c = table[(c ^ byte_at(b, i)) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

// The walks below find what would make a decoder fail or complain, so a broken file is refused
// with a reason before OpenCV, libpng or libjpeg see it (they print to stderr on their own).
// Each returns "" for a sound file.

std::string png_problem(const std::string& b) {
  const std::string at_end = " (the data ends at byte " + std::to_string(b.size());
  size_t i = 8;
  bool first = true;
  while (true) {
    if (i + 8 > b.size()) return "a truncated PNG" + at_end + ", before its IEND chunk)";
    const uint32_t len = be32(b, i);
    const std::string type = b.substr(i + 4, 4);
    for (char c : type)
      if (!std::isalpha(static_cast<unsigned char>(c)))
        return "a damaged PNG (no chunk header at byte " + std::to_string(i) + ")";
    if (first && type != "IHDR") return "a damaged PNG (it does not start with an IHDR chunk)";
    first = false;
    if (len > 0x7FFFFFFFu || i + 12 + static_cast<size_t>(len) > b.size())
      return "a truncated PNG" + at_end + ", inside chunk " + type + ")";
    if (crc32(b, i + 4, i + 8 + len) != be32(b, i + 8 + len))
      return "a damaged PNG (chunk " + type + " at byte " + std::to_string(i) + " fails its CRC)";
    if (type == "IEND") return "";
    i += 12 + len;
  }
}

std::string jpeg_problem(const std::string& b) {
  const size_t n = b.size();
  const std::string truncated = "a truncated JPEG (the data ends at byte " + std::to_string(n) +
                                ", before its end-of-image marker)";
  size_t i = 2;
  bool in_scan = false, scanned = false;
  while (true) {
    if (in_scan) {
      // Entropy-coded data: 0xFF is followed by 0x00 (a stuffed byte), a restart marker, more
      // 0xFF (fill) or the next marker.
      while (i + 1 < n &&
             !(byte_at(b, i) == 0xFF && byte_at(b, i + 1) != 0x00 && byte_at(b, i + 1) != 0xFF &&
               !(byte_at(b, i + 1) >= 0xD0 && byte_at(b, i + 1) <= 0xD7)))
        ++i;
      if (i + 1 >= n) return truncated;
      in_scan = false;
    } else {
      // Between segments libjpeg skips stray bytes up to the next marker.
      while (true) {
        while (i < n && byte_at(b, i) != 0xFF) ++i;
        while (i < n && byte_at(b, i) == 0xFF) ++i;
        if (i >= n) return truncated;
        if (byte_at(b, i) != 0x00) break;
      }
      --i;
    }
    const uint32_t marker = byte_at(b, i + 1);
    i += 2;
    if (marker == 0xD9) return scanned ? "" : "a damaged JPEG (it holds no image data)";
    if ((marker >= 0xD0 && marker <= 0xD8) || marker == 0x01) continue;  // no length
    if (i + 2 > n) return truncated;
    const size_t len = (byte_at(b, i) << 8) | byte_at(b, i + 1);
    if (len < 2) return "a damaged JPEG (a segment at byte " + std::to_string(i) + " is empty)";
    if (i + len > n) return truncated;
    i += len;
    if (marker == 0xDA) in_scan = scanned = true;
  }
}

std::string bmp_problem(const std::string& b) {
  const std::string truncated = "a truncated BMP (" + std::to_string(b.size()) + " bytes";
  if (b.size() < 26) return truncated + ", less than its header)";
  const uint64_t offset = le32(b, 10), header = le32(b, 14);
  int64_t width, height;
  uint32_t bits, compression = 0;
  if (header == 12) {
    width = le16(b, 18);
    height = le16(b, 20);
    bits = le16(b, 24);
  } else {
    if (b.size() < 34 || b.size() < 14 + std::min<uint64_t>(header, 40))
      return truncated + ", less than its header)";
    width = static_cast<int32_t>(le32(b, 18));
    height = static_cast<int32_t>(le32(b, 22));
    bits = le16(b, 28);
    compression = le32(b, 30);
  }
  if (width <= 0 || height == 0 || width > (1 << 20) || std::abs(height) > (1 << 20) || bits == 0 ||
      bits > 32)
    return "a damaged BMP (its header gives " + std::to_string(width) + "x" +
           std::to_string(height) + " pixels of " + std::to_string(bits) + " bits)";
  // Uncompressed rows are padded to 4 bytes; compressed data has no size to check here.
  if (compression == 0 || compression == 3 || compression == 6) {
    const uint64_t need = offset + (static_cast<uint64_t>(width) * bits + 31) / 32 * 4 *
                                       static_cast<uint64_t>(std::abs(height));
    if (b.size() < need) return truncated + ", its header promises " + std::to_string(need) + ")";
  }
  return "";
}

// Width and height of a JPEG from its first start-of-frame segment; {0, 0} when it has none
// before its scan (jpeg_problem has walked the segments already).
std::pair<uint64_t, uint64_t> jpeg_size(const std::string& b) {
  size_t i = 2;
  while (i + 4 <= b.size()) {
    while (i < b.size() && byte_at(b, i) != 0xFF) ++i;
    while (i < b.size() && byte_at(b, i) == 0xFF) ++i;
    if (i + 3 > b.size()) break;
    const uint32_t marker = byte_at(b, i);
    ++i;
    if ((marker >= 0xD0 && marker <= 0xD8) || marker == 0x01) continue;
    const size_t len = (byte_at(b, i) << 8) | byte_at(b, i + 1);
    const bool frame =
        marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame && len >= 7 && i + 7 <= b.size())
      return {(byte_at(b, i + 5) << 8) | byte_at(b, i + 6),
              (byte_at(b, i + 3) << 8) | byte_at(b, i + 4)};
    if (marker == 0xDA || len < 2) break;
    i += len;
  }
  return {0, 0};
}

// Width and height an image's header claims, before anything is decoded.
std::pair<uint64_t, uint64_t> claimed_size(const std::string& b, const std::string& kind) {
  if (kind == "PNG" && b.size() >= 24) return {be32(b, 16), be32(b, 20)};
  if (kind == "JPEG") return jpeg_size(b);
  if (kind == "BMP" && b.size() >= 26) {
    if (le32(b, 14) == 12) return {le16(b, 18), le16(b, 20)};
    const auto h = static_cast<int32_t>(le32(b, 22));
    return {static_cast<int32_t>(le32(b, 18)) < 0 ? 0 : le32(b, 18),
            static_cast<uint64_t>(h < 0 ? -static_cast<int64_t>(h) : h)};
  }
  return {0, 0};
}

// Why `bytes` cannot be an image, or "" when it looks sound; `kind` is set to its format.
std::string image_problem(const std::string& bytes, std::string& kind) {
  if (bytes.empty()) return "the file is empty";
  if (bytes.compare(0, 8, "\x89PNG\r\n\x1a\n", 8) == 0) {
    kind = "PNG";
    return png_problem(bytes);
  }
  if (bytes.size() >= 3 && byte_at(bytes, 0) == 0xFF && byte_at(bytes, 1) == 0xD8 &&
      byte_at(bytes, 2) == 0xFF) {
    kind = "JPEG";
    return jpeg_problem(bytes);
  }
  if (bytes.compare(0, 2, "BM") == 0) {
    kind = "BMP";
    return bmp_problem(bytes);
  }
  return "not an image (its data is not PNG, JPEG or BMP)";
}

// libjpeg reports through an error manager that prints to stderr and exits by default; this one
// prints nothing, turns a fatal error into a longjmp back to decode_jpeg, and turns a warning that
// means damaged image data into a refusal (JPEG has no checksum: such a file decodes to wrong
// pixels, and libjpeg would otherwise only print a line).
struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr info) {
  auto* e = reinterpret_cast<JpegErrors*>(info->err);
  e->mgr.format_message(info, e->message);
  std::longjmp(e->jump, 1);
}

// What a libjpeg warning says about the file, or nullptr when the pixels are still right.
const char* jpeg_warning_problem(int code) {
  switch (code) {
    case JWRN_HUFF_BAD_CODE:
    case JWRN_ARITH_BAD_CODE:
      return "a damaged JPEG (its compressed image data holds an invalid code)";
    case JWRN_HIT_MARKER:
    case JWRN_EXTRANEOUS_DATA:
    case JWRN_MUST_RESYNC:
      return "a damaged JPEG (a marker or stray bytes interrupt its compressed image data)";
    case JWRN_JPEG_EOF:
      return "a truncated JPEG (its image data ends early)";
    case JWRN_BOGUS_PROGRESSION:
    case JWRN_NOT_SEQUENTIAL:
      return "a damaged JPEG (its scans are inconsistent)";
    default:
      return nullptr;
  }
}

void jpeg_message(j_common_ptr info, int level) {
  if (level >= 0) return;  // trace messages
  auto* e = reinterpret_cast<JpegErrors*>(info->err);
  if (const char* problem = jpeg_warning_problem(e->mgr.msg_code)) {
    std::snprintf(e->message, sizeof e->message, "%s", problem);
    std::longjmp(e->jump, 2);
  }
}

// Pixels of a decoded JPEG or PNG, owned outside decode_jpeg's frame (see below).
struct DecodedPixels {
  std::vector<unsigned char> data;
  std::vector<unsigned char*> rows_ptrs;  // for libpng
  int rows = 0, cols = 0, channels = 0;
  bool adobe = false;
};

// Decodes a JPEG into `out` (RGB, or CMYK with channels = 4); returns 0, or 1 for a fatal libjpeg
// error and 2 for damaged data, with the reason in `message`. No object with a destructor lives in
// this frame, and everything written after setjmp is in `out` or `info`, which a longjmp keeps.
int decode_jpeg(const std::string& bytes, DecodedPixels& out, JpegErrors& errors) {
  jpeg_decompress_struct info;
  info.err = jpeg_std_error(&errors.mgr);
  errors.mgr.error_exit = jpeg_fail;
  errors.mgr.emit_message = jpeg_message;
  errors.message[0] = '\0';
  if (const int failed = setjmp(errors.jump)) {
    jpeg_destroy_decompress(&info);
    return failed;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&info, TRUE);
  const bool cmyk = info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK;
  info.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&info);
  out.rows = static_cast<int>(info.output_height);
  out.cols = static_cast<int>(info.output_width);
  out.channels = cmyk ? 4 : 3;
  out.data.resize(static_cast<size_t>(out.rows) * out.cols * out.channels);
  while (info.output_scanline < info.output_height) {
    JSAMPROW row =
        out.data.data() + static_cast<size_t>(info.output_scanline) * out.cols * out.channels;
    jpeg_read_scanlines(&info, &row, 1);
  }
  out.adobe = info.saw_Adobe_marker;
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return 0;
}

// A JPEG as an RGB image; InputError naming `path` when libjpeg cannot decode it.
cv::Mat read_jpeg(const std::string& bytes, const fs::path& path) {
  DecodedPixels px;
  JpegErrors errors;
  if (const int failed = decode_jpeg(bytes, px, errors))
    throw InputError(
        "image " + path.string() + " is unreadable or corrupt: " +
        (failed == 2 ? std::string(errors.message)
                     : "a damaged JPEG (the decoder says: " + std::string(errors.message) + ")"));
  if (px.channels == 3) return cv::Mat(px.rows, px.cols, CV_8UC3, px.data.data()).clone();
  // Adobe's CMYK JPEGs store inverted inks, so each colour is ink × black / 255.
  cv::Mat rgb(px.rows, px.cols, CV_8UC3);
  for (int y = 0; y < px.rows; ++y)
    for (int x = 0; x < px.cols; ++x) {
      const unsigned char* p = px.data.data() + (static_cast<size_t>(y) * px.cols + x) * 4;
      const int k = px.adobe ? p[3] : 255 - p[3];
      auto& q = rgb.at<cv::Vec3b>(y, x);
      for (int c = 0; c < 3; ++c)
        q[c] = static_cast<uchar>((px.adobe ? p[c] : 255 - p[c]) * k / 255);
    }
  return rgb;
}

// libpng prints "libpng error/warning" lines by default; these handlers keep the first error's
// text and jump back to decode_png, and drop warnings (they describe metadata, such as an
// unusual colour profile, and leave the pixels right).
struct PngErrors {
  std::jmp_buf jump;
  char message[256];
};

void png_fail(png_structp png, png_const_charp message) {
  auto* e = static_cast<PngErrors*>(png_get_error_ptr(png));
  std::snprintf(e->message, sizeof e->message, "%s", message);
  std::longjmp(e->jump, 1);
}

void png_quiet(png_structp, png_const_charp) {}

struct PngSource {
  const std::string* bytes;
  size_t at;
};

void png_read_memory(png_structp png, png_bytep out, size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->bytes->size() - src->at) png_error(png, "the data ends early");
  std::memcpy(out, src->bytes->data() + src->at, n);
  src->at += n;
}

// Decodes a PNG into 8-bit RGB in `out` (as OpenCV would: 16-bit samples keep their high byte,
// palettes and grey are expanded, alpha is dropped); returns false with the reason in `errors`.
// As in decode_jpeg, nothing with a destructor lives in this frame.
bool decode_png(const std::string& bytes, DecodedPixels& out, PngErrors& errors) {
  PngSource src{&bytes, 0};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &errors, png_fail, png_quiet);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(errors.message, sizeof errors.message, "out of memory");
    return false;
  }
  if (setjmp(errors.jump)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, &src, png_read_memory);
  png_read_info(png, info);
  png_set_strip_16(png);
  png_set_palette_to_rgb(png);
  png_set_expand_gray_1_2_4_to_8(png);
  png_set_gray_to_rgb(png);
  png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  out.rows = static_cast<int>(png_get_image_height(png, info));
  out.cols = static_cast<int>(png_get_image_width(png, info));
  out.channels = 3;
  if (png_get_rowbytes(png, info) != static_cast<size_t>(out.cols) * 3)
    png_error(png, "an unsupported pixel layout");
  out.data.resize(static_cast<size_t>(out.rows) * out.cols * 3);
  out.rows_ptrs.resize(static_cast<size_t>(out.rows));
  for (int y = 0; y < out.rows; ++y)
    out.rows_ptrs[y] = out.data.data() + static_cast<size_t>(y) * out.cols * 3;
  png_read_image(png, out.rows_ptrs.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

}  // namespace

namespace {

/// The file's bytes and format, checked as check_image says.
std::string checked_image_bytes(const fs::path& path, int64_t max_pixels, std::string& kind) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) throw InputError("image " + path.string() + " does not exist");
  if (fs::is_directory(status)) throw InputError("image " + path.string() + " is a folder");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("image " + path.string() + " is unreadable: " + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw InputError("image " + path.string() + " is unreadable: read error");
  const std::string problem = image_problem(bytes, kind);
  if (!problem.empty())
    throw InputError("image " + path.string() + " is unreadable or corrupt: " + problem);
  // A small file may claim a huge image (a decompression bomb): the header decides, before any
  // pixel is allocated.
  const auto [width, height] = claimed_size(bytes, kind);
  if (static_cast<__int128>(width) * height > max_pixels)
    throw InputError("image " + path.string() + " is " + std::to_string(width) + "x" +
                     std::to_string(height) + " pixels, more than the limit of " +
                     std::to_string(max_pixels) + " (--max-image-pixels)");
  return bytes;
}

}  // namespace

void check_image(const fs::path& path, int64_t max_pixels) {
  std::string kind;
  checked_image_bytes(path, max_pixels, kind);
}

at::Tensor read_image(const fs::path& path, int64_t max_pixels) {
  std::string kind;
  const std::string bytes = checked_image_bytes(path, max_pixels, kind);
  // OpenCV's own log lines would come before our one line; our message says what it would.
  static std::once_flag quiet_opencv;
  std::call_once(quiet_opencv,
                 [] { cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT); });
  cv::Mat img;
  if (kind == "JPEG") {
    img = read_jpeg(bytes, path);  // RGB already
  } else if (kind == "PNG") {
    DecodedPixels px;
    PngErrors errors;
    if (!decode_png(bytes, px, errors))
      throw InputError("image " + path.string() + " is unreadable or corrupt: a damaged PNG (" +
                       errors.message + ")");
    img = cv::Mat(px.rows, px.cols, CV_8UC3, px.data.data()).clone();
  } else {
    try {
      const cv::Mat raw(1, static_cast<int>(bytes.size()), CV_8UC1,
                        const_cast<char*>(bytes.data()));
      img = cv::imdecode(raw, cv::IMREAD_COLOR);
    } catch (const cv::Exception&) {
      img.release();
    }
    if (!img.empty()) cv::cvtColor(img, img, cv::COLOR_BGR2RGB);
  }
  if (img.empty() || img.rows < 1 || img.cols < 1)
    throw InputError("image " + path.string() + " is unreadable or corrupt: its " + kind +
                     " data cannot be decoded");
  auto t = torch::from_blob(img.data, {img.rows, img.cols, 3}, torch::kUInt8).clone();
  return t.permute({2, 0, 1}).to(torch::kFloat32).div_(255.0f).contiguous();
}

void write_image(const fs::path& path, const at::Tensor& chw) {
  TORCH_CHECK(chw.dim() == 3 && (chw.size(0) == 1 || chw.size(0) == 3),
              "write_image expects [1|3, H, W], got ", chw.sizes());
  auto u8 = chw.detach()
                .cpu()
                .clamp(0, 1)
                .mul(255)
                .round()
                .to(torch::kUInt8)
                .permute({1, 2, 0})
                .contiguous();
  cv::Mat img(static_cast<int>(u8.size(0)), static_cast<int>(u8.size(1)),
              chw.size(0) == 3 ? CV_8UC3 : CV_8UC1, u8.data_ptr());
  if (chw.size(0) == 3) cv::cvtColor(img, img, cv::COLOR_RGB2BGR);
  std::string ext = path.extension().string();
  write_atomically(path, [&](const fs::path& tmp) {
    std::vector<uchar> buf;
    if (!cv::imencode(ext.empty() ? ".png" : ext, img, buf))
      throw std::runtime_error("cannot encode image " + path.string());
    write_file_bytes(tmp, std::string(buf.begin(), buf.end()), path);
  });
}

at::Tensor rgb_to_y(const at::Tensor& rgb) {
  int64_t c = rgb.dim() - 3;
  TORCH_CHECK(rgb.dim() >= 3 && rgb.size(c) == 3, "rgb_to_y expects 3 channels, got ", rgb.sizes());
  auto r = rgb.select(c, 0), g = rgb.select(c, 1), b = rgb.select(c, 2);
  return ((r * 65.481 + g * 128.553 + b * 24.966 + 16.0) / 255.0).unsqueeze(c);
}

at::Tensor rgb_to_ycbcr(const at::Tensor& rgb) {
  int64_t c = rgb.dim() - 3;
  auto r = rgb.select(c, 0), g = rgb.select(c, 1), b = rgb.select(c, 2);
  auto y = r * 65.481 + g * 128.553 + b * 24.966 + 16.0;
  auto cb = r * -37.797 + g * -74.203 + b * 112.0 + 128.0;
  auto cr = r * 112.0 + g * -93.786 + b * -18.214 + 128.0;
  return torch::stack({y, cb, cr}, c) / 255.0;
}

at::Tensor ycbcr_to_rgb(const at::Tensor& ycbcr) {
  int64_t c = ycbcr.dim() - 3;
  auto y = ycbcr.select(c, 0) * 255.0 - 16.0;
  auto cb = ycbcr.select(c, 1) * 255.0 - 128.0;
  auto cr = ycbcr.select(c, 2) * 255.0 - 128.0;
  // Inverse of the 3x3 matrix above (MATLAB's ycbcr2rgb), in 1/255 units.
  auto r = y * 0.00456621 + cr * 0.00625893;
  auto g = y * 0.00456621 + cb * -0.00153632 + cr * -0.00318811;
  auto b = y * 0.00456621 + cb * 0.00791071;
  return torch::stack({r, g, b}, c);
}

at::Tensor quantize_8bit(const at::Tensor& x) { return x.clamp(0, 1).mul(255).round().div(255); }

bool is_image_file(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp";
}

}  // namespace igb::data
