#include "deploy/serve/worker_role.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "deploy/onnx/onnx_export.h"

namespace igb::deploy {

std::string error_line(const std::exception& e) {
  std::string s = e.what();
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) s = c10->what_without_backtrace();
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  return s;
}

grpc::Status refuse(const std::string& what) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, what);
}

grpc::Status build_pipeline_stage(const graph::SummaryGraph& graph,
                                  const std::map<std::string, int>& value_ids, bool int8,
                                  const proto::StageConfig& req, WorkerRole& role) {
  Stage stage;
  stage.index = req.stage();
  stage.device = req.stage();
  stage.device_name = "stage " + std::to_string(req.stage());
  std::set<int> made;
  for (const auto& name : req.ops()) {
    const int op = graph.find(name);
    if (op < 0) return refuse("op '" + name + "' is not in " + graph.model_name());
    stage.ops.push_back(op);
    for (int v : graph.op(op).outputs) made.insert(v);
  }
  std::sort(stage.ops.begin(), stage.ops.end());
  std::set<int> given;
  std::string bad;
  auto value = [&](const std::string& name, std::vector<std::pair<std::string, int>>* into) {
    auto it = value_ids.find(name);
    if (it == value_ids.end()) {
      bad = "value '" + name + "' is not in " + graph.model_name();
      return;
    }
    const std::string& dtype = graph.values().at(it->second).dtype;
    if (!dtype.empty() && dtype != "Float") {
      bad = "value '" + name + "' is " + dtype + ": only float tensors cross a link";
      return;
    }
    into->emplace_back(name, it->second);
  };
  for (const auto& name : req.inputs()) value(name, &role.inputs);
  for (const auto& name : req.outputs()) value(name, &role.outputs);
  if (!bad.empty()) return refuse(bad);
  for (const auto& [name, id] : role.inputs) {
    given.insert(id);
    stage.inputs.push_back(id);
  }
  for (int op : stage.ops)
    for (int v : graph.op(op).inputs)
      if (!given.count(v) && !made.count(v))
        return refuse("stage " + std::to_string(req.stage()) + ": op '" + graph.op(op).name +
                      "' reads '" + onnx_value_name(graph, v) +
                      "', which the stage neither receives nor makes");
  for (const auto& [name, id] : role.outputs) {
    if (!given.count(id) && !made.count(id))
      return refuse("stage " + std::to_string(req.stage()) + " passes on '" + name +
                    "', which it neither receives nor makes");
    if (made.count(id)) stage.outputs.push_back(id);
  }
  try {
    role.runner = std::make_unique<StageRunner>(graph, stage, /*inference=*/true, int8);
  } catch (const std::exception& e) {
    return refuse(error_line(e));
  }
  return grpc::Status::OK;
}

std::shared_ptr<WorkerRole> build_cascade_unit(const graph::SummaryGraph& graph,
                                               const ExitNetwork& net, const CascadeUnit& unit,
                                               bool int8, const SenderFactory& make_sender) {
  const int units = static_cast<int>(net.exits());
  if (unit.unit < 0 || unit.unit >= units)
    throw InputError("--unit " + std::to_string(unit.unit) + ": " + graph.model_name() + " has " +
                     std::to_string(units) + " segments (units 0 to " + std::to_string(units - 1) +
                     ")");
  const bool last = unit.unit == units - 1;
  if (!last && unit.next.empty())
    throw InputError("--unit " + std::to_string(unit.unit) +
                     " is not the last segment: give --next, the address of unit " +
                     std::to_string(unit.unit + 1));
  const auto& segments = net.segments();
  auto role = std::make_shared<WorkerRole>();
  CascadeUnitRole cascade;
  role->stage = unit.unit;
  role->runner =
      std::make_unique<StageRunner>(graph, segments[unit.unit], /*inference=*/true, int8);
  role->timeout_ms = unit.timeout_ms;
  cascade.criterion = unit.criterion;
  cascade.score_threshold = unit.score_threshold;
  for (int v : segments[unit.unit].inputs) role->inputs.emplace_back(onnx_value_name(graph, v), v);
  if (!last) {
    cascade.head = net.head(unit.unit);
    cascade.exit_value = net.exit_values().at(unit.unit);
    // Everything a later segment reads that is known here: made by this segment or before.
    std::set<int> known;
    for (int e = 0; e <= unit.unit; ++e) {
      known.insert(segments[e].inputs.begin(), segments[e].inputs.end());
      known.insert(segments[e].outputs.begin(), segments[e].outputs.end());
    }
    std::set<int> later;
    for (int e = unit.unit + 1; e < units; ++e)
      for (int v : segments[e].inputs)
        if (known.count(v)) later.insert(v);
    for (int v : later) role->outputs.emplace_back(onnx_value_name(graph, v), v);
    role->sender = make_sender(unit.next, "unit " + std::to_string(unit.unit + 1), unit.precision,
                               false, unit.timeout_ms);
  } else {
    for (int v : graph.outputs()) role->outputs.emplace_back(onnx_value_name(graph, v), v);
  }
  role->kind = std::move(cascade);
  return role;
}

void warm_up(const graph::SummaryGraph& graph, WorkerRole& role) {
  torch::NoGradGuard no_grad;
  std::map<int, at::Tensor> values;
  for (const auto& [name, id] : role.inputs) values[id] = torch::zeros(graph.shape(id));
  role.runner->run(values);
  if (CascadeUnitRole* unit = role.cascade(); unit && unit->head)
    unit->head->forward(values.at(unit->exit_value));
}

}  // namespace igb::deploy
