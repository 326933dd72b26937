// Helpers shared by the tools tests: a zoo model built with a fixed seed, and its summary graph.
#pragma once

#include <torch/nn/module.h>

#include <nlohmann/json.hpp>
#include <string>

#include "graph/summary_graph.h"
#include "models/model.h"

namespace igb::tools {

/// Zoo model `name` with options `opts`, its weights drawn after torch::manual_seed(0).
inline models::Model make(const std::string& name, nlohmann::json opts = nlohmann::json::object()) {
  models::register_builtin_models();
  torch::manual_seed(0);
  return models::create_model(name, opts);
}

/// The summary graph of `m` traced at `input` (the model's own input shape when empty).
inline graph::SummaryGraph graph_of(const models::Model& m, const std::string& name,
                                    graph::Shape input = {}) {
  if (input.empty()) input = m->input_shape();
  return graph::SummaryGraph::build(
      *m, input, [&](const torch::Tensor& x) { return m->forward(x); }, name);
}

}  // namespace igb::tools
