#include "options/tool_commands/partition_support.h"

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "data/image.h"
#include "data/image_folder.h"
#include "data/resize.h"
#include "data/video.h"

namespace igb::options {

namespace fs = std::filesystem;

namespace {

/// A frame of the model's input shape from an RGB image in [0, 1]: resized, grey when the model
/// takes one channel.
at::Tensor to_model_input(const at::Tensor& rgb, const graph::Shape& input,
                          const std::string& option) {
  at::Tensor x = data::imresize_to(rgb, input.at(2), input.at(3)).clamp(0, 1);
  if (input.at(1) == 1) x = data::rgb_to_y(x);
  if (x.size(0) != input.at(1))
    throw InputError(option + " gives RGB frames; the model takes " + std::to_string(input.at(1)) +
                     " channels");
  return x.unsqueeze(0).contiguous();
}

}  // namespace

std::vector<at::Tensor> read_model_frames(const fs::path& from, const graph::Shape& input,
                                          int count, const std::string& option) {
  if (input.size() != 4) throw InputError(option + " needs a model with a 4-D image input");
  std::vector<at::Tensor> frames;
  if (fs::is_directory(from)) {
    for (const auto& f : data::list_images(from)) {
      if (static_cast<int>(frames.size()) >= count) break;
      frames.push_back(to_model_input(data::read_image(f), input, option));
    }
  } else {
    data::VideoOptions vo;
    vo.max_frames = count;
    data::VideoFrames video(from, vo);
    data::VideoFrame f;
    while (video.next(f)) frames.push_back(to_model_input(f.rgb, input, option));
  }
  if (frames.size() < 2)
    throw InputError(option + " " + from.string() + " gives fewer than 2 frames");
  return frames;
}

CLI::Option* add_transfer_option(CLI::App& sub, std::string& transfer, const std::string& help) {
  return sub.add_option("--transfer", transfer, help)
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "fp16", "int8"}));
}

bool diff_mode(const std::string& mode) {
  if (mode != "full" && mode != "diff")
    throw InputError("--mode must be full or diff, not '" + mode + "'");
  return mode == "diff";
}

}  // namespace igb::options
