#include "models/evaluation.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "core/error.h"
#include "data/dataset.h"
#include "data/image.h"
#include "models/classify/classify_evaluator.h"
#include "models/family.h"
#include "models/sr/sr_evaluator.h"

namespace igb::models {

namespace {

/// Examples held in memory: input i is the constant i, its label labels[i].
class Fixed : public data::Dataset {
 public:
  explicit Fixed(std::vector<int64_t> labels) : labels_(std::move(labels)) {}
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  data::Example get(int64_t index, int64_t) const override {
    return {torch::full({1, 2, 2}, static_cast<double>(index)),
            torch::tensor(labels_[static_cast<size_t>(index)])};
  }

 private:
  std::vector<int64_t> labels_;
};

}  // namespace

// Top-1, top-5 and the cross-entropy against a hand count: six classes, the logits of sample i
// rank class i % 6 first, then i+1, ...; the labels put three samples in first place, one in
// second, one in sixth.
TEST(Evaluation, ClassifierScoresMatchAHandCount) {
  const std::vector<int64_t> labels = {0, 2, 2, 3, 3};  // first, second, first, first, sixth
  auto data = std::make_shared<Fixed>(labels);
  classify::ClassifyEvaluator evaluator(data, /*batch_size=*/2, /*workers=*/0,
                                        c10::Device(c10::kCPU), "five samples");
  int64_t calls = 0;
  const Forward forward = [&](const at::Tensor& x) {
    ++calls;
    auto logits = torch::zeros({x.size(0), 6});
    for (int64_t n = 0; n < x.size(0); ++n) {
      const auto i = static_cast<int64_t>(x[n][0][0][0].item<double>());
      const int64_t first = i == 4 ? 4 : i % 6;  // sample 4 ranks label 3 last
      for (int64_t r = 0; r < 6; ++r) logits[n][(first + r) % 6] = 10.0 - r;
    }
    return logits;
  };
  const auto ev = evaluator.evaluate(forward);
  EXPECT_EQ(calls, 3);  // batches of 2, 2, 1
  EXPECT_EQ(ev.count, 5);
  // Sample 1 (label 2) ranks class 1 first and 2 second: top-5 only. Sample 4 ranks 4, 5, 0, 1, 2
  // then 3: neither.
  EXPECT_DOUBLE_EQ(metric(ev.metrics, "top1"), 60.0);
  EXPECT_DOUBLE_EQ(metric(ev.metrics, "top5"), 80.0);
  double loss = 0;
  const double lse = std::log(std::exp(10.0) + std::exp(9.0) + std::exp(8.0) + std::exp(7.0) +
                              std::exp(6.0) + std::exp(5.0));
  for (double logit : {10.0, 9.0, 10.0, 10.0, 5.0}) loss += lse - logit;
  EXPECT_NEAR(metric(ev.metrics, "loss"), loss / 5, 1e-5);
  EXPECT_TRUE(ev.baseline.empty());
  EXPECT_TRUE(ev.items.empty());
  // Calibration sees the first batches as evaluate() feeds them.
  std::vector<int64_t> sizes;
  evaluator.for_each_input(2, [&](const at::Tensor& x) { sizes.push_back(x.size(0)); });
  EXPECT_EQ(sizes, (std::vector<int64_t>{2, 2}));
}

TEST(Evaluation, MeansAndValidationMetricsKeepTheirOrderAndPrefixTheBaseline) {
  Evaluation ev;
  ev.items = {{"a", {{"psnr", 30}, {"ssim", 0.5}}, {{"psnr", 28}, {"ssim", 0.4}}},
              {"b", {{"psnr", 32}, {"ssim", 0.7}}, {{"psnr", 29}, {"ssim", 0.6}}}};
  ev.metrics = mean_of_items(ev.items, false);
  ev.metrics.emplace_back("loss", 0.01);
  ev.baseline = mean_of_items(ev.items, true);
  EXPECT_EQ(ev.metrics, (Metrics{{"psnr", 31}, {"ssim", 0.6}, {"loss", 0.01}}));
  EXPECT_DOUBLE_EQ(metric(ev.baseline, "psnr"), 28.5);
  EvalLayout layout;
  layout.baseline = "Bicubic";
  EXPECT_EQ(validation_metrics(ev, layout, {"loss"}),
            (Metrics{{"psnr", 31}, {"ssim", 0.6}, {"bicubic_psnr", 28.5}, {"bicubic_ssim", 0.5}}));
  EXPECT_TRUE(mean_of_items({}, false).empty());
}

// Each family is one descriptor: its evaluator, layout, options and models come from it, and a
// model's family finds them.
TEST(Evaluation, FamiliesDescribeTheirEvaluationAndOwnTheirModels) {
  register_builtin_models();
  EXPECT_EQ(family_registry().names(), (std::vector<std::string>{"classify", "deblur", "sr"}));
  EXPECT_EQ(family_of_model("fsrcnn").name, "sr");
  EXPECT_EQ(family_of_model("resnet20_cifar").name, "classify");
  EXPECT_EQ(family_of_model("deblurgan").name, "deblur");
  EXPECT_EQ(family_layout("sr").baseline, "Bicubic");
  EXPECT_EQ(family_layout("deblur").baseline_phrase, "the blurred input");
  EXPECT_EQ(family_layout("classify").columns.front().key, "top1");
  for (const auto& name : family_registry().names()) {
    const auto& f = family(name);
    EXPECT_TRUE(f.make_options && f.make_evaluator && f.synthetic_inputs) << name;
    EXPECT_FALSE(model_names(name).empty()) << name;
  }
  try {
    family("denoise");
    FAIL() << "an unknown family is an error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown optform 'denoise'; valid optforms: classify, deblur, sr");
  }
  // The synthetic inputs of a family take the traced input's shape.
  std::vector<at::Tensor> seen;
  family("sr").synthetic_inputs({1, 1, 24, 20}, 2, [&](const at::Tensor& x) { seen.push_back(x); });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].sizes(), (std::vector<int64_t>{1, 1, 24, 20}));
  EXPECT_FALSE(torch::equal(seen[0], seen[1]));
  seen.clear();
  family("deblur").synthetic_inputs({1, 3, 16, 16}, 1,
                                    [&](const at::Tensor& x) { seen.push_back(x); });
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_LT(seen[0].min().item<double>(), 0.0);  // the generator's [-1, 1]
}

// The SR evaluator scores an image that is the ground truth's luma exactly: PSNR is that of
// 8-bit rounding alone (infinite when the truth is on the grid), and the loss is 0.
TEST(Evaluation, SrEvaluatorScoresTheTruthAsPerfect) {
  data::SrEvalImage img;
  img.name = "flat.png";
  img.hr_rgb = torch::full({3, 24, 24}, 128.0 / 255);
  img.bicubic_rgb = torch::full({3, 24, 24}, 100.0 / 255);
  img.lr = torch::zeros({1, 8, 8});
  sr::SrEvaluator evaluator({img}, 3, /*y_channel=*/true, c10::Device(c10::kCPU), "one image");
  const auto truth_y = data::rgb_to_y(img.hr_rgb).unsqueeze(0);
  const auto ev = evaluator.evaluate([&](const at::Tensor&) { return truth_y; });
  ASSERT_EQ(ev.items.size(), 1u);
  EXPECT_GT(metric(ev.metrics, "psnr"), metric(ev.baseline, "psnr"));
  EXPECT_NEAR(metric(ev.metrics, "loss"), 0.0, 1e-12);
  EXPECT_EQ(evaluator.layout().note, "x3, Y, border 3");
  EXPECT_EQ(evaluator.summary_fields()["upscale"], 3);
}

}  // namespace igb::models
