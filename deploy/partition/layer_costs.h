#pragma once

#include <torch/nn/module.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "deploy/partition/devices_file.h"
#include "graph/summary_graph.h"

namespace igb {
class Logger;
}

namespace igb::deploy {

/// What one machine measured for one model at one input size: the time of every op of the summary
/// graph for one frame (batch 1). Written as JSON (docs/file-formats.md) so a machine that is not
/// this one can measure and another plans with it.
struct LayerCosts {
  std::string model;
  /// graph_fingerprint() of the measured graph: a pruned or thinned model is another model.
  std::string fingerprint;
  graph::Shape input;
  /// Who measured: host name, CPU model and threads ("host · CPU · 2 threads").
  std::string machine;
  int threads = 1;
  /// What was timed: "inference form" (runtime/inference_model.h, as igb deploys a model: a fused
  /// chain's time on its layer, 0 on the ops fused into it), "INT8 inference form" (the same with
  /// a quantized model's layers in integers) or "eager" (each op alone in LibTorch; files without
  /// the key).
  std::string runtime = "eager";
  /// Forward milliseconds by op name.
  std::map<std::string, double> ms;
};

/// A short hash (16 hex digits) of the graph's ops, types, shapes and parameter shapes.
std::string graph_fingerprint(const graph::SummaryGraph& graph);
/// This machine and its thread count, as LayerCosts::machine names it.
std::string this_machine();

/// Times every op of `graph` on this machine (median of `repeats` after two warm-up runs), in
/// the model's inference form (its quantized layers in integers with `int8`) unless `inference`
/// is false (each op alone in LibTorch).
LayerCosts measure_layer_costs(torch::nn::Module& model, const graph::SummaryGraph& graph,
                               const graph::SummaryGraph::Forward& forward, int repeats = 5,
                               bool inference = true, bool int8 = false);

/// The costs of `graph` on this machine from the cache folder when a file there matches the
/// model, fingerprint, input, machine and runtime (the inference form, in integers with `int8`);
/// measured and stored there otherwise.
/// `cache_dir`: IGB_CACHE_DIR/layer-costs, else ~/.cache/igb/layer-costs, when empty.
LayerCosts cached_layer_costs(torch::nn::Module& model, const graph::SummaryGraph& graph,
                              const graph::SummaryGraph::Forward& forward,
                              std::filesystem::path cache_dir = {}, bool* from_cache = nullptr,
                              bool int8 = false);

void write_layer_costs(const LayerCosts& costs, const std::filesystem::path& path);
/// Reads a cost file; InputError naming the file and the entry when it is not one.
LayerCosts read_layer_costs(const std::filesystem::path& path);

/// Checks that `costs` were measured for `graph` (same input, every op present); InputError
/// naming the file, the model and the first op missing otherwise. A different fingerprint is
/// allowed only when every op is present (a retrained model of the same shape).
void check_layer_costs(const LayerCosts& costs, const graph::SummaryGraph& graph,
                       const std::string& where);

/// One cost table per device of `devices`, in chain order: the device's own cost file (checked
/// against the graph), or this machine's measurement of the inference form (its quantized layers
/// in integers with `int8`; cached in `cache_dir`, logged), measured once for every device that
/// has no file.
///
///   auto costs = device_layer_costs(load_devices_file("chain.yaml"), *model, graph, forward,
///                                   "", logger);
std::vector<LayerCosts> device_layer_costs(const DevicesFile& devices, torch::nn::Module& model,
                                           const graph::SummaryGraph& graph,
                                           const graph::SummaryGraph::Forward& forward,
                                           const std::string& cache_dir, Logger& logger,
                                           bool int8 = false);

}  // namespace igb::deploy
