#include "tools/draw.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <memory>
#include <mutex>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"

namespace igb::tools {

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

/// Fill colour by op family, so convolutions, normalisation, activations and joins stand out.
const char* fill_of(const graph::OpNode& op) {
  switch (graph::op_info(op.op_kind).family) {
    case graph::OpFamily::kConvolution:
      return "#cfe2f3";
    case graph::OpFamily::kTransposedConvolution:
      return "#b4d3f0";
    case graph::OpFamily::kLinear:
      return "#d9d2e9";
    case graph::OpFamily::kNormalization:
      return "#fff2cc";
    case graph::OpFamily::kJoin:
      return "#f4cccc";
    case graph::OpFamily::kPooling:
      return "#d9ead3";
    case graph::OpFamily::kActivation:
      return "#fce5cd";
    case graph::OpFamily::kShape:
    case graph::OpFamily::kOther:
      break;
  }
  return "#eeeeee";
}

}  // namespace

std::string graph_to_dot(const graph::SummaryGraph& graph, bool with_params) {
  std::ostringstream dot;
  dot << "digraph \"" << escape(graph.model_name()) << "\" {\n"
      << "  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", "
         "fontsize=10];\n"
      << "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];\n";
  for (int v : graph.inputs())
    dot << "  v" << v << " [label=\"input\\n"
        << graph::shape_to_string(graph.shape(v)) << "\", shape=ellipse, fillcolor=\"#ffffff\"];\n";
  for (const auto& op : graph.ops()) {
    std::string label = op.name + "\\n" + op.type;
    // A layer whose weights a quantizer holds at k bits: "Conv w3".
    if (op.weight_bits > 0) label += " w" + std::to_string(op.weight_bits);
    const std::string attrs = op.attrs();
    if (!attrs.empty()) label += " " + escape(attrs);
    if (!op.outputs.empty()) label += "\\n" + graph::shape_to_string(graph.shape(op.outputs[0]));
    dot << "  op" << op.id << " [label=\"" << escape(op.name) << label.substr(op.name.size())
        << "\", fillcolor=\"" << fill_of(op) << "\"];\n";
  }
  int out_index = 0;
  for (int v : graph.outputs())
    dot << "  out" << out_index++ << " [label=\"output\\n"
        << graph::shape_to_string(graph.shape(v)) << "\", shape=ellipse, fillcolor=\"#ffffff\"];\n";

  auto source = [&](int v) {
    int p = graph.values()[v].producer;
    return p < 0 ? "v" + std::to_string(v) : "op" + std::to_string(p);
  };
  for (const auto& op : graph.ops()) {
    for (int v : op.inputs) dot << "  " << source(v) << " -> op" << op.id << ";\n";
    if (with_params)
      for (size_t i = 0; i < op.params.size(); ++i) {
        dot << "  p" << op.id << "_" << i << " [label=\"" << escape(op.params[i]) << "\\n"
            << graph::shape_to_string(op.param_shapes[i])
            << "\", shape=ellipse, style=filled, fillcolor=\"#f3f3f3\", fontsize=8];\n"
            << "  p" << op.id << "_" << i << " -> op" << op.id << " [style=dashed];\n";
      }
  }
  out_index = 0;
  for (int v : graph.outputs()) dot << "  " << source(v) << " -> out" << out_index++ << ";\n";
  dot << "}\n";
  return dot.str();
}

std::string render_dot(const std::string& dot, const std::string& format) {
  if (format != "svg" && format != "png")
    throw InputError("cannot render a graph as '" + format + "': use svg or png");
  // Graphviz keeps global state; one render at a time.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  // One context for the process, never freed: Graphviz's text layout (the pango plugin) keeps a
  // font cache that outlives a freed context, and a second context then reads freed memory
  // (AddressSanitizer: heap-use-after-free in textspan_size).
  static GVC_t* const context = gvContext();
  if (!context) throw std::runtime_error("Graphviz: cannot create a context");
  struct NoFree {
    void operator()(GVC_t*) const {}
  };
  std::unique_ptr<GVC_t, NoFree> gvc(context);
  std::unique_ptr<Agraph_t, int (*)(Agraph_t*)> g(agmemread(dot.c_str()), agclose);
  if (!g) throw InputError("Graphviz rejected the DOT text");
  if (gvLayout(gvc.get(), g.get(), "dot") != 0)
    throw InputError("Graphviz could not lay out the graph");
  char* data = nullptr;
  unsigned int length = 0;
  const int rc = gvRenderData(gvc.get(), g.get(), format.c_str(), &data, &length);
  std::string out = (rc == 0 && data) ? std::string(data, length) : std::string();
  if (data) gvFreeRenderData(data);
  gvFreeLayout(gvc.get(), g.get());
  if (rc != 0 || out.empty())
    throw InputError("Graphviz has no '" + format +
                     "' renderer here (is the graphviz package installed?)");
  return out;
}

void draw_graph(const graph::SummaryGraph& graph, const std::filesystem::path& path,
                bool with_params) {
  std::string ext = path.extension().string();
  if (!ext.empty()) ext = ext.substr(1);
  if (ext != "dot" && ext != "gv" && ext != "svg" && ext != "png")
    throw InputError("--out " + path.string() +
                     ": the drawing's extension must be .svg, .png or .dot");
  const std::string dot = graph_to_dot(graph, with_params);
  write_text_atomically(path, (ext == "dot" || ext == "gv") ? dot : render_dot(dot, ext));
}

}  // namespace igb::tools
