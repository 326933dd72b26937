#pragma once

#include <ATen/core/stack.h>

namespace torch::jit {
struct Node;
}  // namespace torch::jit

namespace igb {

/// Runs `node` when it builds or takes apart a list or tuple (prim::ListConstruct,
/// prim::TupleConstruct, prim::ListUnpack, prim::TupleUnpack): TorchScript's interpreter does these
/// itself, so its operator registry has no implementation of them. `stack` holds the node's
/// inputs last, in order; they are replaced by its outputs. Returns false, touching nothing, for
/// any other node.
bool run_container_node(const torch::jit::Node* node, torch::jit::Stack& stack);

}  // namespace igb
