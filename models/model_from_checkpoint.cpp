#include "models/model_from_checkpoint.h"

#include "compress/quantization_state.h"
#include "core/checkpoint.h"
#include "core/error.h"
#include "core/thinning_recipe.h"
#include "models/import/imported_options.h"

namespace igb::models {

Model model_from_checkpoint(const Checkpoint& checkpoint) {
  const auto& meta = checkpoint.meta();
  if (!model_registry().contains(meta.model) && !is_imported_model(meta.model))
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

void check_model_args_match(const nlohmann::json& model_args, const Checkpoint& checkpoint) {
  if (model_args.empty()) return;
  const auto& stored = checkpoint.meta().model_options;
  nlohmann::json options = stored;
  options.update(model_args);
  // Read through the model's own options, so "8" and 8, or "1e-3" and 0.001, compare equal.
  const auto given = models::create_model(checkpoint.meta().model, options)->options_json();
  for (const auto& [key, value] : model_args.items()) {
    const auto was = stored.contains(key) ? stored[key] : nlohmann::json();
    if (given.contains(key) && given[key] == was) continue;
    throw InputError("--model-arg " + key + "=" + value.get<std::string>() + " differs from " +
                     checkpoint.path().string() + ", whose model has " + key + "=" + was.dump() +
                     "; a resumed run keeps its checkpoint's model");
  }
}

std::string resumed_data(const std::string& data, bool given, const Checkpoint& checkpoint) {
  const auto& config = checkpoint.meta().config;
  if (given || !config.is_object() || !config.contains("data") || !config["data"].is_string())
    return data;
  return config["data"].get<std::string>();
}

}  // namespace igb::models
