#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/input_stage.h"
#include "core/registry.h"

namespace igb::models {

/// Base of every model in the zoo: a torch::nn::Module whose compressible layers are registered
/// submodules with stable dotted names, which knows the input shape it expects (batch 1) and can
/// emit the options it was built with, so a checkpoint can rebuild it exactly.
///
/// Every model takes its input the same way: forward() passes it through the model's input stage
/// when one is set (a quantizer's fake quantization of the input, Distiller's `inputs_quant`),
/// then runs the model's own layers, forward_impl().
class ModelImpl : public torch::nn::Module, public InputStage {
 public:
  using torch::nn::Module::Module;

  /// The model's output for `x`, a batch of input_shape() inputs.
  torch::Tensor forward(torch::Tensor x);
  void set_input_stage(const std::string& name, std::shared_ptr<torch::nn::Module> module,
                       Forward forward) override;
  std::shared_ptr<torch::nn::Module> input_stage() const override { return input_stage_; }
  /// Shape of one dummy input, batch 1 (e.g. {1, 3, 32, 32}).
  virtual std::vector<int64_t> input_shape() const = 0;
  /// The resolved options, as accepted back by the registry factory: options_to_json() of the
  /// model's options struct. A checkpoint stores them as `model_options`.
  virtual nlohmann::json options_json() const = 0;

 protected:
  /// The model's own layers, on the input after its input stage.
  virtual torch::Tensor forward_impl(torch::Tensor x) = 0;

 private:
  std::shared_ptr<torch::nn::Module> input_stage_;
  Forward input_forward_;
};

using Model = std::shared_ptr<ModelImpl>;

/// A registry entry: the application family that registered it, a factory taking the
/// model's options as a JSON object (unknown keys are InputErrors), and the option defaults.
struct ModelSpec {
  std::string family;
  std::function<Model(const nlohmann::json& options)> make;
  /// Every option the model takes, with its default: the options_json of the default model.
  nlohmann::json defaults = nlohmann::json::object();
};

/// The model registry (filled by register_builtin_models()).
Registry<ModelSpec>& model_registry();

/// Registers every model of the zoo, each family's (models/family.h); safe to call more than
/// once. Freezes the registry.
void register_builtin_models();

/// Builds `name` with `options`; unknown names list the valid ones.
Model create_model(const std::string& name, const nlohmann::json& options);

/// Names of the models of one application family, sorted.
std::vector<std::string> model_names(const std::string& family);

/// Throws InputError unless `name` is a model of `family`, listing that family's models.
void check_model_family(const std::string& name, const std::string& family);

/// Total number of parameter elements.
int64_t count_parameters(const torch::nn::Module& model);

namespace detail {
template <class T, class = void>
struct has_validate : std::false_type {};
template <class T>
struct has_validate<T, std::void_t<decltype(std::declval<const T&>().validate(std::string()))>>
    : std::true_type {};
}  // namespace detail

/// Reads typed model options from JSON, rejecting keys it was not asked about.
///
///   OptionReader r("fsrcnn", json);
///   int64_t d = r.get<int64_t>("d", 56);
///   r.finish();  // throws InputError on an unknown key, listing the valid ones
class OptionReader {
 public:
  OptionReader(std::string model, const nlohmann::json& options);
  template <class T>
  T get(const std::string& key, T fallback) {
    known_.push_back(key);
    if (!options_.contains(key)) return fallback;
    try {
      return parse<T>(options_.at(key));
    } catch (const std::exception&) {
      throw InputError("model " + model_ + ": option '" + key + "' has an invalid value " +
                       options_.at(key).dump());
    }
  }
  /// Checks `value` against an inclusive range, naming the option on failure.
  void check_range(const std::string& key, int64_t value, int64_t lo, int64_t hi) const;
  void finish() const;

 private:
  template <class T>
  static T parse(const nlohmann::json& v) {
    // Options arriving from the command line are strings ("56"); accept both forms.
    if (v.is_string()) {
      if constexpr (std::is_same_v<T, std::string>) {
        return v.get<std::string>();
      } else if constexpr (std::is_same_v<T, bool>) {
        const auto& s = v.get_ref<const std::string&>();
        if (s == "true" || s == "1") return true;
        if (s == "false" || s == "0") return false;
        throw std::invalid_argument(s);
      } else {
        size_t pos = 0;
        const auto& s = v.get_ref<const std::string&>();
        T out = static_cast<T>(std::is_integral_v<T> ? std::stoll(s, &pos) : std::stod(s, &pos));
        if (pos != s.size()) throw std::invalid_argument(s);
        return out;
      }
    }
    return v.get<T>();
  }

  std::string model_;
  nlohmann::json options_;
  std::vector<std::string> known_;
};

/// Inclusive range of an integer model option, checked when the option is read from JSON.
struct OptionBounds {
  int64_t lo;
  int64_t hi;
};

// Model options structs (FsrcnnOptions, ResNetCifarOptions, ...) list their fields once, in
//
//   template <class F> void visit(F&& f) { f("d", d_, OptionBounds{1, 4096}); f("m", m_); ... }
//
// as (JSON key, field, optional bounds), in the order the error messages list them. The JSON
// conversion below walks that list both ways; a struct may add `void validate(const std::string&
// model) const` for checks that a range cannot say (channels 1 or 3, depth 6n + 4).

/// The options as JSON: one key per field `visit` lists. This is what a model's options_json()
/// returns and what a checkpoint stores.
template <class Options>
nlohmann::json options_to_json(Options options) {
  nlohmann::json out = nlohmann::json::object();
  options.visit([&](const char* key, const auto& value, auto...) { out[key] = value; });
  return out;
}

/// Reads model args into an options struct in one step: starting from `start`, every field
/// `visit` lists takes its value from `json` when present (numbers also as strings, "56", as they
/// come from --model-arg), checked against its bounds; then validate() runs. A bad value, a value
/// out of range or a key no field claims is an InputError naming `model`, the option and (for an
/// unknown key) the valid options.
template <class Options>
Options options_from_json(const std::string& model, const nlohmann::json& json,
                          Options start = Options()) {
  OptionReader r(model, json);
  start.visit([&](const char* key, auto& value, auto... bounds) {
    value = r.get<std::decay_t<decltype(value)>>(key, value);
    (r.check_range(key, value, bounds.lo, bounds.hi), ...);
  });
  if constexpr (detail::has_validate<Options>::value) start.validate(model);
  r.finish();
  return start;
}

/// Adds `name` to `registry`: its factory converts the model args to `Options` with
/// options_from_json (starting from `start`, for fields the name fixes, such as a ResNet's
/// depth), then builds the model with `make`.
///
///   add_model(registry, "fsrcnn", family, make_fsrcnn, "FSRCNN(d, s, m) (Dong et al. 2016)");
template <class Options>
void add_model(Registry<ModelSpec>& registry, const std::string& name, const std::string& family,
               Model (*make)(const Options&), std::string help, Options start = Options()) {
  ModelSpec spec;
  spec.family = family;
  spec.make = [name, make, start](const nlohmann::json& args) {
    return make(options_from_json(name, args, start));
  };
  spec.defaults = options_to_json(start);
  registry.add(name, std::move(spec), std::move(help));
}

}  // namespace igb::models
