#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/thinning_recipe.h"
#include "models/import/import_hook.h"

namespace igb::models {

/// The base of every imported model: the family's model base class `Base` holding the model's
/// code as a file brought it (a TorchScript module, an ONNX graph: ImportedBody), and the
/// resolved model args. The root runs the file's code, which reads its tensors as they are
/// (ShapedByTensors). A family's model class derives from it and returns `options_` as its
/// options.
template <class Base>
class Imported : public Base, public ShapedByTensors, public ImportedFrom {
 public:
  /// Builds `body` into the model; `base_args` construct `Base`.
  template <class... BaseArgs>
  Imported(std::shared_ptr<ImportedBody> body, const ImportedArgs& args, BaseArgs&&... base_args)
      : Base(std::forward<BaseArgs>(base_args)...),
        file_(args.file),
        options_(args.options),
        body_(std::move(body)) {
    body_->build(*this);
  }

  const std::string& source_file() const override { return file_; }
  std::vector<SourceName> source_names() const override { return body_->source_names(); }

 protected:
  torch::Tensor forward_impl(torch::Tensor x) override { return body_->forward(*this, x); }

  std::string file_;
  nlohmann::json options_;
  std::shared_ptr<ImportedBody> body_;
};

}  // namespace igb::models
