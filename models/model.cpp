#include "models/model.h"

#include "core/error.h"
#include "models/import/imported_options.h"

namespace igb::models {

torch::Tensor ModelImpl::forward(torch::Tensor x) {
  if (input_forward_) x = input_forward_(x);
  return forward_impl(std::move(x));
}

void ModelImpl::set_input_stage(const std::string& name, std::shared_ptr<torch::nn::Module> module,
                                Forward forward) {
  if (input_stage_)
    input_stage_ = replace_module(name, std::move(module));
  else
    input_stage_ = register_module(name, std::move(module));
  input_forward_ = std::move(forward);
}

Registry<ModelSpec>& model_registry() {
  static Registry<ModelSpec> registry("model");
  return registry;
}

Model create_model(const std::string& name, const nlohmann::json& options) {
  const std::string kind = imported_kind(name);
  if (!kind.empty()) {
    // The path in the name, unless the options carry one (a checkpoint's, absolute).
    nlohmann::json args = options.is_null() ? nlohmann::json::object() : options;
    if (!args.contains("file")) args["file"] = name.substr(kind.size() + 1);
    return model_registry().get(kind).make(args);
  }
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
  // An imported model's family is read from its output; the solver checks that it fits.
  if (is_imported_model(name)) return;
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
