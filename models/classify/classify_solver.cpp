#include "models/classify/classify_solver.h"

#include <optional>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/logger.h"
#include "core/table.h"
#include "data/classify_data.h"
#include "models/classify/classifier.h"
#include "models/classify/classify_evaluator.h"
#include "models/classify/early_exit.h"
#include "models/model_from_checkpoint.h"

namespace igb::models::classify {

namespace {

class ClassifyTask : public TrainingTask {
 public:
  ClassifyTask(Model model, data::ClassifyData data, const ClassifyConfig& config,
               c10::Device device, Logger* logger)
      : model_(std::move(model)),
        logger_(logger),
        early_exits_(exit_points(*model_).size()),
        lossweights_(config.earlyexit_lossweights),
        thresholds_(config.earlyexit_thresholds),
        train_(std::move(data.train)),
        dataset_(data.dataset),
        classes_(static_cast<int64_t>(data.classes.size())),
        description_(data.description),
        evaluator_(std::shared_ptr<const data::Dataset>(std::move(data.val)),
                   std::max<int64_t>(config.train.batch_size, 64), config.train.workers, device,
                   data.description) {}

  Model model() override { return model_; }
  const data::Dataset& train_set() const override { return *train_; }
  at::Tensor forward(ModelImpl& model, const at::Tensor& input) override {
    if (early_exits_ == 0) return model.forward(input);
    exit_outputs_ = forward_exits(
        model, [&model](const at::Tensor& x) { return model.forward(x); }, input);
    at::Tensor final_output = exit_outputs_.back();
    exit_outputs_.pop_back();
    return final_output;
  }
  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) override {
    if (exit_outputs_.empty()) return torch::cross_entropy_loss(output, target);
    std::vector<at::Tensor> outputs;
    for (const auto& o : exit_outputs_) outputs.push_back(o.to(at::kFloat));
    outputs.push_back(output);
    exit_outputs_.clear();
    return earlyexit_loss(outputs, target, lossweights_);
  }
  Metrics validate() override {
    if (early_exits_ == 0)
      return validation_metrics(evaluate_model(evaluator_, *model_), evaluator_.layout());
    return validate_exits();
  }
  std::string primary_metric() const override { return "top1"; }
  std::string secondary_metric() const override { return "top5"; }
  std::string describe(const Metrics& m) const override {
    return "Top1: " + fixed(metric(m, "top1"), 3) + "  Top5: " + fixed(metric(m, "top5"), 3) +
           "  Loss: " + fixed(metric(m, "loss"), 3);
  }
  nlohmann::json summary(const Metrics& last, const Metrics& best) const override {
    nlohmann::json s = {{"top1", metric(last, "top1")},
                        {"top5", metric(last, "top5")},
                        {"loss", metric(last, "loss")},
                        {"best_top1", metric(best, "top1")},
                        {"best_top5", metric(best, "top5")},
                        {"dataset", dataset_},
                        {"classes", classes_},
                        {"data", description_}};
    if (early_exits_ > 0) s["early_exit"] = exit_summary(last);
    return s;
  }

 private:
  /// Validation of an early-exit network: Distiller's report (logged) and its figures as metrics.
  Metrics validate_exits() {
    DistillerExitStats stats(early_exits_, thresholds_);
    evaluator_.for_each_batch([&](const data::Example& batch) {
      const auto x = batch.input.to(evaluator_.device());
      stats.add(forward_exits(
                    *model_, [this](const at::Tensor& t) { return model_->forward(t); }, x),
                batch.target.to(evaluator_.device()));
      return true;
    });
    if (logger_)
      for (const auto& line : stats.report()) logger_->info(line);
    const auto ex = stats.exits();
    Metrics m = {{"top1", stats.top1()}, {"top5", stats.top5()}, {"loss", ex.back().loss}};
    const double n = static_cast<double>(std::max<int64_t>(1, stats.samples()));
    for (size_t e = 0; e < ex.size(); ++e) {
      const std::string p = "exit" + std::to_string(e) + "_";
      m.emplace_back(p + "taken_pct", 100.0 * static_cast<double>(ex[e].taken) / n);
      m.emplace_back(p + "top1", ex[e].top1);
      m.emplace_back(p + "top5", ex[e].top5);
      m.emplace_back(p + "top1_all", ex[e].top1_all);
      m.emplace_back(p + "loss", ex[e].loss);
    }
    return m;
  }

  /// summary.json's "early_exit": the weights, the thresholds and each exit's last figures.
  nlohmann::json exit_summary(const Metrics& last) const {
    nlohmann::json exits = nlohmann::json::array();
    for (size_t e = 0; e <= early_exits_; ++e) {
      const std::string p = "exit" + std::to_string(e) + "_";
      exits.push_back({{"exit", e},
                       {"taken_pct", metric(last, p + "taken_pct")},
                       {"top1", metric(last, p + "top1")},
                       {"top5", metric(last, p + "top5")},
                       {"top1_every_sample", metric(last, p + "top1_all")},
                       {"loss", metric(last, p + "loss")}});
    }
    return {{"lossweights", lossweights_},
            {"thresholds", thresholds_},
            {"decided_by", "cross-entropy against the label (Distiller's rule)"},
            {"exits", exits}};
  }

  Model model_;
  Logger* logger_;
  size_t early_exits_;
  std::vector<double> lossweights_, thresholds_;
  std::vector<at::Tensor> exit_outputs_;
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
  check_earlyexit_options(config.train.model, exit_points(*model).size(),
                          config.earlyexit_lossweights, config.earlyexit_thresholds);
  ClassifyTask task(model, std::move(data), config, ctx.device, ctx.logger);
  auto schedule = make_schedule(config.train, *model, ctx.logger, ckpt ? &*ckpt : nullptr);
  Trainer trainer(config.train, ctx, task, *schedule, info);
  if (ckpt) trainer.resume_from(*ckpt);
  trainer.note(data_line);
  trainer.note(model_line);
  return trainer.run();
}

}  // namespace igb::models::classify
