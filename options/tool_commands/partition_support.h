// What igb-tools partition and igb-serve master share: frames of a video or folder at a model's
// input size, and the options of how a plan's tensors travel (--transfer, --mode).
#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <string>
#include <vector>

#include "graph/summary_graph.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace igb::options {

/// Up to `count` frames of a video file (OpenCV) or of a folder's images (sorted by name), each
/// resized to the model's input (batch 1, values in [0, 1], grey for a one-channel model).
/// InputError naming `option` when `from` gives fewer than 2 frames or the model takes no image.
std::vector<at::Tensor> read_model_frames(const std::filesystem::path& from,
                                          const graph::Shape& input, int count,
                                          const std::string& option);

/// Adds --transfer fp32|fp16|int8 bound to `transfer` (its value is the default shown): the
/// precision of the tensors a plan sends between devices, described by `help`.
CLI::Option* add_transfer_option(CLI::App& sub, std::string& transfer, const std::string& help);

/// Whether `mode` (--mode) sends the frames after the first as differences ("diff") or whole
/// tensors ("full"); InputError for anything else.
bool diff_mode(const std::string& mode);

}  // namespace igb::options
