#include "models/classify/classify_import.h"

#include "core/error.h"
#include "models/classify/classifier.h"
#include "models/classify/early_exit.h"
#include "models/import/imported.h"

namespace igb::models::classify {

namespace {

class ImportedClassifier final : public Imported<ClassifierImpl> {
 public:
  using Imported::Imported;

 protected:
  nlohmann::json architecture_options_json() const override { return options_; }
};

bool is_class_scores(const at::Tensor& out, const std::vector<int64_t>& input) {
  return out.dim() == 2;
}

int64_t resolve_num_classes(const at::Tensor& out, const std::vector<int64_t>& input, int64_t given,
                            const std::string& file) {
  if (!is_class_scores(out, input))
    throw InputError(file + ": family classify needs [N, classes] outputs; its forward gives " +
                     std::to_string(out.dim()) + "-D ones");
  if (given != 0 && given != out.size(1))
    throw InputError(file + ": the model gives " + std::to_string(out.size(1)) +
                     " class scores, not num_classes " + std::to_string(given));
  return out.size(1);
}

}  // namespace

ImportHook classify_import_hook(const std::string& family) {
  ImportHook h;
  h.family = family;
  h.arg = "num_classes";
  h.arg_max = 1 << 24;
  h.recognises = is_class_scores;
  h.resolve = resolve_num_classes;
  h.wrap = [](std::shared_ptr<ImportedBody> body, const ImportedArgs& args) -> Model {
    return std::make_shared<ImportedClassifier>(std::move(body), args, args.value, args.channels,
                                                args.input_size);
  };
  // Early exits at the file's activations, as on a zoo classifier (docs/early-exit.md).
  h.take_args = take_exit_args;
  h.apply_args = [](const Model& model, const nlohmann::json& exits) {
    auto* clf = dynamic_cast<ClassifierImpl*>(model.get());
    attach_exit_args(*model, exits, model->input_shape(), clf->num_classes());
    clf->set_exit_args(exits);
  };
  return h;
}

}  // namespace igb::models::classify
