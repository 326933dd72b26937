#include "models/deblur/deblur_solver.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "core/error.h"
#include "core/tensor_util.h"
#include "data/deblur_data.h"
#include "data/image.h"
#include "data/image_metrics.h"
#include "models/deblur/deblur_evaluator.h"
#include "models/model.h"

namespace igb::models::deblur {

namespace {

/// A critic that is linear in its input: D(x) = Σ w ⊙ x per sample, so ∇ₓD = w everywhere.
struct LinearCritic : torch::nn::Module {
  explicit LinearCritic(const at::Tensor& w0) { w = register_parameter("w", w0.clone()); }
  at::Tensor forward(const at::Tensor& x) { return (x * w).sum({1, 2, 3}); }
  at::Tensor w;
};

}  // namespace

// The content losses on images whose error is a constant per image (0.1, 0.01 and 0.001 at every
// pixel): L1 and MSE over all pixels; the PSNR loss is the mean of 10·log10 of each image's MSE,
// and its gradient on an image is inversely proportional to that image's error (MSE's is
// proportional to it): images restored well pull as hard as the metric weighs them.
TEST(DeblurSolver, ContentLossesAndThePsnrLossGradient) {
  torch::manual_seed(2);
  const auto target = torch::rand({3, 3, 4, 5}, torch::kDouble) * 2 - 1;
  const auto error = torch::tensor({0.1, 0.01, 0.001}, torch::kDouble).view({3, 1, 1, 1});
  const auto output = (target + error).requires_grad_();
  EXPECT_NEAR(content_loss("l1", output, target).item<double>(), 0.111 / 3, 1e-12);
  EXPECT_NEAR(content_loss("mse", output, target).item<double>(), (1e-2 + 1e-4 + 1e-6) / 3, 1e-12);
  const auto psnr = content_loss("psnr", output, target);
  double expected = 0;
  for (double e : {0.1, 0.01, 0.001}) expected += 10 * std::log10(e * e + 1e-8) / 3;
  EXPECT_NEAR(psnr.item<double>(), expected, 1e-9);
  psnr.backward();
  // d/dx of (10/ln 10)·ln(MSE_i + 1e-8)/3 = (10/ln 10)/3 · 2·e_i/(n·(MSE_i + 1e-8)) at each of
  // image i's n values; summed over them, (20/ln 10)/3 · e_i/(e_i² + 1e-8).
  const auto per_image = output.grad().flatten(1).sum(1);
  for (int64_t i = 0; i < 3; ++i) {
    const double e = error.flatten()[i].item<double>();
    EXPECT_NEAR(per_image[i].item<double>(), 20 / std::log(10.0) / 3 * e / (e * e + 1e-8), 1e-6)
        << i;
  }
  EXPECT_THROW(content_loss("ssim", output, target), InputError);
}

// For a linear critic the penalty is (‖w‖ − 1)² whatever the mixing, and its gradient reaches w:
// d/dw (‖w‖ − 1)² = 2(‖w‖ − 1)·w/‖w‖.
TEST(DeblurSolver, GradientPenaltyOfALinearCriticAndItsGradient) {
  torch::manual_seed(0);
  const auto w0 = torch::randn({1, 3, 4, 4}, torch::kDouble) * 0.5;
  LinearCritic critic(w0);
  const auto real = torch::rand({5, 3, 4, 4}, torch::kDouble);
  const auto fake = torch::rand({5, 3, 4, 4}, torch::kDouble);
  const auto gp = gradient_penalty(
      critic, [&](const at::Tensor& x) { return critic.forward(x); }, real, fake);
  const double norm = w0.norm().item<double>();
  EXPECT_NEAR(gp.item<double>(), (norm - 1) * (norm - 1), 1e-12);
  gp.backward();
  EXPECT_TRUE(torch::allclose(critic.w.grad(), 2 * (norm - 1) * w0 / norm, 1e-10, 1e-12));
}

// A quadratic critic D(x) = ½ Σ x² has ∇ = x̂ itself: the penalty is the mean of (‖x̂‖ − 1)² over
// the batch at the interpolates drawn with the same seed.
TEST(DeblurSolver, GradientPenaltyAtTheInterpolates) {
  torch::nn::Module none;
  const auto real = torch::full({3, 1, 2, 2}, 0.8, torch::kDouble);
  const auto fake = torch::full({3, 1, 2, 2}, 0.2, torch::kDouble);
  torch::manual_seed(5);
  const auto gp = gradient_penalty(
      none,
      [](const at::Tensor& x) {
        return 0.5 * x.pow(2).sum({1, 2, 3});
      },
      real, fake);
  torch::manual_seed(5);
  const auto alpha = torch::rand({3, 1, 1, 1}, torch::kDouble);
  const auto mixed = alpha * real + (1 - alpha) * fake;
  const auto expected = (mixed.reshape({3, -1}).norm(2, 1) - 1).pow(2).mean();
  EXPECT_NEAR(gp.item<double>(), expected.item<double>(), 1e-12);
}

// The evaluation maps the [0, 1] pairs to the generator's [−1, 1] and back: a generator whose
// residual is zero returns its input, so the restored image scores as the blurred one.
TEST(DeblurSolver, AnIdentityGeneratorScoresAsTheBlurredInput) {
  register_builtin_models();
  auto g = create_model("deblurgan", {{"ngf", 4}, {"blocks", 1}, {"dropout", 0}});
  {
    torch::NoGradGuard no_grad;
    for (auto& p : g->named_parameters())
      if (p.key().rfind("model.", 0) == 0 && p.key().find("weight") != std::string::npos &&
          p.value().dim() == 4 && p.value().size(0) == 3)
        p.value().zero_();  // the last conv: tanh(0) = 0
    for (auto& p : g->named_parameters())
      if (p.value().dim() == 1 && p.value().size(0) == 3) p.value().zero_();
  }
  data::DeblurDataOptions o;
  o.synthetic_val_images = 2;
  o.synthetic_size = 48;
  const auto pairs = data::load_deblur_eval_data("synthetic", o);
  const DeblurEvaluator evaluator(pairs, c10::Device(c10::kCPU), "two pairs", "synthetic");
  const auto ev = evaluate_model(evaluator, *g);
  ASSERT_EQ(ev.items.size(), 2u);
  EXPECT_NEAR(metric(ev.metrics, "psnr"), metric(ev.baseline, "psnr"), 1e-9);
  EXPECT_NEAR(metric(ev.metrics, "ssim"), metric(ev.baseline, "ssim"), 1e-9);
  EXPECT_GT(metric(ev.metrics, "loss"), 0.0);
}

// A fresh generator starts near the identity: its last conv's weights are a tenth of
// DeblurGAN's draw and its bias zero, so its output stays close to the input (a correction of a
// few hundredths on average) while the gradient reaches its first conv at once; scale 0 is the
// exact identity.
TEST(DeblurSolver, AFreshGeneratorStartsNearTheIdentity) {
  torch::manual_seed(2);
  register_builtin_models();
  auto g = create_model("deblurgan_small", nlohmann::json::object());
  const auto x = torch::rand({2, 3, 16, 16}) * 0.4 + 0.3;  // clamp(x + r) = x + r for |r| < 0.3
  const auto drawn = g->named_parameters()["model.20.weight"].clone();
  start_near_identity(*g);
  EXPECT_TRUE(torch::allclose(g->named_parameters()["model.20.weight"], drawn * 0.1));
  EXPECT_TRUE(torch::equal(g->named_parameters()["model.20.bias"], torch::zeros({3})));
  const auto off = (g->forward(x) - x).abs();
  EXPECT_GT(off.mean().item<double>(), 0.005);
  EXPECT_LT(off.mean().item<double>(), 0.06);
  EXPECT_LT(off.max().item<double>(), 0.25);
  g->forward(x).pow(2).mean().backward();
  // A copy: named_parameters() returns a temporary dictionary.
  const at::Tensor first = g->named_parameters()["model.1.weight"];
  ASSERT_TRUE(first.grad().defined());
  EXPECT_GT(first.grad().abs().sum().item<double>(), 0);
  start_near_identity(*g, 0);
  EXPECT_TRUE(torch::equal(g->forward(x), x));
}

// --self-ensemble: each pair is restored as the mean of the generator's outputs on the eight
// flips and transposes of its input, each mapped back; the PSNR then is that of the mean image,
// computed here with explicit flips of a non-square image and data::psnr. The plain evaluation
// of the same generator scores differently (a random generator is not flip-equivariant).
TEST(DeblurSolver, SelfEnsembleRestoresTheMeanOfTheEightOrientations) {
  torch::manual_seed(4);
  register_builtin_models();
  auto g = create_model("deblurgan", {{"ngf", 4}, {"blocks", 1}, {"dropout", 0}});
  data::DeblurDataOptions o;
  o.synthetic_val_images = 1;
  o.synthetic_size = 48;
  auto pairs = data::load_deblur_eval_data("synthetic", o);
  ASSERT_EQ(pairs.size(), 1u);
  // A non-square image: 48 x 40.
  pairs[0].blurred = pairs[0].blurred.narrow(2, 0, 40).contiguous();
  pairs[0].sharp = pairs[0].sharp.narrow(2, 0, 40).contiguous();
  g->eval();
  at::Tensor expected;
  {
    torch::NoGradGuard no_grad;
    const auto x = (pairs[0].blurred * 2 - 1).unsqueeze(0);
    std::vector<at::Tensor> outs;
    for (bool swap : {false, true})
      for (bool fh : {false, true})
        for (bool fw : {false, true}) {
          auto in = x;
          if (fw) in = in.flip({3});
          if (fh) in = in.flip({2});
          if (swap) in = in.transpose(2, 3).contiguous();
          auto out = g->forward(in);
          if (swap) out = out.transpose(2, 3);
          if (fh) out = out.flip({2});
          if (fw) out = out.flip({3});
          outs.push_back(out);
        }
    expected = ((torch::stack(outs).mean(0).squeeze(0) + 1) / 2).clamp(0, 1);
  }
  const double want = data::psnr(data::quantize_8bit(expected), pairs[0].sharp);
  const DeblurEvaluator evaluator(pairs, c10::Device(c10::kCPU), "one pair", "synthetic");
  const auto plain = evaluate_model(evaluator, *g);
  const auto ensembled = evaluator.evaluate([&g](const at::Tensor& x) {
    return geometric_self_ensemble([&g](const at::Tensor& t) { return g->forward(t); }, x);
  });
  EXPECT_NEAR(metric(ensembled.metrics, "psnr"), want, 1e-3);
  EXPECT_GT(std::abs(metric(ensembled.metrics, "psnr") - metric(plain.metrics, "psnr")), 0.01);
  EXPECT_DOUBLE_EQ(metric(ensembled.baseline, "psnr"), metric(plain.baseline, "psnr"));
}

}  // namespace igb::models::deblur
