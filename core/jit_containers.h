#pragma once

#include <ATen/core/stack.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace torch::jit {
struct Node;
struct Value;
}  // namespace torch::jit

namespace igb {

/// Runs `node` when it builds or takes apart a list or tuple (prim::ListConstruct,
/// prim::TupleConstruct, prim::ListUnpack, prim::TupleUnpack): TorchScript's interpreter does these
/// itself, so its operator registry has no implementation of them. `stack` holds the node's
/// inputs last, in order; they are replaced by its outputs. Returns false, touching nothing, for
/// any other node.
bool run_container_node(const torch::jit::Node* node, torch::jit::Stack& stack);

/// The constant behind `v` as a list of ints: a constant int or int list, or a
/// prim::ListConstruct of constant ints; nothing otherwise (None included).
std::optional<std::vector<int64_t>> constant_ints(const torch::jit::Value* v);
/// The same for floats: a constant float list or a prim::ListConstruct of constant floats.
std::optional<std::vector<double>> constant_doubles(const torch::jit::Value* v);

/// The input of `node` passed as its operator schema's argument `name`, or nullptr when the
/// operator has no such argument (or no schema).
const torch::jit::Value* schema_argument(const torch::jit::Node* node, const char* name);
/// A constant number (int or float) behind `v`; nothing for None, a tensor or a computed value.
std::optional<double> constant_number(const torch::jit::Value* v);

}  // namespace igb
