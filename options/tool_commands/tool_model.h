#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/summary_graph.h"
#include "models/model.h"
#include "tools/profile.h"

namespace igb {
class Logger;
}

namespace igb::options {

/// The model a tool works on: built from the registry (`--model` with options) or rebuilt from a
/// checkpoint, with the input shape to trace it on.
struct ToolModel {
  models::Model model;
  std::string name;
  graph::Shape input;
  /// The resolved options of the run that trained it (from its checkpoint); null for a model of
  /// the zoo.
  nlohmann::json run_config;
};

/// Exactly one of `model` and `checkpoint` must be given (InputError otherwise). `options` are
/// "KEY=VALUE" model arguments (as igb-train's --model-arg); `input` ("1x3x224x224", empty = the
/// model's own) overrides the dummy input shape; an input too large for this machine's memory is
/// refused before anything is allocated. A zoo model (no checkpoint) gets the initial weights of
/// `seed`, so that every command (run, export-onnx, partition, profile, igb-serve) given the
/// same model and seed holds the same weights.
ToolModel load_tool_model(const std::string& model, const std::vector<std::string>& options,
                          const std::string& checkpoint, const std::string& input,
                          int64_t seed = 0);

/// Refuses (InputError naming `text`) an input of `shape` whose float32 values alone would take a
/// quarter of this machine's memory: running a model holds several tensors of about its size.
void check_input_fits(const graph::Shape& shape, const std::string& text);

/// The summary graph of a tool model.
graph::SummaryGraph tool_graph(const ToolModel& m, const graph::Shape& input);

/// Profiles a tool model, logging progress, and prints its tables.
tools::ModelProfile profile_and_print(const ToolModel& m, const tools::ProfileOptions& options,
                                      Logger& logger);

/// The reports `igb-test --summary` can write.
const std::vector<std::string>& summary_kinds();

/// Runs each report of `kinds` (sparsity, macs, graph, profile) on `m`, prints the tables and
/// writes sparsity.{csv,json}, macs.{csv,json}, graph.svg and graph.dot, profile.json and
/// profile_trace.json into `out_dir`.
void write_summaries(const ToolModel& m, const std::vector<std::string>& kinds,
                     const std::filesystem::path& out_dir, Logger& logger);

}  // namespace igb::options
