// The fake-quantization arithmetic of quantization-aware training (DoReFa, PACT, range-linear)
// against hand-worked values and against plain LibTorch autograd of the same formulas.
#include "compress/fake_quant.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "compress/quant_modules.h"
#include "core/activation.h"
#include "core/error.h"
#include "graph/op_table.h"
#include "graph/summary_graph.h"

namespace igb::compress {

namespace {

at::Tensor fq_vec(std::vector<float> v) { return torch::tensor(v); }

void fq_expect_values(const at::Tensor& actual, std::vector<double> expected) {
  const at::Tensor a = actual.detach().to(at::kDouble).flatten();
  ASSERT_EQ(a.numel(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(a[static_cast<int64_t>(i)].item<double>(), expected[i], 1e-6) << "element " << i;
}

// Straight-through rounding written with plain autograd ops (an independent reference).
at::Tensor fq_ref_round(const at::Tensor& x) { return x + (at::round(x) - x).detach(); }

// Distiller's dorefa_quantize_param written out: 2·round(n·u)/n − 1, u = tanh W/(2 max|tanh W|)+½.
at::Tensor fq_ref_dorefa(const at::Tensor& w, int64_t bits) {
  const double n = std::pow(2.0, static_cast<double>(bits)) - 1;
  const at::Tensor t = at::tanh(w);
  const at::Tensor u = t / (2 * t.abs().max()) + 0.5;
  return 2 * fq_ref_round(u * n) / n - 1;
}

bool fq_close(const at::Tensor& a, const at::Tensor& b, double tol) {
  return at::allclose(a, b, tol, tol);
}

// A conv and one ReLU slot, traced as the graph tools trace models.
struct FqNetImpl : torch::nn::Module {
  FqNetImpl()
      : conv(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 2, 1)))),
        act(register_module("act", Activation(ActivationKind::kReLU))) {}
  at::Tensor forward(const at::Tensor& x) { return act(conv(x)); }
  torch::nn::Conv2d conv;
  Activation act;
};
TORCH_MODULE(FqNet);

// The single fake-quantize op of the traced net; every op must be one the op table names, and
// the net has `ops` ops in all (reading the tracked range must not add any).
graph::OpNode fq_traced_fake_quant(FqNet& net, size_t ops) {
  const SummaryGraph g =
      SummaryGraph::build(*net, {1, 1, 4, 4}, [&](const at::Tensor& x) { return net->forward(x); });
  std::vector<graph::OpNode> found;
  for (const auto& op : g.ops()) {
    EXPECT_NE(op.op_kind, graph::OpKind::kOther) << op.name << " " << op.kind;
    if (op.op_kind == graph::OpKind::kFakeQuantize) found.push_back(op);
  }
  EXPECT_EQ(g.ops().size(), ops);
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? graph::OpNode() : found[0];
}

// Bit-for-bit equality (zero signs included): the fused kernels must give exactly what the
// composition of ATen ops gives.
bool fq_same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a.sizes() != b.sizes() || a.scalar_type() != at::kFloat || b.scalar_type() != at::kFloat)
    return false;
  return at::equal(a.detach().contiguous().view(at::kInt), b.detach().contiguous().view(at::kInt));
}

bool fq_fused(const at::Tensor& y, const char* fn) {
  return y.grad_fn() != nullptr && y.grad_fn()->name().find(fn) != std::string::npos;
}

// A batch of normal values times `spread` with `specials` written over its first and its last
// elements, and a gradient with both signs and exact zeros. The default shape leaves 3 elements
// after the last multiple of 4, for the kernels' scalar tail.
std::pair<at::Tensor, at::Tensor> fq_batch(std::vector<float> specials, double spread,
                                           std::vector<int64_t> shape = {3, 7, 31, 33}) {
  at::Tensor x = torch::randn(shape) * spread;
  const auto k = static_cast<int64_t>(specials.size());
  const at::Tensor sp = torch::tensor(specials);
  x.view({-1}).narrow(0, 0, k).copy_(sp);
  x.view({-1}).narrow(0, x.numel() - k, k).copy_(sp);
  at::Tensor g = torch::randn(shape);
  g.view({-1}).narrow(0, 1, 40).zero_();
  g.view({-1}).narrow(0, x.numel() - 2, 1).zero_();
  return {x, g};
}

// The specials in tensors of 3 elements (the kernels' scalar path only), with gradients of
// both signs.
std::vector<std::pair<at::Tensor, at::Tensor>> fq_triples(const std::vector<float>& specials) {
  std::vector<std::pair<at::Tensor, at::Tensor>> out;
  for (size_t i = 0; i + 3 <= specials.size(); i += 3)
    out.emplace_back(torch::tensor({specials[i], specials[i + 1], specials[i + 2]}),
                     torch::tensor({-1.5f, 0.25f, -0.0f}));
  return out;
}

// Values on and around the grid points and midpoints k·S and (k + ½)·S, k = −1 … n + 1, and the
// given ends.
std::vector<float> fq_grid_values(float s, int64_t n, std::vector<float> ends) {
  std::vector<float> v = std::move(ends);
  for (int64_t k = -1; k <= n + 1; ++k) {
    for (float p : {static_cast<float>(k) * s, (static_cast<float>(k) + 0.5f) * s}) {
      v.push_back(p);
      v.push_back(std::nextafter(p, -1e30f));
      v.push_back(std::nextafter(p, 1e30f));
    }
  }
  return v;
}
}  // namespace

// clipped_linear.py:DorefaQuantizer (dorefa_quantize_param), k = 2: n = 3, Wq = 2·round(3u)/3 − 1.
TEST(FakeQuant, DorefaWeightTwoBitsHandWorked) {
  // max|t| = 0.8, u = t/1.6 + 0.5 = [0, 0.375, 0.625, 1], 3u = [0, 1.125, 1.875, 3] → [0,1,2,3].
  fq_expect_values(dorefa_weight(at::atanh(fq_vec({-0.8f, -0.2f, 0.2f, 0.8f})), 2),
                   {-1.0, -1.0 / 3, 1.0 / 3, 1.0});
  // u = [0, 0.375, 0.5625, 0.75], 3u = [0, 1.125, 1.6875, 2.25] → [0, 1, 2, 2].
  fq_expect_values(dorefa_weight(at::atanh(fq_vec({-0.8f, -0.2f, 0.1f, 0.4f})), 2),
                   {-1.0, -1.0 / 3, 1.0 / 3, 1.0 / 3});
  // W = 0: u = 0.5, 3u = 1.5 rounds half-to-even to 2 → 2·2/3 − 1 = 1/3 (0 is never on the grid).
  fq_expect_values(dorefa_weight(at::atanh(fq_vec({-0.8f, 0.0f, 0.8f})), 2), {-1.0, 1.0 / 3, 1.0});
  // 2^k distinct values on a random tensor; none is 0.
  torch::manual_seed(3);
  const at::Tensor wq = dorefa_weight(torch::randn({64, 9}), 2);
  EXPECT_EQ(std::get<0>(at::_unique(wq)).numel(), 4);
  EXPECT_EQ((wq == 0).sum().item<int64_t>(), 0);
  // The Q/DQ scale is 1/n, and every value is an odd multiple of it (|q| ≤ n).
  const at::Tensor s = dorefa_scale(wq, 2);
  EXPECT_FLOAT_EQ(s.item<float>(), 1.0f / 3);
  const at::Tensor q = wq / s;
  EXPECT_TRUE(at::equal(q, at::round(q)));
  // An all-zero tensor: zeros (Distiller divides by zero).
  EXPECT_TRUE(at::equal(dorefa_weight(torch::zeros({3}), 4), torch::zeros({3})));
}

// clipped_linear.py:DorefaParamsBinarizationSTE: Wq = mean|W|·sign(W) (0 → +1), identity gradient.
TEST(FakeQuant, DorefaWeightOneBit) {
  // E = (0.5 + 1.5 + 0 + 2)/4 = 1.
  const at::Tensor w = fq_vec({0.5f, -1.5f, 0.0f, 2.0f}).requires_grad_(true);
  const at::Tensor wq = dorefa_quantize(w, 1);
  fq_expect_values(wq, {1, -1, 1, 1});
  wq.backward(fq_vec({1, 2, 3, 4}));
  fq_expect_values(w.grad(), {1, 2, 3, 4});
  EXPECT_FLOAT_EQ(dorefa_scale(w, 1).item<float>(), 1.0f);
  // k = 3 on a smooth ramp: exactly 2^3 values.
  EXPECT_EQ(std::get<0>(at::_unique(dorefa_weight(torch::linspace(-3, 3, 1000), 3))).numel(), 8);
}

// clipped_linear.py:dorefa_quantize_param: the gradient flows through tanh and max|tanh W|, only
// the rounding is straight-through.
TEST(FakeQuant, DorefaWeightGradientMatchesAutograd) {
  torch::manual_seed(11);
  for (int64_t bits : {2, 3, 5}) {
    const at::Tensor w0 = torch::randn({8, 3, 3, 3});
    const at::Tensor g = torch::randn({8, 3, 3, 3});
    const at::Tensor w = w0.clone().requires_grad_(true);
    const at::Tensor r = w0.clone().requires_grad_(true);
    const at::Tensor wq = dorefa_weight(w, bits);
    const at::Tensor rq = fq_ref_dorefa(r, bits);
    EXPECT_TRUE(fq_close(wq, rq, 1e-6)) << bits << " bits";
    wq.backward(g);
    rq.backward(g);
    EXPECT_TRUE(fq_close(w.grad(), r.grad(), 1e-6)) << bits << " bits";
    // The same through the float master (weight_grad_through).
    const at::Tensor through =
        weight_grad_through([bits](const at::Tensor& m) { return dorefa_weight(m, bits); }, w0, g);
    EXPECT_TRUE(fq_close(through, r.grad(), 1e-6)) << bits << " bits";
  }
}

// clipped_linear.py:ClippedLinearQuantization(bits, clip_val=1): round(clamp(x, 0, 1)·n)/n.
TEST(FakeQuant, DorefaActivation) {
  DorefaActQuant act(2);
  const at::Tensor x = fq_vec({-0.5f, 0.2f, 0.5f, 0.9f, 1.7f}).requires_grad_(true);
  // 3·clamp(x) = [0, 0.6, 1.5, 2.7, 3] → [0, 1, 2 (tie to even), 3, 3].
  const at::Tensor y = act(x);
  fq_expect_values(y, {0, 1.0 / 3, 2.0 / 3, 1, 1});
  y.sum().backward();
  fq_expect_values(x.grad(), {0, 1, 1, 1, 0});
  // k = 1, n = 1: 0.5 ties to even 0; 1.5 clamps to 1.
  fq_expect_values(DorefaActQuant(1)(fq_vec({0.5f, 1.5f})), {0, 1});
  // Clamp's gradient includes both ends.
  const at::Tensor ends = fq_vec({0.0f, 1.0f}).requires_grad_(true);
  act(ends).sum().backward();
  fq_expect_values(ends.grad(), {1, 1});
  // Distiller's default of 32 bits: the clamp only.
  fq_expect_values(DorefaActQuant(32)(fq_vec({-1.0f, 0.123f, 2.0f})), {0, 0.123, 1});
}

// clipped_linear.py:LearnedClippedLinearQuantization: relu, min(·, α), round(y·n/α)·α/n with
// scale under no_grad; ∂α = Σ g where relu(x) ≥ α.
TEST(FakeQuant, PactActivationHandWorked) {
  PactActQuant act(PactActQuantOptions(2).init_alpha(3.0));
  act->train();
  const at::Tensor x = fq_vec({-1, 0.5f, 1.5f, 2.5f, 3, 4}).requires_grad_(true);
  // S = α/n = 1: [0, 0.5, 1.5, 2.5, 3, 3] → [0, 0 (tie), 2 (tie), 2 (tie), 3, 3].
  const at::Tensor y = act(x);
  fq_expect_values(y, {0, 0, 2, 2, 3, 3});
  y.backward(fq_vec({1, 2, 3, 4, 5, 6}));
  // dx = g where 0 < x < 3; dα = g at x = 3 and x = 4: 5 + 6.
  fq_expect_values(x.grad(), {0, 2, 3, 4, 0, 0});
  fq_expect_values(act->clip_val.grad(), {11});
  // No grad (trace, evaluation): the same values through a plain clamp.
  at::NoGradGuard no_grad;
  EXPECT_TRUE(at::equal(act(x.detach()), y.detach()));
}

TEST(FakeQuant, PactGradientMatchesAutograd) {
  torch::manual_seed(5);
  const at::Tensor x0 = torch::randn({4, 8, 6, 6}) * 3;
  const at::Tensor g = torch::randn({4, 8, 6, 6});
  PactActQuant act(PactActQuantOptions(3).init_alpha(2.5));
  act->train();
  const at::Tensor x = x0.clone().requires_grad_(true);
  const at::Tensor y = act(x);
  y.backward(g);
  // Reference: relu → where(y < α, y, α) → straight-through rounding with the scale a constant.
  const at::Tensor rx = x0.clone().requires_grad_(true);
  const at::Tensor alpha = torch::full({1}, 2.5).requires_grad_(true);
  at::Tensor r = at::relu(rx);
  r = at::where(r < alpha, r, alpha);
  const at::Tensor s = 7 / alpha.detach();
  r = fq_ref_round(r * s) / s;
  r.backward(g);
  EXPECT_TRUE(fq_close(y, r, 1e-6));
  EXPECT_TRUE(fq_close(x.grad(), rx.grad(), 1e-6));
  EXPECT_NEAR(act->clip_val.grad().item<double>(), alpha.grad().item<double>(),
              1e-6 * std::abs(alpha.grad().item<double>()));
}

// quantizer.py (PACTQuantizer._get_new_optimizer_params_groups): α is selected by its
// `clip_val` suffix, here `relu.replacement.clip_val`, and gets its own weight decay.
TEST(FakeQuant, PactAlphaNameAndOwnDecay) {
  torch::nn::Sequential net;
  net->push_back("conv", torch::nn::Linear(2, 2));
  Activation relu(ActivationKind::kReLU);
  relu->replace(torch::nn::AnyModule(PactActQuant(PactActQuantOptions(4).init_alpha(3.0))));
  net->push_back("relu", relu);
  std::vector<at::Tensor> base, alphas;
  for (const auto& p : net->named_parameters()) {
    const std::string& name = p.key();
    if (name.size() >= 8 && name.compare(name.size() - 8, 8, "clip_val") == 0) {
      EXPECT_EQ(name, "relu.replacement.clip_val");
      alphas.push_back(p.value());
    } else {
      base.push_back(p.value());
    }
  }
  ASSERT_EQ(alphas.size(), 1u);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(base, std::make_unique<torch::optim::SGDOptions>(
                                torch::optim::SGDOptions(0.1).weight_decay(5e-4)));
  groups.emplace_back(alphas, std::make_unique<torch::optim::SGDOptions>(
                                  torch::optim::SGDOptions(0.1).weight_decay(1e-4)));
  torch::optim::SGD sgd(groups, torch::optim::SGDOptions(0.1));
  alphas[0].mutable_grad() = torch::zeros({1});
  sgd.step();
  // α − lr·wd·α = 3 − 0.1·1e-4·3.
  EXPECT_NEAR(alphas[0].item<double>(), 2.99997, 1e-6);
}

// range_linear.py:QuantAwareTrainRangeLinearQuantizer (linear_quantize_param with
// symmetric_linear_quantization_params): S = max|W| per output channel / 127, pure STE.
TEST(FakeQuant, SymmetricWeightsPerChannel) {
  torch::nn::Linear fc(torch::nn::LinearOptions(4, 2).bias(false));
  {
    at::NoGradGuard no_grad;
    fc->weight.copy_(
        torch::tensor({{127.0f / 64, 0.5f, -0.3f, 1.0f / 128}, {0.0f, 0.0f, 0.0f, 0.0f}}));
  }
  const at::Tensor original = fc->weight.detach().clone();
  QuantizedParam qp = QuantizedParam::prepare(*fc, "weight", 8, ParamQuantMethod::kSymmetric, true);
  // Row 0: S = (127/64)/127 = 1/64; W/S = [127, 32, −19.2, 0.5] → [127, 32, −19, 0 (tie to even)].
  // Row 1: all zero → S = 1, zeros.
  fq_expect_values(fc->weight, {127.0 / 64, 0.5, -19.0 / 64, 0, 0, 0, 0, 0});
  const auto buffers = fc->named_buffers();
  fq_expect_values(buffers["weight_scale"], {1.0 / 64, 1});
  EXPECT_EQ(buffers["weight_bits"].item<int64_t>(), 8);
  EXPECT_EQ(buffers["weight_bits"].dim(), 0);
  EXPECT_TRUE(at::equal(buffers["float_weight"], original));
  // Per tensor: S = (127/64)/127 for both rows.
  EXPECT_FLOAT_EQ(symmetric_scale(original, 8, false).item<float>(), 1.0f / 64);
  // Identity gradient through the master; the optimizer steps the master.
  fc->weight.mutable_grad() = torch::ones({2, 4});
  qp.before_step();
  EXPECT_TRUE(at::equal(fc->weight.grad(), torch::ones({2, 4})));
  EXPECT_TRUE(at::equal(fc->weight.detach(), original));
  {
    at::NoGradGuard no_grad;
    fc->weight.sub_(1.0f / 64);  // the "step"
  }
  qp.after_step();
  EXPECT_TRUE(at::equal(qp.master, original - 1.0f / 64));
  // Row 1 = −1/64 everywhere: S = (1/64)/127, q = −127.
  fq_expect_values(fc->weight[1], {-1.0 / 64, -1.0 / 64, -1.0 / 64, -1.0 / 64});
  // Preparing again adopts the buffers; other bits are refused.
  QuantizedParam again =
      QuantizedParam::prepare(*fc, "weight", 8, ParamQuantMethod::kSymmetric, true);
  EXPECT_TRUE(again.master.is_same(qp.master));
  EXPECT_THROW(QuantizedParam::prepare(*fc, "weight", 4, ParamQuantMethod::kSymmetric, true),
               InputError);
}

// range_linear.py:linear_quantize_param in an ASYMMETRIC mode: scale = n/(max(max W, 0) −
// min(min W, 0)), round(W·scale − zp) + zp dequantized, so the integral zero point cancels.
TEST(FakeQuant, AsymmetricWeights) {
  // Row [−0.5, 0.3, 1.0, 0.7]: range 1.5, S = 1.5/255; W/S = [−85, 51, 170, 119] exactly enough.
  // Row [0.25, 0.4, 0.1, 0.3]: range [0, 0.4], S = 0.4/255;
  // W/S = [159.375, 255, 63.75, 191.25] → [159, 255, 64, 191].
  const at::Tensor w = torch::tensor({{-0.5f, 0.3f, 1.0f, 0.7f}, {0.25f, 0.4f, 0.1f, 0.3f}});
  const at::Tensor s = asymmetric_scale(w, 8, true);
  fq_expect_values(s, {1.5 / 255, 0.4 / 255});
  const at::Tensor wq = symmetric_fake_quant(w, s, 8);
  fq_expect_values(wq[1], {159 * 0.4 / 255, 0.4, 64 * 0.4 / 255, 191 * 0.4 / 255});
  fq_expect_values(wq[0], {-0.5, 0.3, 1.0, 0.7});
  fq_expect_values(asymmetric_scale(w, 8, false), {1.5 / 255});
  fq_expect_values(asymmetric_scale(torch::zeros({2, 2}), 4, true), {1, 1});
}

// quantizer.py (train_with_fp_copy + quantize_params): forward uses Wq, the gradient reaches the
// float copy through the DoReFa transform.
TEST(FakeQuant, DorefaWeightsThroughFloatCopy) {
  torch::manual_seed(7);
  torch::nn::Linear fc(6, 3);
  const at::Tensor w0 = fc->weight.detach().clone();
  QuantizedParam qp = QuantizedParam::prepare(*fc, "weight", 3, ParamQuantMethod::kDorefa, false);
  EXPECT_TRUE(fq_close(fc->weight.detach(), fq_ref_dorefa(w0, 3), 1e-6));
  fq_expect_values(fc->named_buffers()["weight_scale"], {1.0 / 7});
  const at::Tensor x = torch::randn({5, 6});
  fc(x).pow(2).sum().backward();
  const at::Tensor r = w0.clone().requires_grad_(true);
  at::linear(x, fq_ref_dorefa(r, 3), fc->bias.detach()).pow(2).sum().backward();
  qp.before_step();
  EXPECT_TRUE(fq_close(fc->weight.grad(), r.grad(), 1e-5));
  EXPECT_TRUE(at::equal(fc->weight.detach(), w0));
}

// range_linear.py:FakeLinearQuantization with update_ema: bias-corrected EMAs of the batch
// min/max, updated in training mode only.
TEST(FakeQuant, QatActivationEma) {
  FakeQuantRelu act(FakeQuantReluOptions(8).ema_decay(0.9));
  act->train();
  act(fq_vec({-1, 0, 1, 2}));
  // biased = 0.1·2 = 0.2, unbiased = 0.2/(1 − 0.9) = 2.
  EXPECT_NEAR(act->tracked_max.item<double>(), 2.0, 1e-6);
  EXPECT_NEAR(act->tracked_min.item<double>(), 0.0, 1e-12);
  act(fq_vec({0, 4}));
  // biased = 0.2·0.9 + 0.1·4 = 0.58, unbiased = 0.58/(1 − 0.81) = 3.0526316.
  EXPECT_NEAR(act->tracked_max_biased.item<double>(), 0.58, 1e-6);
  EXPECT_NEAR(act->tracked_max.item<double>(), 3.0526316, 1e-6);
  EXPECT_NEAR(act->quant_scale(), 3.0526316 / 127, 1e-8);
  EXPECT_NEAR(act->scale.item<double>(), 127 / 3.0526316, 1e-4);
  EXPECT_EQ(act->iter_count.item<double>(), 2.0);
  // Evaluation: the stored range; no buffer changes.
  act->eval();
  std::vector<at::Tensor> before;
  for (const auto& b : act->buffers()) before.push_back(b.clone());
  const double s = 3.0526316 / 127;
  // relu, clamp to 3.0526316, round(x/S)·S: 1 → round(41.6033) = 42; 10 → 127.
  fq_expect_values(act(fq_vec({-2, 1, 10})), {0, 42 * s, 127 * s});
  const auto after = act->buffers();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(at::equal(after[i], before[i])) << i;
}

TEST(FakeQuant, QatActivationGradientIsStraightThroughInRange) {
  FakeQuantRelu act(FakeQuantReluOptions(4).ema_decay(0.5));
  act->train();
  act(fq_vec({0, 2}));
  act->eval();
  // m = 2, S = 2/7: the gradient is relu's mask inside the range, 0 beyond m.
  const at::Tensor x = fq_vec({-1, 0.3f, 1.9f, 3}).requires_grad_(true);
  act(x).sum().backward();
  fq_expect_values(x.grad(), {0, 1, 1, 0});
}

// q_utils.py:asymmetric_linear_quantization_params with FakeLinearQuantization's ASYMMETRIC modes:
// scale = n/(max(tmax, 0) − min(tmin, 0)), zero point round(scale·min(tmin, 0)) (+2^(b−1) signed).
TEST(FakeQuant, QatAsymmetricModes) {
  for (LinearQuantMode mode :
       {LinearQuantMode::kAsymmetricUnsigned, LinearQuantMode::kAsymmetricSigned}) {
    FakeQuantRelu act(FakeQuantReluOptions(8).ema_decay(0.9).mode(mode));
    act->train();
    act(fq_vec({-3, 0, 2}));
    // relu output in [0, 2]: scale = 255/2 = 127.5, zero point 0 (signed: 128).
    EXPECT_NEAR(act->scale.item<double>(), 127.5, 1e-4);
    EXPECT_EQ(act->zero_point.item<double>(),
              mode == LinearQuantMode::kAsymmetricSigned ? 128.0 : 0.0);
    act->eval();
    // 0.5·127.5 = 63.75 → 64; 5 clamps to 2 → 255.
    fq_expect_values(act(fq_vec({0.5f, 5})), {64 * 2.0 / 255, 2});
  }
  // The model input (Distiller's inputs_quant): range [−1, 3], S = 4/255, the zero point
  // −round(−1/S) = round(63.75) = 64; −1 → q = round(−63.75) + 64 = 0 → −64·S; 3 → 255 → 191·S.
  FakeLinearQuant in(
      FakeLinearQuantOptions(8).ema_decay(0.9).mode(LinearQuantMode::kAsymmetricUnsigned));
  in->train();
  in(fq_vec({-1, 0.5f, 3}));
  EXPECT_EQ(in->quant_zero_point(), 64);
  EXPECT_NEAR(in->zero_point.item<double>(), -64, 1e-6);
  in->eval();
  const double s = 4.0 / 255;
  fq_expect_values(in(fq_vec({-1, 3, -2})), {-64 * s, 191 * s, -64 * s});
}

// The slot modules trace as aten::clamp + aten::fake_quantize_per_tensor_affine with the scale
// and integer range the op table decodes (what an ONNX/TensorRT export writes as Clip + Q/DQ).
TEST(FakeQuant, SlotModulesTraceAsKnownOps) {
  FqNet net;
  net->act->replace(torch::nn::AnyModule(DorefaActQuant(4)));
  graph::OpNode op = fq_traced_fake_quant(net, 3);  // conv, clamp, fake_quantize
  EXPECT_NEAR(op.scale, 1.0 / 15, 1e-9);
  EXPECT_EQ(op.quant_min, 0);
  EXPECT_EQ(op.quant_max, 15);

  net->act->replace(torch::nn::AnyModule(PactActQuant(PactActQuantOptions(2).init_alpha(3.0))));
  op = fq_traced_fake_quant(net, 3);
  EXPECT_NEAR(op.scale, 1.0, 1e-9);  // α/n = 3/3
  EXPECT_EQ(op.quant_max, 3);

  FakeQuantRelu qat(FakeQuantReluOptions(8).ema_decay(0.9));
  qat->train();
  qat(fq_vec({0, 2}));  // m = 2
  net->act->replace(torch::nn::AnyModule(qat));
  op = fq_traced_fake_quant(net, 4);  // conv, relu, clamp, fake_quantize
  EXPECT_NEAR(op.scale, 2.0 / 127, 1e-7);
  EXPECT_EQ(op.quant_min, -127);
  EXPECT_EQ(op.quant_max, 127);
  EXPECT_EQ(qat->iter_count.item<double>(), 1.0);  // tracing (eval mode) updated nothing
}

// The fused training kernel of DorefaActQuant against the composition it replaces
// (clipped_linear.py:ClippedLinearQuantization: clamp(x, 0, 1), then the grid 1/n): values and dx
// bit for bit, ties (k + ½)/n, x = 0, −0, 1 included; dx = g on [0, 1], +0 outside.
TEST(FakeQuant, FusedDorefaActivationMatchesComposition) {
  torch::manual_seed(21);
  for (int64_t bits : {1, 2, 4, 8}) {
    const int64_t n = (int64_t{1} << bits) - 1;
    const float s = static_cast<float>(1.0 / static_cast<double>(n));
    const std::vector<float> specials =
        fq_grid_values(s, n, {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, 0.5f});
    auto cases = fq_triples(specials);
    cases.push_back(fq_batch(specials, 0.7));
    for (const auto& [x0, g] : cases) {
      const at::Tensor x = x0.clone().requires_grad_(true);
      const at::Tensor y = DorefaActQuant(bits)(x);
      EXPECT_TRUE(fq_fused(y, "ClampFakeQuantFn")) << y.grad_fn()->name();
      y.backward(g);
      const at::Tensor r = x0.clone().requires_grad_(true);
      const at::Tensor ry = at::fake_quantize_per_tensor_affine(
          at::clamp(r, 0.0, 1.0), 1.0 / static_cast<double>(n), 0, 0, n);
      ry.backward(g);
      EXPECT_TRUE(fq_same_bits(y, ry)) << bits << " bits, " << x0.numel() << " elements";
      EXPECT_TRUE(fq_same_bits(x.grad(), r.grad())) << bits << " bits, " << x0.numel();
    }
  }
  // bits = 1: 0.5 is a tie and goes to 0, 1 stays 1; dx = g at both ends of [0, 1].
  const at::Tensor x = fq_vec({0.5f, 1.0f, 0.0f, -0.25f}).requires_grad_(true);
  const at::Tensor y = DorefaActQuant(1)(x);
  fq_expect_values(y, {0, 1, 0, 0});
  y.backward(fq_vec({-2, 3, 4, 5}));
  fq_expect_values(x.grad(), {-2, 3, 4, 0});
}

// The fused PACT kernel against PactClip + fake_quantize (clipped_linear.py:
// LearnedClippedLinearQuantization): y, dx and dα bit for bit, with x = α, x = 0 and ties on the
// grid; dα sums the same per-element terms in the same order (also for a non-contiguous g).
TEST(FakeQuant, FusedPactMatchesComposition) {
  torch::manual_seed(22);
  for (int64_t bits : {2, 4, 7}) {
    for (double alpha : {3.0, 2.5}) {
      const int64_t n = (int64_t{1} << bits) - 1;
      const float s = static_cast<float>(alpha / static_cast<double>(n));
      const auto a = static_cast<float>(alpha);
      const std::vector<float> specials = fq_grid_values(s, n, {a, a, 0.0f, -0.0f, 2 * a});
      auto cases = fq_triples(specials);
      const auto [xb, gb] = fq_batch(specials, alpha);
      cases.emplace_back(xb, gb);
      cases.emplace_back(xb, gb.transpose(2, 3).contiguous().transpose(2, 3));  // strided g
      for (const auto& [x0, gg] : cases) {
        PactActQuant act(PactActQuantOptions(bits).init_alpha(alpha));
        const at::Tensor x = x0.clone().requires_grad_(true);
        const at::Tensor y = act(x);
        EXPECT_TRUE(fq_fused(y, "PactFakeQuantFn")) << y.grad_fn()->name();
        y.backward(gg);
        const at::Tensor r = x0.clone().requires_grad_(true);
        const at::Tensor ralpha = torch::full({1}, alpha).requires_grad_(true);
        const at::Tensor ry =
            at::fake_quantize_per_tensor_affine(pact_clip(r, ralpha), alpha / n, 0, 0, n);
        ry.backward(gg);
        EXPECT_TRUE(fq_same_bits(y, ry)) << bits << " bits, alpha " << alpha;
        EXPECT_TRUE(fq_same_bits(x.grad(), r.grad())) << bits << " bits, alpha " << alpha;
        EXPECT_TRUE(fq_same_bits(act->clip_val.grad(), ralpha.grad()))
            << bits << " bits, alpha " << alpha << ": " << act->clip_val.grad().item<float>()
            << " vs " << ralpha.grad().item<float>();
      }
    }
  }
  // Hand-worked (α = 3, 2 bits, S = 1): 1.5 ties to 2, x = α goes to dα only.
  PactActQuant act(PactActQuantOptions(2).init_alpha(3.0));
  const at::Tensor x = fq_vec({1.5f, 3, 0, 4, 2.5f}).requires_grad_(true);
  const at::Tensor y = act(x);
  fq_expect_values(y, {2, 3, 0, 3, 2});
  y.backward(fq_vec({1, 2, 3, 4, 5}));
  fq_expect_values(x.grad(), {1, 0, 0, 0, 5});
  fq_expect_values(act->clip_val.grad(), {6});  // 2 + 4
}

// The old FakeQuantRelu / FakeLinearQuant training forward, written out: relu, the batch range
// into the EMAs (through the module's own update on a twin fed without grad), then clamp and
// ATen's fake quantization on the twin's grid.
at::Tensor fq_reference_qat(FakeLinearQuantImpl& twin, const at::Tensor& x, bool relu,
                            LinearQuantMode mode, int64_t bits) {
  const at::Tensor in = relu ? at::relu(x) : x;
  {
    at::NoGradGuard no_grad;
    twin.forward(in.detach());  // the composition path: x does not require grad
  }
  const double lo = twin.tracked_min.item<double>(), hi = twin.tracked_max.item<double>();
  if (mode == LinearQuantMode::kSymmetric) {
    const double m = std::max(std::abs(lo), std::abs(hi));
    const int64_t n = (int64_t{1} << (bits - 1)) - 1;
    return at::fake_quantize_per_tensor_affine(at::clamp(in, -m, m), twin.quant_scale(), 0, -n, n);
  }
  return at::fake_quantize_per_tensor_affine(at::clamp(in, lo, hi), twin.quant_scale(),
                                             twin.quant_zero_point(), 0, (int64_t{1} << bits) - 1);
}

// range_linear.py:FakeQuantizationWrapper / FakeLinearQuantization: the fused training path gives
// the composition's values and gradients bit for bit and leaves every buffer (EMAs, iter_count,
// scale, zero point) identical after several steps, in each mode, with and without the relu.
TEST(FakeQuant, FusedQatActivationMatchesCompositionAndEma) {
  torch::manual_seed(23);
  for (LinearQuantMode mode : {LinearQuantMode::kSymmetric, LinearQuantMode::kAsymmetricUnsigned,
                               LinearQuantMode::kAsymmetricSigned}) {
    for (bool relu : {true, false}) {
      for (double decay : {0.0, 0.9}) {
        const int64_t bits = 8;
        const auto opts = FakeLinearQuantOptions(bits).ema_decay(decay).mode(mode);
        FakeLinearQuant fused = relu ? FakeLinearQuant(nullptr) : FakeLinearQuant(opts);
        FakeQuantRelu fused_relu = relu ? FakeQuantRelu(opts) : FakeQuantRelu(nullptr);
        FakeLinearQuant twin(opts);
        FakeLinearQuantImpl& module = relu ? static_cast<FakeLinearQuantImpl&>(*fused_relu)
                                           : static_cast<FakeLinearQuantImpl&>(*fused);
        module.train();
        twin->train();
        for (int step = 0; step < 4; ++step) {
          // Decay 0 tracks the batch range exactly: with max 15.875 the symmetric grid is
          // S = 15.875/127 = 1/8, so the specials are exact ties and x = m.
          const float m = 15.875f;
          std::vector<float> specials = fq_grid_values(0.125f, 127, {m, -m, 0.0f, -0.0f});
          auto [x0, g] = fq_batch(specials, 4.0 + step);
          x0.clamp_(-m, m);
          const at::Tensor x = x0.clone().requires_grad_(true);
          const at::Tensor y = relu ? fused_relu(x) : fused(x);
          EXPECT_TRUE(fq_fused(y, "ClampFakeQuantFn")) << y.grad_fn()->name();
          y.backward(g);
          const at::Tensor r = x0.clone().requires_grad_(true);
          const at::Tensor ry = fq_reference_qat(*twin, r, relu, mode, bits);
          ry.backward(g);
          const std::string what = "mode " + std::to_string(static_cast<int>(mode)) + " relu " +
                                   std::to_string(relu) + " decay " + std::to_string(decay) +
                                   " step " + std::to_string(step);
          EXPECT_TRUE(fq_same_bits(y, ry)) << what;
          EXPECT_TRUE(fq_same_bits(x.grad(), r.grad())) << what;
          const auto a = module.named_buffers(), b = twin->named_buffers();
          ASSERT_EQ(a.size(), b.size());
          for (const auto& buf : a) {
            EXPECT_TRUE(at::equal(buf.value(), b[buf.key()])) << what << " " << buf.key();
            EXPECT_TRUE(buf.value().dim() == 0 || fq_same_bits(buf.value(), b[buf.key()]))
                << what << " " << buf.key();
          }
        }
        if (decay == 0.0 && relu && mode == LinearQuantMode::kSymmetric)
          EXPECT_EQ(module.quant_scale(), 0.125);
        // A NaN in the batch reaches the EMAs on both paths (aminmax propagates it as min and
        // max do); the forward then falls back to the composition.
        at::Tensor x0 = torch::randn({2, 3, 4, 4});
        x0.view({-1})[5] = std::nanf("");
        const at::Tensor x = x0.clone().requires_grad_(true);
        const at::Tensor y = relu ? fused_relu(x) : fused(x);
        const at::Tensor ry = fq_reference_qat(*twin, x0, relu, mode, bits);
        EXPECT_TRUE(at::equal(at::isnan(y), at::isnan(ry)));
        for (const auto& buf : module.named_buffers())
          EXPECT_TRUE(
              at::equal(at::isnan(buf.value()), at::isnan(twin->named_buffers()[buf.key()])))
              << buf.key();
        EXPECT_TRUE(std::isnan(module.tracked_max.item<float>()));
      }
    }
  }
}

// Evaluation, no-grad and tracing keep the composition (the trace test above counts its ops); the
// fused path is taken only for a float32 CPU input that requires grad, in training.
TEST(FakeQuant, FusedPathOnlyInTrainingWithGrad) {
  const at::Tensor x = torch::linspace(-2, 2, 64).reshape({1, 1, 8, 8}).requires_grad_(true);
  FakeQuantRelu act(FakeQuantReluOptions(8).ema_decay(0.9));
  act->train();
  EXPECT_TRUE(fq_fused(act(x), "ClampFakeQuantFn"));
  EXPECT_FALSE(fq_fused(act(x.to(at::kDouble)), "ClampFakeQuantFn"));
  EXPECT_FALSE(fq_fused(act(x.transpose(2, 3)), "ClampFakeQuantFn"));
  act->eval();
  EXPECT_FALSE(fq_fused(act(x), "ClampFakeQuantFn"));
  EXPECT_FALSE(fq_fused(DorefaActQuant(32)(x), "ClampFakeQuantFn"));  // above 16 bits: clamp only
  EXPECT_TRUE(fq_fused(DorefaActQuant(4)(x), "ClampFakeQuantFn"));
  at::NoGradGuard no_grad;
  EXPECT_EQ(DorefaActQuant(4)(x).grad_fn(), nullptr);
}

TEST(FakeQuant, BitsOutOfRangeAreInputErrors) {
  EXPECT_THROW(DorefaActQuant(0), InputError);
  EXPECT_THROW(FakeQuantRelu(1), InputError);
  EXPECT_THROW(dorefa_weight(torch::ones({2}), 64), InputError);
}

}  // namespace igb::compress
