#include "deploy/torchscript/torchscript_export.h"

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/train_mode_guard.h"

namespace igb::deploy {

namespace jit = torch::jit;

namespace {

/// "igb::models::classify::ResNetCifarImpl" -> "ResNetCifarImpl": a valid TorchScript class name.
std::string class_name_of(const torch::nn::Module& m) {
  std::string name = m.name();
  const auto colon = name.rfind(':');
  if (colon != std::string::npos) name = name.substr(colon + 1);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name.empty() ? "Module" : name;
}

/// A TorchScript module holding `native`'s tensors (the same tensors: the tracer recognises them
/// and records reads of the attributes) and, under their names, modules for its children.
jit::Module mirror_tree(const torch::nn::Module& native,
                        const std::shared_ptr<jit::CompilationUnit>& cu,
                        TorchScriptExportReport& report) {
  jit::Module m(c10::QualifiedName("__torch__.igb." + class_name_of(native)), cu, true);
  m.register_attribute("training", c10::BoolType::get(), false);
  for (const auto& p : native.named_parameters(false)) {
    m.register_parameter(p.key(), p.value(), false);
    ++report.parameters;
  }
  for (const auto& b : native.named_buffers(false)) {
    if (!b.value().defined()) continue;
    m.register_buffer(b.key(), b.value());
    ++report.buffers;
  }
  for (const auto& child : native.named_children())
    m.register_module(child.key(), mirror_tree(*child.value(), cu, report));
  return m;
}

}  // namespace

TorchScriptExportReport export_torchscript(
    torch::nn::Module& model, const std::vector<int64_t>& input,
    const std::function<at::Tensor(const at::Tensor&)>& forward, const std::filesystem::path& out) {
  TorchScriptExportReport report;
  report.path = out;
  auto cu = std::make_shared<jit::CompilationUnit>();
  jit::Module root = mirror_tree(model, cu, report);
  TrainModeGuard eval(model, /*train=*/false);
  torch::NoGradGuard no_grad;
  std::shared_ptr<jit::Graph> graph;
  try {
    auto traced = jit::tracer::trace(
        {torch::zeros(input)},
        [&](jit::Stack in) -> jit::Stack { return {forward(in[0].toTensor())}; },
        [](const at::Tensor&) { return std::string(); }, /*strict=*/false,
        /*force_outplace=*/false, &root);
    graph = std::get<0>(traced)->graph;
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    throw InputError(out.string() + ": the model's forward cannot be traced" +
                     library_error_detail(e));
  }
  jit::EliminateDeadCode(graph);
  for (const auto* n : graph->nodes())
    if (n->kind() != c10::prim::Constant && n->kind() != c10::prim::GetAttr &&
        n->kind() != c10::prim::ListConstruct)
      ++report.ops;
  auto fn = cu->create_function(c10::QualifiedName(*root.type()->name(), "forward"), graph);
  root.type()->addMethod(fn);
  root.eval();
  write_atomically(out, [&](const std::filesystem::path& tmp) { root.save(tmp.string()); });
  return report;
}

}  // namespace igb::deploy
