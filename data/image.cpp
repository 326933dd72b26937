#include "data/image.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/error.h"
#include "core/fs.h"

namespace igb::data {

namespace fs = std::filesystem;

at::Tensor read_image(const fs::path& path) {
  if (!fs::exists(path)) throw InputError("image " + path.string() + " does not exist");
  cv::Mat img;
  try {
    img = cv::imread(path.string(), cv::IMREAD_COLOR);
  } catch (const cv::Exception& e) {
    throw InputError("image " + path.string() + " cannot be decoded: " + e.msg);
  }
  if (img.empty() || img.rows < 1 || img.cols < 1)
    throw InputError("image " + path.string() + " is unreadable or corrupt (cannot decode it)");
  cv::cvtColor(img, img, cv::COLOR_BGR2RGB);
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
    std::ofstream out(tmp, std::ios::binary);
    out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
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
