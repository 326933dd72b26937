#include "models/classify/classify_solver.h"

#include <optional>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/table.h"
#include "data/classify_data.h"
#include "models/classify/classifier.h"
#include "models/classify/classify_evaluator.h"
#include "models/model_from_checkpoint.h"

namespace igb::models::classify {

namespace {

class ClassifyTask : public TrainingTask {
 public:
  ClassifyTask(Model model, data::ClassifyData data, const ClassifyConfig& config,
               c10::Device device)
      : model_(std::move(model)),
        train_(std::move(data.train)),
        dataset_(data.dataset),
        classes_(static_cast<int64_t>(data.classes.size())),
        description_(data.description),
        evaluator_(std::shared_ptr<const data::Dataset>(std::move(data.val)),
                   std::max<int64_t>(config.train.batch_size, 64), config.train.workers, device,
                   data.description) {}

  Model model() override { return model_; }
  const data::Dataset& train_set() const override { return *train_; }
  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) override {
    return torch::cross_entropy_loss(output, target);
  }
  Metrics validate() override {
    return validation_metrics(evaluate_model(evaluator_, *model_), evaluator_.layout());
  }
  std::string primary_metric() const override { return "top1"; }
  std::string secondary_metric() const override { return "top5"; }
  std::string describe(const Metrics& m) const override {
    return "Top1: " + fixed(metric(m, "top1"), 3) + "  Top5: " + fixed(metric(m, "top5"), 3) +
           "  Loss: " + fixed(metric(m, "loss"), 3);
  }
  nlohmann::json summary(const Metrics& last, const Metrics& best) const override {
    return {{"top1", metric(last, "top1")},
            {"top5", metric(last, "top5")},
            {"loss", metric(last, "loss")},
            {"best_top1", metric(best, "top1")},
            {"best_top5", metric(best, "top5")},
            {"dataset", dataset_},
            {"classes", classes_},
            {"data", description_}};
  }

 private:
  Model model_;
  std::unique_ptr<data::Dataset> train_;
  std::string dataset_;
  int64_t classes_;
  std::string description_;
  ClassifyEvaluator evaluator_;
};

data::ClassifyDataOptions data_options(const ClassifyConfig& config, const ModelImpl& model) {
  data::ClassifyDataOptions o;
  o.dataset = config.dataset;
  o.input_shape = model.input_shape();
  o.seed = config.train.seed;
  o.synthetic_train = config.synthetic_train;
  o.synthetic_val = config.synthetic_val;
  o.max_image_pixels = config.train.max_image_pixels;
  return o;
}

}  // namespace

nlohmann::json train_classify(const ClassifyConfig& config, RunContext& ctx, const RunInfo& info) {
  torch::manual_seed(config.train.seed);
  std::optional<Checkpoint> ckpt;
  Model model;
  if (!config.train.resume.empty()) {
    ckpt = load_checkpoint_for(config.train.resume, info.optform);
    model = model_from_checkpoint(*ckpt);  // in its thinned shape, if it was thinned
  } else {
    check_model_family(config.train.model, info.optform);
    nlohmann::json opts = config.model_args;
    // The class count comes from the data unless given; build once to learn the input shape.
    if (config.input_size > 0) opts["input_size"] = config.input_size;
    if (config.num_classes > 0) opts["num_classes"] = config.num_classes;
    model = create_model(config.train.model, opts);
  }
  auto data = data::load_classify_data(config.train.data, data_options(config, *model));
  auto* clf = dynamic_cast<ClassifierImpl*>(model.get());
  const auto classes = static_cast<int64_t>(data.classes.size());
  if (!ckpt && config.num_classes == 0 && clf->num_classes() != classes) {
    nlohmann::json opts = model->options_json();
    opts.update(config.model_args);
    opts["num_classes"] = classes;
    torch::manual_seed(config.train.seed);
    model = create_model(config.train.model, opts);
    clf = dynamic_cast<ClassifierImpl*>(model.get());
  }
  if (clf->num_classes() < classes)
    throw InputError("the model has " + std::to_string(clf->num_classes()) +
                     " outputs but the data has " + std::to_string(classes) + " classes");

  const std::string data_line = "data: " + data.description;
  const std::string model_line = "model: " + config.train.model + " " +
                                 model->options_json().dump() + ", " +
                                 std::to_string(count_parameters(*model)) + " parameters";
  ClassifyTask task(model, std::move(data), config, ctx.device);
  auto schedule = make_schedule(config.train, *model, ctx.logger, ckpt ? &*ckpt : nullptr);
  Trainer trainer(config.train, ctx, task, *schedule, info);
  if (ckpt) trainer.resume_from(*ckpt);
  trainer.note(data_line);
  trainer.note(model_line);
  return trainer.run();
}

}  // namespace igb::models::classify
