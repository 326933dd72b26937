#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/registry.h"
#include "core/run_context.h"
#include "models/evaluate_checkpoint.h"
#include "models/evaluation.h"
#include "models/import/import_hook.h"
#include "models/model.h"
#include "models/train_config.h"
#include "models/trainer.h"

namespace CLI {
class App;
}

namespace igb::models {

/// One family's command-line option set (`--optform=NAME` of igb-train and igb-test), bound to
/// the family's typed config, and its training run. The drivers add the options every family
/// shares (options/common_options.h) and call these for the rest.
class FamilyOptions {
 public:
  virtual ~FamilyOptions() = default;
  /// The family's training defaults (model, epochs, batch size, learning rate, optimizer), set
  /// before any option is added so that --help shows them.
  virtual void set_train_defaults(TrainConfig& train) const = 0;
  /// Adds the family's own training options.
  virtual void add_train_options(CLI::App& app) = 0;
  /// Runs training after parsing: `train` holds the common options, `app` tells which options
  /// were given. Returns summary.json.
  virtual nlohmann::json run_train(const TrainConfig& train, const CLI::App& app, RunContext& ctx,
                                   const RunInfo& info) = 0;
  /// Adds the family's testing options, bound to `request`: its data options
  /// (request.data.options), --save-images and --self-ensemble where they apply.
  virtual void add_test_options(CLI::App& app, TestRequest& request) {}
};

/// Calls `f` on `batches` batches of model inputs of shape `input` made from the family's
/// synthetic data (ONNX calibration and layer checks of a model without data of its own).
using SyntheticInputs = std::function<void(const std::vector<int64_t>& input, int64_t batches,
                                           const std::function<void(const at::Tensor&)>& f)>;

/// An application family (`sr`, `classify`, `deblur`): everything igb knows of it, in one
/// registered descriptor. Its models, datasets, solver and evaluator live in its folder
/// (models/<name>/); adding a family is that folder and one line in register_builtin_families().
struct Family {
  /// The --optform name, which checkpoints record and the model registry files models under.
  std::string name;
  /// One line for `--help` and `igb-tools list optforms`.
  std::string help;
  /// The option set of igb-train and igb-test.
  std::function<std::unique_ptr<FamilyOptions>()> make_options;
  /// Adds the family's models to the zoo.
  std::function<void(Registry<ModelSpec>& registry)> register_models;
  /// Its evaluator of a model on some data: igb-test, validation, sensitivity, quantized and
  /// ONNX evaluation all score through it.
  EvaluatorFactory make_evaluator;
  /// The metrics its evaluator reports (columns, the primary first, and its baseline), for
  /// tables that compare runs before any evaluator exists (igb-bench).
  EvalLayout layout;
  SyntheticInputs synthetic_inputs;
  /// How a TorchScript file (torchscript:PATH) is recognised as one of its models and wrapped
  /// into its model class (models/import/import_hook.h); none for a family that takes zoo
  /// models only.
  std::optional<ImportHook> import_hook;
};

/// The family registry, filled and frozen by register_builtin_families().
Registry<Family>& family_registry();

/// Registers every family and, through them, every model of the zoo; idempotent.
void register_builtin_families();

/// The family `name` (InputError listing the families when there is none).
const Family& family(const std::string& name);

/// The family of zoo model `model`.
const Family& family_of_model(const std::string& model);
/// The family of model `name` built as `model`: a zoo model's, or the one an imported model
/// (torchscript:PATH) read from its output.
const Family& family_of_model(const std::string& name, const ModelImpl& model);

}  // namespace igb::models
