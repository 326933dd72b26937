#include "data/video.h"

#include <torch/torch.h>

#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>
#include <system_error>

#include "core/error.h"

namespace igb::data {

namespace fs = std::filesystem;

struct VideoFrames::Capture {
  cv::VideoCapture cap;
  /// The first frame, decoded when the file was opened to check it, and its time stamp.
  cv::Mat first;
  double first_ms = 0;
};

VideoFrames::VideoFrames(const fs::path& path, VideoOptions options)
    : capture_(std::make_unique<Capture>()), path_(path), options_(options) {
  if (options_.stride < 1) throw InputError("video stride must be at least 1");
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw InputError("video " + path.string() + " does not exist or is not a file");
  // OpenCV prints its own warnings when a backend fails; the one line below says what matters.
  if (!capture_->cap.open(path.string(), cv::CAP_FFMPEG) || !capture_->cap.isOpened())
    throw InputError("video " + path.string() + " cannot be opened as a video (not a format " +
                     "FFmpeg decodes, or damaged)");
  width_ = static_cast<int64_t>(capture_->cap.get(cv::CAP_PROP_FRAME_WIDTH));
  height_ = static_cast<int64_t>(capture_->cap.get(cv::CAP_PROP_FRAME_HEIGHT));
  if (width_ <= 0 || height_ <= 0 || width_ > options_.max_pixels / std::max<int64_t>(1, height_))
    throw InputError("video " + path.string() + " has frames of " + std::to_string(width_) + "x" +
                     std::to_string(height_) + " pixels; at most " +
                     std::to_string(options_.max_pixels) + " pixels are read");
  fps_ = capture_->cap.get(cv::CAP_PROP_FPS);
  if (!(fps_ > 0)) fps_ = 0;
  const double count = capture_->cap.get(cv::CAP_PROP_FRAME_COUNT);
  frame_count_ = count > 0 ? static_cast<int64_t>(count) : -1;
  if (!capture_->cap.read(capture_->first) || capture_->first.empty())
    throw InputError("video " + path.string() + " has no frame that decodes");
  capture_->first_ms = capture_->cap.get(cv::CAP_PROP_POS_MSEC);
}

VideoFrames::~VideoFrames() = default;

bool VideoFrames::next(VideoFrame& frame) {
  if (options_.max_frames > 0 && kept_ >= options_.max_frames) return false;
  cv::Mat bgr;
  double ms = 0;
  int64_t index = 0;
  for (;;) {
    index = decoded_;
    if (index == 0) {
      bgr = capture_->first;
      ms = capture_->first_ms;
      capture_->first.release();
      ++decoded_;
      break;
    }
    // Skipped frames are only grabbed: decoded, never converted.
    if (!capture_->cap.grab()) return false;
    ++decoded_;
    if (index % options_.stride != 0) continue;
    if (!capture_->cap.retrieve(bgr) || bgr.empty()) return false;
    ms = capture_->cap.get(cv::CAP_PROP_POS_MSEC);
    break;
  }
  if (bgr.cols != width_ || bgr.rows != height_)
    throw InputError("video " + path_.string() + ": frame " + std::to_string(index) + " is " +
                     std::to_string(bgr.cols) + "x" + std::to_string(bgr.rows) +
                     ", the stream says " + std::to_string(width_) + "x" + std::to_string(height_));
  cv::Mat rgb;
  cv::cvtColor(bgr, rgb, bgr.channels() == 1 ? cv::COLOR_GRAY2RGB : cv::COLOR_BGR2RGB);
  const auto t = torch::from_blob(rgb.data, {rgb.rows, rgb.cols, 3}, torch::kUInt8);
  frame.index = index;
  // The container's stamp of the frame just decoded when it has one, else its place at the
  // nominal rate.
  frame.seconds =
      ms > 0 || index == 0 ? ms / 1000.0 : (fps_ > 0 ? static_cast<double>(index) / fps_ : 0.0);
  frame.rgb = t.permute({2, 0, 1}).to(torch::kFloat32).div_(255.0f).contiguous();
  ++kept_;
  return true;
}

}  // namespace igb::data
