#pragma once

#include <filesystem>
#include <string>

#include "graph/summary_graph.h"

namespace igb::tools {

/// The data-flow graph in Graphviz DOT: one box per op labelled with its name, type and
/// attributes (kernel, stride, groups) and output shape, edges along the data; with
/// `with_params`, one ellipse per parameter (name and shape) feeding its op.
std::string graph_to_dot(const graph::SummaryGraph& graph, bool with_params);

/// Lays `dot` out with Graphviz's dot engine and renders it as "svg" or "png" bytes. Throws
/// InputError when Graphviz rejects the text or the format.
std::string render_dot(const std::string& dot, const std::string& format);

/// Writes the drawing to `path` atomically; the format follows the extension (.dot, .svg, .png).
void draw_graph(const graph::SummaryGraph& graph, const std::filesystem::path& path,
                bool with_params);

}  // namespace igb::tools
