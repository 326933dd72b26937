#include "models/model.h"

#include "core/thinning_recipe.h"

#include <mutex>

#include "models/classify/classifier.h"
#include "models/deblur/deblur_models.h"
#include "models/sr/sr_models.h"

namespace igb::models {

torch::Tensor ModelImpl::forward(torch::Tensor x) {
  if (inputs_quant_) x = inputs_quant_->forward(x);
  return forward_impl(std::move(x));
}

void ModelImpl::set_inputs_quant(compress::FakeLinearQuant q) {
  inputs_quant_ = inputs_quant_ ? replace_module(compress::kInputsQuantName, std::move(q))
                                : register_module(compress::kInputsQuantName, std::move(q));
}

Registry<ModelSpec>& model_registry() {
  static Registry<ModelSpec> registry("model");
  return registry;
}

void register_builtin_models() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = model_registry();
    sr::register_sr_models(r);
    classify::register_classify_models(r);
    deblur::register_deblur_models(r);
    r.freeze();
  });
}

Model create_model(const std::string& name, const nlohmann::json& options) {
  return model_registry().get(name).make(options.is_null() ? nlohmann::json::object() : options);
}

std::vector<std::string> model_names(const std::string& family) {
  std::vector<std::string> out;
  for (const auto& n : model_registry().names())
    if (model_registry().get(n).family == family) out.push_back(n);
  return out;
}

void check_model_family(const std::string& name, const std::string& family) {
  const auto& r = model_registry();
  if (r.contains(name) && r.get(name).family == family) return;
  const std::string what = r.contains(name)
                               ? "model '" + name + "' is a " + r.get(name).family + " model"
                               : "unknown model '" + name + "'";
  throw InputError(what + "; valid " + family + " models: " + join(model_names(family)));
}

int64_t count_parameters(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

OptionReader::OptionReader(std::string model, const nlohmann::json& options)
    : model_(std::move(model)), options_(options.is_null() ? nlohmann::json::object() : options) {
  if (!options_.is_object()) throw InputError("model " + model_ + ": options must be a mapping");
}

void OptionReader::check_range(const std::string& key, int64_t value, int64_t lo,
                               int64_t hi) const {
  if (value < lo || value > hi)
    throw InputError("model " + model_ + ": option '" + key + "' = " + std::to_string(value) +
                     " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

void OptionReader::finish() const {
  for (const auto& kv : options_.items()) {
    if (std::find(known_.begin(), known_.end(), kv.key()) == known_.end())
      throw InputError("model " + model_ + " has no option '" + kv.key() +
                       "'; valid options: " + join(known_));
  }
}

}  // namespace igb::models

#include "compress/quantization_state.h"
#include "core/checkpoint.h"

namespace igb::models {

Model model_from_checkpoint(const Checkpoint& checkpoint) {
  const auto& meta = checkpoint.meta();
  if (!model_registry().contains(meta.model))
    throw InputError(
        "checkpoint " + checkpoint.path().string() + " names model '" + meta.model +
        "', which this build does not have; valid models: " + join(model_registry().names()));
  const std::string where = "checkpoint " + checkpoint.path().string();
  Model model;
  try {
    model = create_model(meta.model, meta.model_options);
  } catch (const InputError& e) {
    throw InputError(where + ": " + e.what());
  } catch (const std::exception&) {
    throw InputError(where + ": model '" + meta.model + "' cannot be built from its options " +
                     meta.model_options.dump());
  }
  // A thinned model: replay its thinning recipes on the dense model, then load the weights.
  for (size_t i = 0; i < meta.thinning_recipes.size(); ++i) {
    const std::string recipe =
        checkpoint.path().string() + " (thinning recipe " + std::to_string(i + 1) + ")";
    try {
      apply_thinning_recipe(*model, meta.thinning_recipes[i], recipe);
    } catch (const InputError&) {
      throw;
    } catch (const std::exception&) {
      throw InputError(recipe + ": the recipe does not fit model '" + meta.model + "'");
    }
  }
  // A quantized model: its float copies, scales and activation slots, then every tensor by name.
  try {
    compress::restore_quantization(*model, meta.quantization);
  } catch (const InputError& e) {
    throw InputError(where + ": " + e.what());
  }
  checkpoint.load_model(*model);
  return model;
}

}  // namespace igb::models
