#pragma once

#include <map>
#include <string>

namespace igb::deploy {

/// Hangs the ONNX model `branch` (serialized) off the ONNX model `trunk` (serialized), as an
/// early exit's head hangs off its activation: the branch's graph input `branch_input` becomes the
/// trunk's value `trunk_value`; every other name of the branch (nodes, initializers, values) gets
/// `prefix`, so "0.weight" of a head attached at layer1.2.relu2 becomes the model's own parameter
/// name "layer1.2.relu2.branch_net.0.weight"; each graph output of the branch becomes a graph
/// output of the result named by `outputs` (branch name → new name). Both models must have the same
/// IR version and opset. The result is checked with onnx::checker and strict shape inference
/// and returned serialized; a failed check is an InputError naming `what`.
std::string attach_onnx_branch(const std::string& trunk, const std::string& branch,
                               const std::string& branch_input, const std::string& trunk_value,
                               const std::string& prefix,
                               const std::map<std::string, std::string>& outputs,
                               const std::string& what);

}  // namespace igb::deploy
