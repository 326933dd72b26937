#pragma once

#include "tools/graph/op_table.h"
#include "tools/graph/summary_graph.h"

namespace igb::deploy {

// The summary graph's types and helpers by their short names: the exporter walks the graph
// throughout.
using tools::OpKind;
using tools::OpNode;
using tools::Shape;
using tools::shape_to_string;
using tools::SummaryGraph;
using tools::volume;

}  // namespace igb::deploy
