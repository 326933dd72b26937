// The classification family (--optform=classify): its option set, evaluator and synthetic
// inputs.
#include "models/classify/classify_family.h"

#include <CLI/CLI.hpp>

#include "core/checkpoint.h"
#include "core/cli.h"
#include "data/classify_data.h"
#include "data/datasets.h"
#include "models/classify/classifier.h"
#include "models/classify/classify_evaluator.h"
#include "models/classify/classify_import.h"
#include "models/classify/classify_solver.h"
#include "models/family_parts.h"

namespace igb::models::classify {

namespace {

constexpr char kName[] = "classify";

class ClassifyOptions : public FamilyOptions {
 public:
  void set_train_defaults(TrainConfig& train) const override {
    // The defaults train resnet20_cifar past 90% top-1 on the synthetic shapes in minutes.
    train.model = "resnet20_cifar";
    train.epochs = 6;
    train.batch_size = 128;
    train.lr = 0.1;
    train.optimizer = "sgd";
    train.momentum = 0.9;
    train.weight_decay = 1e-4;
    train.lr_decay = "cosine";
  }

  void add_train_options(CLI::App& app) override {
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
    app.add_option("--earlyexit_lossweights,--earlyexit-lossweights", config_.earlyexit_lossweights,
                   "Early-exit models: loss weight of each early exit, in forward order; the "
                   "final exit gets 1 - their sum (Distiller's; docs/early-exit.md)")
        ->expected(1, 64);
    app.add_option("--earlyexit_thresholds,--earlyexit-thresholds", config_.earlyexit_thresholds,
                   "Early-exit models: per early exit, the cross-entropy against the label "
                   "below which validation counts a sample as leaving there (Distiller's "
                   "label-based rule)")
        ->expected(1, 64);
  }

  nlohmann::json run_train(const TrainConfig& train, const CLI::App& app, RunContext& ctx,
                           const RunInfo& info) override {
    config_.train = train;
    config_.model_args = parse_model_args(model_args_);
    if (!config_.train.resume.empty()) {
      const auto ckpt = inherit_resumed_run(config_.train, config_.model_args, app);
      // The early-exit weights and thresholds carry over unless given again.
      for (auto [key, field] : {std::pair{"earlyexit_lossweights", &config_.earlyexit_lossweights},
                                std::pair{"earlyexit_thresholds", &config_.earlyexit_thresholds}})
        if (!app.get_option(std::string("--") + key)->count() && ckpt.meta().config.contains(key) &&
            ckpt.meta().config[key].is_array())
          *field = ckpt.meta().config[key].get<std::vector<double>>();
    }
    return train_classify(config_, ctx, info);
  }

  void add_test_options(CLI::App& app, TestRequest& request) override {
    auto& options = request.data.options;
    options["dataset"] = "auto";
    app.add_option_function<std::string>(
           "--dataset", [&options](const std::string& v) { options["dataset"] = v; },
           "Force the dataset format instead of recognising --data")
        ->default_str("auto")
        ->check(CLI::IsMember(dataset_choices()));
  }

 private:
  void add_dataset_option(CLI::App& app) {
    app.add_option("--dataset", config_.dataset,
                   "Force the dataset format instead of recognising --data")
        ->capture_default_str()
        ->check(CLI::IsMember(dataset_choices()));
  }

  static std::vector<std::string> dataset_choices() {
    auto names = data::dataset_names(kName);
    names.insert(names.begin(), "auto");
    return names;
  }

  ClassifyConfig config_;
  std::vector<std::string> model_args_;
};

/// Batches of 32 images of the synthetic shapes' validation split, at the model's input shape.
void synthetic_inputs(const std::vector<int64_t>& in, int64_t batches,
                      const std::function<void(const at::Tensor&)>& f) {
  data::ClassifyDataOptions o;
  o.dataset = "synthetic";
  o.input_shape = in;
  o.input_shape[0] = 1;
  o.augment = false;
  o.synthetic_train = 1;
  o.synthetic_val = std::max<int64_t>(1, batches * 32);
  const auto d = data::load_classify_data("synthetic", o);
  const int64_t size = d.val->size();
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<at::Tensor> xs;
    for (int64_t i = b * 32; i < std::min(size, (b + 1) * 32); ++i)
      xs.push_back(d.val->get(i, 0).input);
    if (!xs.empty()) f(at::stack(xs));
  }
}

}  // namespace

Family classify_family() {
  Family f;
  f.name = kName;
  f.help = "image classification: CIFAR/ImageNet/MNIST zoo; top-1, top-5";
  f.make_options = [] { return std::make_unique<ClassifyOptions>(); };
  f.register_models = [](Registry<ModelSpec>& r) { register_classify_models(r, kName); };
  f.make_evaluator = make_classify_evaluator;
  f.layout = ClassifyEvaluator::base_layout();
  f.synthetic_inputs = synthetic_inputs;
  f.import_hook = classify_import_hook(kName);
  return f;
}

}  // namespace igb::models::classify
