#include "deploy/onnx/onnx_merge.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "core/error.h"
#include "core/text.h"

namespace igb::deploy {

namespace {

onnx::ModelProto parse(const std::string& bytes, const std::string& what) {
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes)) throw InputError(what + " is not an ONNX model");
  return m;
}

}  // namespace

std::string attach_onnx_branch(const std::string& trunk_bytes, const std::string& branch_bytes,
                               const std::string& branch_input, const std::string& trunk_value,
                               const std::string& prefix,
                               const std::map<std::string, std::string>& outputs,
                               const std::string& what) {
  auto trunk = parse(trunk_bytes, what);
  const auto branch = parse(branch_bytes, what + "'s branch");
  if (trunk.ir_version() != branch.ir_version() ||
      trunk.opset_import_size() != branch.opset_import_size())
    throw InputError(what + ": the branch has another IR version or opset than the trunk");
  const auto rename = [&](const std::string& name) {
    if (name.empty()) return name;
    if (name == branch_input) return trunk_value;
    auto out = outputs.find(name);
    return out != outputs.end() ? out->second : prefix + name;
  };
  auto* g = trunk.mutable_graph();
  for (const auto& init : branch.graph().initializer()) {
    auto* t = g->add_initializer();
    *t = init;
    t->set_name(rename(init.name()));
  }
  for (const auto& node : branch.graph().node()) {
    auto* n = g->add_node();
    *n = node;
    n->set_name(prefix + node.name());
    for (auto& in : *n->mutable_input()) in = rename(in);
    for (auto& out : *n->mutable_output()) out = rename(out);
  }
  for (const auto& out : branch.graph().output()) {
    if (!outputs.count(out.name()))
      throw InputError(what + ": the branch's output '" + out.name() + "' has no name given");
    auto* o = g->add_output();
    *o = out;
    o->set_name(outputs.at(out.name()));
  }
  try {
    onnx::checker::check_model(trunk);
    onnx::ShapeInferenceOptions options(/*check_type=*/true, /*error_mode=*/1,
                                        /*data_prop=*/false);
    onnx::shape_inference::InferShapes(trunk, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    throw InputError(what + " fails the ONNX checker: " + first_line(e.what()));
  }
  std::string bytes;
  if (!trunk.SerializeToString(&bytes)) throw InputError("cannot serialize " + what);
  return bytes;
}

}  // namespace igb::deploy
