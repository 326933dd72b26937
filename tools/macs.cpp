#include "tools/macs.h"

namespace igb::tools {

MacsSummary compute_macs(const graph::SummaryGraph& graph, const torch::nn::Module& model) {
  MacsSummary s;
  s.model = graph.model_name();
  s.input = graph.input_shape();
  for (const auto& p : model.parameters()) s.total_params += p.numel();
  for (const auto& op : graph.ops()) {
    if (graph::op_info(op.op_kind).macs == graph::MacRule::kNone) continue;
    const std::string weight = op.param("weight");
    if (weight.empty() || op.inputs.empty() || op.outputs.empty()) continue;
    LayerMacs l;
    l.name = op.name;
    l.type = op.type;
    l.attrs = op.attrs();
    l.ifm = graph.shape(op.inputs[0]);
    l.ofm = graph.shape(op.outputs[0]);
    for (size_t i = 0; i < op.params.size(); ++i) {
      if (op.params[i] == weight) l.weights = op.param_shapes[i];
      if (op.params[i] == weight || op.params[i] == op.param("bias"))
        l.params += graph::volume(op.param_shapes[i]);
    }
    l.macs = graph.macs(op.id);
    s.total_macs += l.macs;
    s.layers.push_back(std::move(l));
  }
  return s;
}

Report macs_report(const MacsSummary& s) {
  Report r;
  r.title = "MACs of " + s.model + " on input " + graph::shape_to_string(s.input);
  r.table.columns = {"Name", "Type",       "Attrs",          "IFM", "IFM volume",
                     "OFM",  "OFM volume", "Weights volume", "MACs"};
  int64_t weights = 0;
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : s.layers) {
    r.table.rows.push_back({l.name, l.type, l.attrs, graph::shape_to_string(l.ifm),
                            std::to_string(graph::volume(l.ifm)), graph::shape_to_string(l.ofm),
                            std::to_string(graph::volume(l.ofm)),
                            std::to_string(graph::volume(l.weights)), std::to_string(l.macs)});
    weights += graph::volume(l.weights);
    layers.push_back({{"name", l.name},
                      {"type", l.type},
                      {"attrs", l.attrs},
                      {"macs", l.macs},
                      {"params", l.params},
                      {"weights", l.weights},
                      {"ifm", l.ifm},
                      {"ofm", l.ofm}});
  }
  r.table.rows.push_back(
      {"Total", "", "", "", "", "", "", std::to_string(weights), std::to_string(s.total_macs)});
  r.footer = {"Total MACs: " + grouped(s.total_macs),
              "Total parameters: " + grouped(s.total_params)};
  r.json = {{"model", s.model},
            {"input", s.input},
            {"total_macs", s.total_macs},
            {"total_params", s.total_params},
            {"layers", layers}};
  return r;
}

}  // namespace igb::tools
