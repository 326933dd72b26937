#include "models/classify/classify_evaluator.h"

#include "data/classify_data.h"
#include "data/loader.h"

namespace igb::models::classify {

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

EvalLayout ClassifyEvaluator::base_layout() {
  EvalLayout l;
  l.columns = {{"top1", "Top1 (%)", 3}, {"top5", "Top5 (%)", 3}, {"loss", "Loss", 4}};
  return l;
}

ClassifyEvaluator::ClassifyEvaluator(std::shared_ptr<const data::Dataset> dataset,
                                     int64_t batch_size, int64_t workers, c10::Device device,
                                     std::string description, nlohmann::json summary)
    : dataset_(std::move(dataset)),
      batch_size_(batch_size),
      workers_(workers),
      device_(device),
      description_(std::move(description)),
      summary_(std::move(summary)),
      layout_(base_layout()) {}

void ClassifyEvaluator::for_each_batch(const std::function<bool(const data::Example&)>& f) const {
  data::LoaderOptions lo;
  lo.batch_size = batch_size_;
  lo.shuffle = false;
  lo.drop_last = false;
  lo.workers = workers_;
  data::BatchLoader loader(*dataset_, lo);
  loader.start_epoch(0);
  data::Example batch;
  while (loader.next(batch))
    if (!f(batch)) break;
}

Evaluation ClassifyEvaluator::evaluate(const Forward& forward, const std::string&) const {
  torch::NoGradGuard no_grad;
  double loss_sum = 0;
  int64_t c1 = 0, c5 = 0, count = 0;
  for_each_batch([&](const data::Example& batch) {
    const auto target = batch.target.to(device_);
    const auto logits = forward(batch.input.to(device_));
    loss_sum += torch::cross_entropy_loss(logits, target, {}, at::Reduction::Sum).item<double>();
    const int64_t k = std::min<int64_t>(5, logits.size(1));
    const auto hit = std::get<1>(logits.topk(k, 1)).eq(target.unsqueeze(1));
    c1 += hit.narrow(1, 0, 1).sum().item<int64_t>();
    c5 += hit.sum().item<int64_t>();
    count += target.size(0);
    return true;
  });
  Evaluation ev;
  ev.count = count;
  const double n = static_cast<double>(std::max<int64_t>(1, count));
  ev.metrics = {{"top1", count ? 100.0 * static_cast<double>(c1) / n : 0.0},
                {"top5", count ? 100.0 * static_cast<double>(c5) / n : 0.0},
                {"loss", count ? loss_sum / n : 0.0}};
  return ev;
}

void ClassifyEvaluator::for_each_input(int64_t batches,
                                       const std::function<void(const at::Tensor&)>& f) const {
  int64_t done = 0;
  for_each_batch([&](const data::Example& batch) {
    if (done++ >= batches) return false;
    f(batch.input.to(device_));
    return true;
  });
}

std::unique_ptr<Evaluator> make_classify_evaluator(ModelImpl& model, const EvalData& data,
                                                   const c10::Device& device) {
  data::ClassifyDataOptions o;  // the default synthetic validation split, seed 0
  o.dataset = data.options.contains("dataset") ? data.options["dataset"].get<std::string>()
                                               : std::string("auto");
  o.input_shape = model.input_shape();
  o.seed = 0;
  o.max_image_pixels = data.max_image_pixels;
  o.test_split = true;  // a dataset with a test split of its own is tested on it (digits)
  auto d = data::load_classify_data(data.data, o);
  const nlohmann::json summary = {{"dataset", d.dataset}, {"data", d.description}};
  if (data.batches <= 0)
    return std::make_unique<ClassifyEvaluator>(
        std::shared_ptr<const data::Dataset>(std::move(d.val)), 128, 2, device, d.description,
        summary);
  const int64_t n = std::min(d.val->size(), data.batches * 128);
  std::vector<data::Example> examples;
  examples.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) examples.push_back(d.val->get(i, 0));
  return std::make_unique<ClassifyEvaluator>(
      std::make_shared<ExampleList>(std::move(examples)), 128, 0, device,
      std::to_string(n) + " evaluation images of " + d.description, summary);
}

}  // namespace igb::models::classify
