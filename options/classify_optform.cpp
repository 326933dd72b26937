// --optform=classify: image classification training and testing.
#include <CLI/CLI.hpp>

#include "core/checkpoint.h"
#include "data/datasets.h"
#include "models/classify/classify_solver.h"
#include "options/common_options.h"
#include "options/optform.h"

namespace igb::options {

namespace {

class ClassifyOptForm : public OptForm {
 public:
  std::string default_model() const override { return "resnet20_cifar"; }

  void add_train_options(CLI::App& app, models::TrainConfig& train) override {
    app_ = &app;
    train_ = &train;
    // The defaults train resnet20_cifar past 90% top-1 on the synthetic shapes in minutes.
    train.epochs = 6;
    train.batch_size = 128;
    train.lr = 0.1;
    train.optimizer = "sgd";
    train.momentum = 0.9;
    train.weight_decay = 1e-4;
    train.lr_decay = "cosine";
    add_common_train_options(app, train);
    add_dataset_option(app);
    int_range(app.add_option("--num-classes", config_.num_classes,
                             "Output classes (0 = as many as the data has)")
                  ->capture_default_str(),
              0, 100000);
    int_range(app.add_option("--input-size", config_.input_size,
                             "Side of the square input (0 = the model's: 32 for CIFAR models, 224 "
                             "for ImageNet ones)")
                  ->capture_default_str(),
              0, 4096);
    app.add_option("--model-arg", model_args_,
                   "Model option KEY=VALUE, repeatable (densenet_cifar: depth, growth)");
    int_range(app.add_option("--synthetic-train", config_.synthetic_train,
                             "Training images of --data synthetic")
                  ->capture_default_str(),
              1, 1000000);
    int_range(app.add_option("--synthetic-val", config_.synthetic_val,
                             "Validation images of --data synthetic")
                  ->capture_default_str(),
              1, 1000000);
  }

  nlohmann::json run_train(RunContext& ctx, const std::string& config_yaml,
                           const nlohmann::json& config_json) override {
    config_.train = *train_;
    config_.model_args = parse_model_args(model_args_);
    if (!config_.train.resume.empty()) {
      auto ckpt = Checkpoint::load(config_.train.resume);
      check_model_args_match(config_.model_args, ckpt);
      if (!app_->get_option("--model")->count()) config_.train.model = ckpt.meta().model;
    }
    models::RunInfo info{"classify", config_yaml, config_json};
    return models::classify::train_classify(config_, ctx, info);
  }

  void add_test_options(CLI::App& app) override { add_dataset_option(app); }

  std::function<models::Metrics()> evaluator(models::ModelImpl& model, const std::string& data,
                                             int64_t batches, const c10::Device& device,
                                             std::string* description) override {
    return models::classify::classify_evaluator(model, data, config_.dataset, batches, device,
                                                description);
  }

  nlohmann::json run_test(RunContext& ctx, const std::string& checkpoint, const std::string& data,
                          const std::string& out,
                          const compress::QuantizeEvalRequest& quantize_eval,
                          const models::ExternalForward& external) override {
    return models::classify::test_classify(checkpoint, data, config_.dataset, out, ctx,
                                           quantize_eval, external);
  }

 private:
  void add_dataset_option(CLI::App& app) {
    app.add_option("--dataset", config_.dataset,
                   "Force the dataset format instead of recognising --data")
        ->capture_default_str()
        ->check(CLI::IsMember(dataset_choices()));
  }

  static std::vector<std::string> dataset_choices() {
    auto names = data::dataset_names("classify");
    names.insert(names.begin(), "auto");
    return names;
  }

  CLI::App* app_ = nullptr;
  models::TrainConfig* train_ = nullptr;
  models::classify::ClassifyConfig config_;
  std::vector<std::string> model_args_;
};

}  // namespace

std::unique_ptr<OptForm> make_classify_optform() { return std::make_unique<ClassifyOptForm>(); }

}  // namespace igb::options
