#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "compress/post_train_quantizer.h"
#include "core/registry.h"
#include "core/run_context.h"
#include "models/external_forward.h"
#include "models/train_config.h"
#include "models/trainer.h"

namespace CLI {
class App;
}

namespace igb::options {

/// One application's option set (`--optform=sr`): the options of its training and testing
/// drivers, bound to typed config structs, and the code that runs them.
class OptForm {
 public:
  virtual ~OptForm() = default;

  /// Adds the optform's training options (the common ones are already there, bound to `train`).
  virtual void add_train_options(CLI::App& app, models::TrainConfig& train) = 0;
  /// Runs training after parsing; returns summary.json.
  virtual nlohmann::json run_train(RunContext& ctx, const std::string& config_yaml,
                                   const nlohmann::json& config_json) = 0;

  /// Adds the testing options (the common --checkpoint, --data, --out, --device are there).
  virtual void add_test_options(CLI::App& app) {}
  /// Runs a test of `checkpoint` (and, when `quantize_eval` is enabled, of its post-training
  /// quantized form; when `external` is, of that model too); returns test_summary.json.
  virtual nlohmann::json run_test(RunContext& ctx, const std::string& checkpoint,
                                  const std::string& data, const std::string& out,
                                  const compress::QuantizeEvalRequest& quantize_eval,
                                  const models::ExternalForward& external) = 0;

  /// The optform's evaluation of `model` on `data` as a repeatable evaluator (the same batches in
  /// the same order at every call), for the sensitivity sweep: its first `batches` batches (0:
  /// all). `description` receives what was loaded.
  virtual std::function<models::Metrics()> evaluator(models::ModelImpl& model,
                                                     const std::string& data, int64_t batches,
                                                     const c10::Device& device,
                                                     std::string* description) = 0;

  /// Default --model.
  virtual std::string default_model() const = 0;
};

struct OptFormSpec {
  std::function<std::unique_ptr<OptForm>()> make;
};

/// The optform registry (filled by register_builtin_optforms()).
Registry<OptFormSpec>& optform_registry();

/// Registers every optform, and through them every model; idempotent.
void register_builtin_optforms();

/// Defined in one file per application.
std::unique_ptr<OptForm> make_sr_optform();
std::unique_ptr<OptForm> make_deblur_optform();
std::unique_ptr<OptForm> make_classify_optform();

}  // namespace igb::options
