#include "models/classify/classify_solver.h"

#include <iostream>
#include <optional>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/table.h"
#include "core/train_mode_guard.h"
#include "data/classify_data.h"
#include "data/loader.h"
#include "models/classify/classifier.h"

namespace igb::models::classify {

namespace fs = std::filesystem;

ClassifyEvaluation evaluate_classifier(
    ModelImpl& model, const data::Dataset& dataset, int64_t batch_size, int64_t workers,
    const c10::Device& device, const std::function<at::Tensor(const at::Tensor&)>& forward) {
  torch::NoGradGuard no_grad;
  TrainModeGuard eval(model, /*train=*/false);
  data::LoaderOptions lo;
  lo.batch_size = batch_size;
  lo.shuffle = false;
  lo.drop_last = false;
  lo.workers = workers;
  data::BatchLoader loader(dataset, lo);
  loader.start_epoch(0);
  data::Example batch;
  ClassifyEvaluation ev;
  double loss_sum = 0;
  int64_t c1 = 0, c5 = 0;
  while (loader.next(batch)) {
    auto target = batch.target.to(device);
    auto input = batch.input.to(device);
    auto logits = forward ? forward(input) : model.forward(input);
    loss_sum += torch::cross_entropy_loss(logits, target, {}, at::Reduction::Sum).item<double>();
    const int64_t k = std::min<int64_t>(5, logits.size(1));
    auto top = std::get<1>(logits.topk(k, 1));
    auto hit = top.eq(target.unsqueeze(1));
    c1 += hit.narrow(1, 0, 1).sum().item<int64_t>();
    c5 += hit.sum().item<int64_t>();
    ev.count += target.size(0);
  }
  if (ev.count > 0) {
    ev.top1 = 100.0 * static_cast<double>(c1) / static_cast<double>(ev.count);
    ev.top5 = 100.0 * static_cast<double>(c5) / static_cast<double>(ev.count);
    ev.loss = loss_sum / static_cast<double>(ev.count);
  }
  return ev;
}

namespace {

class ClassifyTask : public TrainingTask {
 public:
  ClassifyTask(Model model, data::ClassifyData data, const ClassifyConfig& config,
               c10::Device device)
      : model_(std::move(model)), data_(std::move(data)), config_(config), device_(device) {}

  Model model() override { return model_; }
  const data::Dataset& train_set() const override { return *data_.train; }
  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) override {
    return torch::cross_entropy_loss(output, target);
  }
  Metrics validate() override {
    auto ev =
        evaluate_classifier(*model_, *data_.val, std::max<int64_t>(config_.train.batch_size, 64),
                            config_.train.workers, device_);
    return {{"top1", ev.top1}, {"top5", ev.top5}, {"loss", ev.loss}};
  }
  std::string primary_metric() const override { return "top1"; }
  std::string secondary_metric() const override { return "top5"; }
  std::string describe(const Metrics& m) const override {
    return "Top1: " + fixed(metric(m, "top1"), 3) + "  Top5: " + fixed(metric(m, "top5"), 3) +
           "  Loss: " + fixed(metric(m, "loss"), 3);
  }
  nlohmann::json summary(const Metrics& last, const Metrics& best) const override {
    return {{"top1", metric(last, "top1")},      {"top5", metric(last, "top5")},
            {"loss", metric(last, "loss")},      {"best_top1", metric(best, "top1")},
            {"best_top5", metric(best, "top5")}, {"dataset", data_.dataset},
            {"classes", data_.classes.size()},   {"data", data_.description}};
  }

 private:
  Model model_;
  data::ClassifyData data_;
  ClassifyConfig config_;
  c10::Device device_;
};

data::ClassifyDataOptions data_options(const ClassifyConfig& config, const ModelImpl& model) {
  data::ClassifyDataOptions o;
  o.dataset = config.dataset;
  o.input_shape = model.input_shape();
  o.seed = config.train.seed;
  o.synthetic_train = config.synthetic_train;
  o.synthetic_val = config.synthetic_val;
  return o;
}

}  // namespace

nlohmann::json train_classify(const ClassifyConfig& config, RunContext& ctx, const RunInfo& info) {
  torch::manual_seed(config.train.seed);
  std::optional<Checkpoint> ckpt;
  Model model;
  if (!config.train.resume.empty()) {
    ckpt = load_checkpoint_for(config.train.resume, "classify");
    model = model_from_checkpoint(*ckpt);  // in its thinned shape, if it was thinned
  } else {
    check_model_family(config.train.model, "classify");
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

namespace {

/// Examples held in memory.
class ExampleList : public data::Dataset {
 public:
  explicit ExampleList(std::vector<data::Example> examples) : examples_(std::move(examples)) {}
  int64_t size() const override { return static_cast<int64_t>(examples_.size()); }
  data::Example get(int64_t index, int64_t) const override {
    return examples_.at(static_cast<size_t>(index));
  }

 private:
  std::vector<data::Example> examples_;
};

}  // namespace

std::function<Metrics()> classify_evaluator(ModelImpl& model, const std::string& data,
                                            const std::string& dataset, int64_t batches,
                                            const c10::Device& device, std::string* description) {
  ClassifyConfig config;  // the default synthetic validation split, as igb-test
  config.dataset = dataset;
  config.train.seed = 0;
  auto d = data::load_classify_data(data, data_options(config, model));
  const int64_t n = batches > 0 ? std::min(d.val->size(), batches * 128) : d.val->size();
  std::vector<data::Example> examples;
  examples.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) examples.push_back(d.val->get(i, 0));
  if (description) *description = std::to_string(n) + " validation images of " + d.description;
  auto kept = std::make_shared<ExampleList>(std::move(examples));
  return [&model, kept, device]() -> Metrics {
    const auto ev = evaluate_classifier(model, *kept, 128, 0, device);
    return {{"top1", ev.top1}, {"top5", ev.top5}, {"loss", ev.loss}};
  };
}

nlohmann::json test_classify(const std::string& checkpoint, const std::string& data,
                             const std::string& dataset, const std::string& out, RunContext& ctx,
                             const compress::QuantizeEvalRequest& quantize_eval,
                             const ExternalForward& external) {
  Checkpoint ckpt = load_checkpoint_for(checkpoint, "classify");
  Model model = model_from_checkpoint(ckpt);
  model->to(ctx.device);
  ClassifyConfig test_config;  // the default synthetic validation split
  test_config.dataset = dataset;
  test_config.train.seed = 0;
  auto d = data::load_classify_data(data, data_options(test_config, *model));
  auto t0 = std::chrono::steady_clock::now();
  auto ev = evaluate_classifier(*model, *d.val, 128, 2, ctx.device);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The external model runs before anything is printed, so a shape it refuses is the one line.
  ClassifyEvaluation eev;
  if (external.enabled())
    eev = evaluate_classifier(*model, *d.val, 128, 2, ctx.device, external.forward);
  Table table{{"Checkpoint", "Epoch", "Images", "Top1 (%)", "Top5 (%)", "Loss"},
              {{checkpoint, std::to_string(ckpt.meta().epoch), std::to_string(ev.count),
                fixed(ev.top1, 3), fixed(ev.top5, 3), fixed(ev.loss, 4)}}};
  std::cout << table.to_text();
  std::cout << "==> Top1: " << fixed(ev.top1, 3) << "    Top5: " << fixed(ev.top5, 3)
            << "    Loss: " << fixed(ev.loss, 3) << std::endl;
  nlohmann::json summary = {{"optform", "classify"},
                            {"checkpoint", checkpoint},
                            {"model", ckpt.meta().model},
                            {"epoch", ckpt.meta().epoch},
                            {"dataset", d.dataset},
                            {"data", d.description},
                            {"images", ev.count},
                            {"top1", ev.top1},
                            {"top5", ev.top5},
                            {"loss", ev.loss},
                            {"seconds", secs}};
  fs::path dir = out.empty() ? fs::path(checkpoint).parent_path() : fs::path(out);
  if (dir.empty()) dir = ".";
  if (quantize_eval.enabled()) {
    nlohmann::json info;
    auto q = compress::quantize_for_eval(
        quantize_eval, *model, model->input_shape(),
        [&](const at::Tensor& x) { return model->forward(x); },
        [&](const compress::PostTrainLinearQuantizer::Forward& f, int64_t n) {
          data::LoaderOptions lo;
          lo.batch_size = 128;
          lo.shuffle = false;
          lo.drop_last = false;
          lo.workers = 2;
          data::BatchLoader loader(*d.val, lo);
          loader.start_epoch(0);
          data::Example batch;
          for (int64_t i = 0; i < n && loader.next(batch); ++i) f(batch.input.to(ctx.device));
        },
        dir, *ctx.logger, &info);
    auto qev = evaluate_classifier(*model, *d.val, 128, 2, ctx.device,
                                   [&](const at::Tensor& x) { return q->forward(x); });
    Table cmp{{"Model", "Top1 (%)", "Top5 (%)", "Loss"},
              {{"FP32", fixed(ev.top1, 3), fixed(ev.top5, 3), fixed(ev.loss, 4)},
               {info["label"].get<std::string>(), fixed(qev.top1, 3), fixed(qev.top5, 3),
                fixed(qev.loss, 4)},
               {"difference", fixed(qev.top1 - ev.top1, 3), fixed(qev.top5 - ev.top5, 3),
                fixed(qev.loss - ev.loss, 4)}}};
    std::cout << "Post-training quantization (" << quantize_eval.schedule << ")\n" << cmp.to_text();
    info["fp32"] = {{"top1", ev.top1}, {"top5", ev.top5}, {"loss", ev.loss}};
    info["quantized"] = {{"top1", qev.top1}, {"top5", qev.top5}, {"loss", qev.loss}};
    info["top1_drop"] = ev.top1 - qev.top1;
    summary["quantize_eval"] = info;
  }
  if (external.enabled()) {
    Table cmp{{"Model", "Top1 (%)", "Top5 (%)", "Loss"},
              {{"checkpoint (LibTorch)", fixed(ev.top1, 3), fixed(ev.top5, 3), fixed(ev.loss, 4)},
               {external.label, fixed(eev.top1, 3), fixed(eev.top5, 3), fixed(eev.loss, 4)},
               {"difference", fixed(eev.top1 - ev.top1, 3), fixed(eev.top5 - ev.top5, 3),
                fixed(eev.loss - ev.loss, 4)}}};
    std::cout << external.label << " (" << external.source << ")\n" << cmp.to_text();
    summary["onnx"] = {{"runtime", external.label}, {"model", external.source},
                       {"top1", eev.top1},          {"top5", eev.top5},
                       {"loss", eev.loss},          {"top1_difference", eev.top1 - ev.top1}};
  }
  write_text_atomically(dir / "test_summary.json", summary.dump(2) + "\n");
  ctx.logger->info("wrote " + (dir / "test_summary.json").string());
  return summary;
}

}  // namespace igb::models::classify
