// What igb-tools partition and igb-serve master share: frames of a video or folder at a model's
// input size, and the per-op costs of every device of a devices file.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <filesystem>
#include <string>
#include <vector>

#include "deploy/partition/devices_file.h"
#include "deploy/partition/layer_costs.h"
#include "graph/summary_graph.h"

namespace igb {
class Logger;
}

namespace igb::options {

/// Up to `count` frames of a video file (OpenCV) or of a folder's images (sorted by name), each
/// resized to the model's input (batch 1, values in [0, 1], grey for a one-channel model).
/// InputError naming `option` when `from` gives fewer than 2 frames or the model takes no image.
std::vector<at::Tensor> read_model_frames(const std::filesystem::path& from,
                                          const graph::Shape& input, int count,
                                          const std::string& option);

/// One cost table per device of `devices`, in chain order: the device's own cost file (checked
/// against the graph), or this machine's measurement of the inference form (its quantized layers
/// in integers with `int8`; cached in `cache_dir`, logged).
std::vector<deploy::LayerCosts> device_layer_costs(const deploy::DevicesFile& devices,
                                                   torch::nn::Module& model,
                                                   const graph::SummaryGraph& graph,
                                                   const graph::SummaryGraph::Forward& forward,
                                                   const std::string& cache_dir, Logger& logger,
                                                   bool int8 = false);

}  // namespace igb::options
