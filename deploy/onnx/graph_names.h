#pragma once

#include "graph/op_table.h"
#include "graph/summary_graph.h"

namespace igb::deploy {

// The summary graph's types and helpers by their short names: the exporter walks the graph
// throughout.
using graph::OpKind;
using graph::OpNode;
using graph::Shape;
using graph::shape_to_string;
using graph::SummaryGraph;
using graph::volume;

}  // namespace igb::deploy
