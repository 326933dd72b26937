// The application families: the one list of them, and the zoo filled from it.
#include <mutex>

#include "core/error.h"
#include "models/classify/classify_family.h"
#include "models/deblur/deblur_family.h"
#include "models/family.h"
#include "models/import/imported_options.h"
#include "models/onnx/onnx_model.h"
#include "models/sr/sr_family.h"
#include "models/torchscript/imported_model.h"

namespace igb::models {

Registry<Family>& family_registry() {
  static Registry<Family> registry("optform");
  return registry;
}

void register_builtin_families() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = family_registry();
    for (Family f : {classify::classify_family(), sr::sr_family(), deblur::deblur_family()})
      r.add(f.name, f, f.help);
    r.freeze();
  });
}

// Declared with the zoo (models/model.h); the zoo is what the families register.
void register_builtin_models() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_builtin_families();
    auto& models = model_registry();
    std::vector<ImportHook> import_hooks;
    for (const auto& name : family_registry().names()) {
      const Family& f = family_registry().get(name);
      f.register_models(models);
      if (f.import_hook) import_hooks.push_back(*f.import_hook);
    }
    register_torchscript_model(models, import_hooks);
    register_onnx_model(models, std::move(import_hooks));
    models.freeze();
  });
}

const Family& family(const std::string& name) {
  register_builtin_families();
  return family_registry().get(name);
}

const EvalLayout& family_layout(const std::string& name) { return family(name).layout; }

const Family& family_of_model(const std::string& model) {
  register_builtin_models();
  if (is_imported_model(model))
    throw InputError("model " + model + ": an imported model's family is read from the model");
  return family(model_registry().get(model).family);
}

const Family& family_of_model(const std::string& name, const ModelImpl& model) {
  if (!is_imported_model(name)) return family_of_model(name);
  register_builtin_families();
  const auto options = model.options_json();
  const std::string f = options.value("family", "");
  if (!family_registry().contains(f))
    throw InputError("model " + name + " is of no family igb trains (its output is neither " +
                     "[N, classes] nor an upscaled image); give --model-arg family=classify or sr");
  return family(f);
}

}  // namespace igb::models
