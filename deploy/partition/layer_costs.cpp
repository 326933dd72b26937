#include "deploy/partition/layer_costs.h"

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "core/cache_dir.h"
#include "core/error.h"
#include "core/finite_number.h"
#include "core/fs.h"
#include "core/host.h"
#include "core/json_reader.h"
#include "core/logger.h"
#include "core/text.h"
#include "tools/profile.h"

namespace igb::deploy {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string graph_fingerprint(const graph::SummaryGraph& graph) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;
  };
  mix(graph::shape_to_string(graph.input_shape()));
  for (const auto& op : graph.ops()) {
    mix(op.name);
    mix(op.type);
    for (int v : op.outputs) mix(graph::shape_to_string(graph.shape(v)));
    for (const auto& s : op.param_shapes) mix(graph::shape_to_string(s));
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string this_machine() {
  const int threads = at::get_num_threads();
  return host_name() + " · " + cpu_name() + " · " + std::to_string(threads) +
         (threads == 1 ? " thread" : " threads");
}

LayerCosts measure_layer_costs(torch::nn::Module& model, const graph::SummaryGraph& graph,
                               const graph::SummaryGraph::Forward& forward, int repeats,
                               bool inference, bool int8) {
  tools::ProfileOptions options;
  options.inference = inference;
  options.int8 = inference && int8;
  options.batch_sizes = {1};
  options.top = 0;
  options.repeats = std::max(1, repeats);
  const auto profile =
      tools::profile_model(model, graph.input_shape(), forward, graph.model_name(), options);
  LayerCosts c;
  c.model = graph.model_name();
  c.fingerprint = graph_fingerprint(graph);
  c.input = graph.input_shape();
  c.machine = this_machine();
  c.threads = at::get_num_threads();
  c.runtime = profile.runtime;
  for (const auto& layer : profile.batches.at(0).layers) c.ms[layer.name] = layer.forward_ms;
  return c;
}

void write_layer_costs(const LayerCosts& c, const fs::path& path) {
  json j = {{"format", "igb layer costs"},  {"version", 1},     {"model", c.model},
            {"fingerprint", c.fingerprint}, {"input", c.input}, {"machine", c.machine},
            {"threads", c.threads},         {"unit", "ms"},     {"runtime", c.runtime},
            {"ops", json::object()}};
  for (const auto& [name, ms] : c.ms) j["ops"][name] = ms;
  if (!path.parent_path().empty()) fs::create_directories(path.parent_path());
  write_text_atomically(path, j.dump(1) + "\n");
}

LayerCosts read_layer_costs(const fs::path& path) {
  const std::string where = path.string();
  json j;
  try {
    j = json::parse(read_input_file(path));
  } catch (const json::exception& e) {
    throw InputError(where + " is not a layer cost file: " + json_error_text(e));
  }
  auto bad = [&](const std::string& what) {
    return InputError(where + " is not a layer cost file: " + what);
  };
  if (!j.is_object() || j.value("format", "") != "igb layer costs")
    throw bad("its \"format\" is not \"igb layer costs\"");
  if (!j.contains("version") || j["version"] != 1) throw bad("only version 1 is read");
  LayerCosts c;
  try {
    c.model = j.at("model").get<std::string>();
    c.fingerprint = j.value("fingerprint", "");
    c.input = j.at("input").get<graph::Shape>();
    c.machine = j.value("machine", "");
    c.threads = j.value("threads", 1);
    c.runtime = j.value("runtime", std::string("eager"));
    if (c.runtime != "eager" && c.runtime != "inference form" && c.runtime != "INT8 inference form")
      throw bad("\"runtime\" must be \"inference form\", \"INT8 inference form\" or \"eager\"");
    if (j.value("unit", "ms") != "ms") throw bad("\"unit\" must be \"ms\"");
    for (const auto& [name, ms] : j.at("ops").items()) {
      if (!ms.is_number()) throw bad("op '" + name + "' has no number of milliseconds");
      const double v = ms.get<double>();
      if (!finite_number(v) || v < 0)
        throw bad("op '" + name + "' has a negative or non-finite cost");
      c.ms[name] = v;
    }
  } catch (const json::exception& e) {
    throw bad(json_error_text(e));
  }
  return c;
}

void check_layer_costs(const LayerCosts& c, const graph::SummaryGraph& graph,
                       const std::string& where) {
  if (c.input != graph.input_shape())
    throw InputError(where + " holds costs for input " + graph::shape_to_string(c.input) +
                     ", not " + graph::shape_to_string(graph.input_shape()));
  for (const auto& op : graph.ops())
    if (!c.ms.count(op.name))
      throw InputError(where + " has no cost for op '" + op.name + "' of " + graph.model_name() +
                       " (measured for " + c.model + ")");
}

LayerCosts cached_layer_costs(torch::nn::Module& model, const graph::SummaryGraph& graph,
                              const graph::SummaryGraph::Forward& forward, fs::path cache_dir,
                              bool* from_cache, bool int8) {
  const std::string runtime = int8 ? "INT8 inference form" : "inference form";
  if (cache_dir.empty()) cache_dir = igb::cache_dir("layer-costs");
  const std::string fingerprint = graph_fingerprint(graph);
  const std::string machine = this_machine();
  char tag[17];
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : machine) h = (h ^ ch) * 1099511628211ULL;
  std::snprintf(tag, sizeof tag, "%016llx", static_cast<unsigned long long>(h));
  const fs::path file =
      cache_dir / (graph.model_name() + "_" + graph::shape_to_string(graph.input_shape()) + "_" +
                   fingerprint + "_" + tag + (int8 ? "_int8" : "") + ".json");
  if (fs::exists(file)) {
    try {
      LayerCosts c = read_layer_costs(file);
      if (c.fingerprint == fingerprint && c.machine == machine && c.runtime == runtime) {
        check_layer_costs(c, graph, file.string());
        if (from_cache) *from_cache = true;
        return c;
      }
    } catch (const InputError&) {
      // A damaged cache entry is measured again and replaced.
    }
  }
  LayerCosts c = measure_layer_costs(model, graph, forward, 5, true, int8);
  try {
    write_layer_costs(c, file);
  } catch (const std::exception&) {
    // A cache that cannot be written costs a measurement next time, nothing else.
  }
  if (from_cache) *from_cache = false;
  return c;
}

std::vector<LayerCosts> device_layer_costs(const DevicesFile& devices, torch::nn::Module& model,
                                           const graph::SummaryGraph& graph,
                                           const graph::SummaryGraph::Forward& forward,
                                           const std::string& cache_dir, Logger& logger,
                                           bool int8) {
  std::vector<LayerCosts> out;
  std::optional<LayerCosts> measured;
  for (const auto& d : devices.devices) {
    if (!d.costs.empty()) {
      auto c = read_layer_costs(d.costs);
      check_layer_costs(c, graph, d.costs.string());
      out.push_back(std::move(c));
      continue;
    }
    if (!measured) {
      bool cached = false;
      measured = cached_layer_costs(model, graph, forward, cache_dir, &cached, int8);
      logger.info(std::string(cached ? "read cached" : "measured") + " per-op costs of " +
                  graph.model_name() + " (" + measured->runtime + ") on " + measured->machine);
    }
    out.push_back(*measured);
  }
  return out;
}

}  // namespace igb::deploy
