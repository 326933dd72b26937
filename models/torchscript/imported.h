#pragma once

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/thinning_recipe.h"
#include "models/torchscript/import_hook.h"
#include "models/torchscript/script_body.h"

namespace igb::models {

/// The base of every imported model: the family's model base class `Base` holding the mirrored
/// TorchScript module (ScriptBody), whose forward runs the module's code, and the resolved model
/// args. The root runs its own code too (ShapedByTensors: see ScriptedBlockImpl). A family's
/// model class derives from it and returns `options_` as its options.
template <class Base>
class Imported : public Base, public ShapedByTensors {
 public:
  /// Mirrors `module` into the model; `base_args` construct `Base`.
  template <class... BaseArgs>
  Imported(const torch::jit::Module& module, const ImportedArgs& args, BaseArgs&&... base_args)
      : Base(std::forward<BaseArgs>(base_args)...), file_(args.file), options_(args.options) {
    body_.build(module, *this, file_);
  }

 protected:
  torch::Tensor forward_impl(torch::Tensor x) override {
    auto out = body_.run(*this, {std::move(x)});
    if (!out.isTensor())
      throw InputError(file_ + ": forward returns a " + out.tagKind() +
                       "; igb models return one tensor");
    return out.toTensor();
  }

  std::string file_;
  nlohmann::json options_;
  ScriptBody body_;
};

}  // namespace igb::models
