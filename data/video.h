#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace igb::data {

/// One decoded video frame.
struct VideoFrame {
  /// Its position in the file, from 0 (frames skipped by a stride count too).
  int64_t index = 0;
  /// Its presentation time in seconds, as the container stamps it.
  double seconds = 0;
  /// RGB [3, H, W] in [0, 1].
  at::Tensor rgb;
};

/// What a VideoFrames reads.
struct VideoOptions {
  /// Keep every `stride`-th frame (1: all).
  int64_t stride = 1;
  /// Stop after this many kept frames (0: the whole file).
  int64_t max_frames = 0;
  /// The largest frame accepted, in pixels (width × height); a larger one is refused from the
  /// stream's header.
  int64_t max_pixels = 100'000'000;
};

/// The frames of a video file in order, decoded by OpenCV's VideoCapture (FFmpeg: AVI, MP4, MKV,
/// ...): a source for the serving chain and for profiling on real frames. Opening checks the
/// file and its first frame; a file that is missing, not a video, empty or over `max_pixels` is
/// an InputError naming it.
///
///   VideoFrames video("/usr/share/doc/opencv-doc/examples/data/vtest.avi");
///   VideoFrame f;
///   while (video.next(f)) use(f.index, f.seconds, f.rgb);
class VideoFrames {
 public:
  explicit VideoFrames(const std::filesystem::path& path, VideoOptions options = {});
  ~VideoFrames();
  VideoFrames(const VideoFrames&) = delete;
  VideoFrames& operator=(const VideoFrames&) = delete;

  /// The next kept frame; false at the end of the file (or after max_frames).
  bool next(VideoFrame& frame);

  const std::filesystem::path& path() const { return path_; }
  int64_t width() const { return width_; }
  int64_t height() const { return height_; }
  /// Frames per second as the container says (0 when it does not).
  double fps() const { return fps_; }
  /// Frames in the file as the container says (it may be an estimate; -1 when unknown).
  int64_t frame_count() const { return frame_count_; }

 private:
  struct Capture;
  std::unique_ptr<Capture> capture_;
  std::filesystem::path path_;
  VideoOptions options_;
  int64_t width_ = 0, height_ = 0, frame_count_ = -1;
  double fps_ = 0;
  /// Frames decoded so far and frames handed out.
  int64_t decoded_ = 0, kept_ = 0;
};

}  // namespace igb::data
