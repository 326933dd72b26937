#include "deploy/early_exit/exit_export.h"

#include <cmath>

#include "core/error.h"
#include "core/fs.h"
#include "core/json_reader.h"
#include "deploy/onnx/onnx_merge.h"

namespace igb::deploy {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

json io_list(const graph::SummaryGraph& graph, const std::vector<int>& ids) {
  json a = json::array();
  for (int v : ids) a.push_back({{"name", onnx_value_name(graph, v)}, {"shape", graph.shape(v)}});
  return a;
}

}  // namespace

json export_exit_segments(torch::nn::Module& model, const graph::SummaryGraph& graph,
                          const ExitNetwork& net, ExitCriterion criterion,
                          const std::vector<double>& score_thresholds,
                          const OnnxExportOptions& options, const fs::path& dir) {
  if (score_thresholds.size() + 1 != net.exits())
    throw InputError(std::to_string(score_thresholds.size()) + " thresholds for " +
                     std::to_string(net.exits() - 1) + " early exits");
  fs::create_directories(dir);
  json manifest = {{"format", "igb early-exit segments"},
                   {"version", 1},
                   {"model", graph.model_name()},
                   {"input", graph.input_shape()},
                   {"precision", onnx_precision_name(options.precision())},
                   {"criterion", exit_criterion_name(criterion)},
                   {"model_macs", net.model_macs()},
                   {"segments", json::array()}};
  for (size_t e = 0; e < net.exits(); ++e) {
    const auto& s = net.segments()[e];
    const bool early = e + 1 < net.exits();
    const std::string file = "segment" + std::to_string(e) + ".onnx";
    std::string bytes = onnx_ops_bytes(model, graph, s.ops, s.inputs, s.outputs, options);
    const std::string exit_output = early ? "exit" + std::to_string(e) : "output";
    if (early) {
      auto head = net.head(e);
      const std::string branch = onnx_model_bytes(*head, net.head_graph(e), options);
      bytes =
          attach_onnx_branch(bytes, branch, "input", onnx_value_name(graph, net.exit_values()[e]),
                             net.exit_names()[e] + ".branch_net.", {{"output", exit_output}},
                             "segment " + std::to_string(e) + " of " + graph.model_name());
    }
    write_text_atomically(dir / file, bytes);
    std::vector<int> forwarded;
    for (int v : s.outputs)
      if (std::find(graph.outputs().begin(), graph.outputs().end(), v) == graph.outputs().end())
        forwarded.push_back(v);
    const bool answers = early && std::isfinite(score_thresholds[e]);
    manifest["segments"].push_back(
        {{"segment", e},
         {"file", file},
         {"first_op", graph.op(s.ops.front()).name},
         {"last_op", graph.op(s.ops.back()).name},
         {"ops", s.ops.size()},
         {"inputs", io_list(graph, s.inputs)},
         {"forwarded", io_list(graph, forwarded)},
         {"exit",
          {{"name", net.exit_names()[e]},
           {"output", exit_output},
           {"threshold",
            answers ? json(natural_threshold(criterion, score_thresholds[e])) : json(nullptr)},
           {"final", !early},
           {"macs_to_leave", net.exit_macs()[e]}}}});
  }
  write_text_atomically(dir / "manifest.json", manifest.dump(1) + "\n");
  return manifest;
}

SegmentsManifest read_segments_manifest(const fs::path& path) {
  const json j = load_json_file(path);
  const JsonReader r(j, path.string(), "manifest");
  if (r.get<std::string>("format") != "igb early-exit segments")
    throw r.error("format",
                  "must be \"igb early-exit segments\" (igb-tools early-exit --export "
                  "writes manifest.json)");
  if (r.get<int64_t>("version") != 1)
    throw r.error("version", "is " + r.raw("version").dump() + "; this igb reads version 1");
  SegmentsManifest m;
  m.model = r.get<std::string>("model");
  m.input = r.get<std::vector<int64_t>>("input");
  try {
    m.criterion = parse_exit_criterion(r.get<std::string>("criterion"));
  } catch (const InputError& e) {
    throw r.error("criterion", std::string("is not one: ") + e.what());
  }
  for (const auto& s : r.list("segments")) {
    const auto exit = s.object("exit");
    m.thresholds.push_back(exit.raw("threshold").is_null()
                               ? std::nullopt
                               : std::optional<double>(exit.get<double>("threshold")));
  }
  if (m.thresholds.empty()) throw r.error("segments", "is empty");
  return m;
}

}  // namespace igb::deploy
