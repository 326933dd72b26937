// The inference form runs quantized layers in integers (InferenceOptions::int8): on a model
// trained with fake quantization its output is the fake-quantized model's, layer by layer within
// one step of each grid.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "compress/post_train_quantizer.h"
#include "compress/quantization_state.h"
#include "compress/scheduler.h"
#include "compress/training_hooks.h"
#include "core/fs.h"
#include "graph/summary_graph.h"
#include "models/model.h"
#include "models/trainer.h"
#include "runtime/inference_model.h"
#include "runtime/int8_pairs.h"
#include "runtime/op_forms.h"
#include "runtime/qnnpack_layer.h"
#include "tests/support.h"

namespace igb::runtime {

namespace {

namespace fs = std::filesystem;

/// `name` trained `steps` SGD steps on random inputs under the schedule `yaml` (from schedules/),
/// through the scheduler's hooks as the trainer calls them, so its quantization ranges, quantized
/// weights and BatchNorm statistics are a trained model's; in eval mode.
models::Model trained_on_text(const std::string& name, const std::string& text,
                              const std::string& yaml, int steps, int64_t size = 0) {
  models::register_builtin_models();
  torch::manual_seed(0);
  auto m = models::create_model(name, nlohmann::json::object());
  auto s = compress::CompressionScheduler::from_text(text, yaml, *m, 0.01, nullptr);
  models::TrainConfig config;
  config.optimizer = "sgd";
  config.lr = 0.01;
  config.momentum = 0.9;
  auto opt = models::make_optimizer(config, m->parameters(), s->param_groups());
  auto shape = m->input_shape();
  shape[0] = 8;
  if (size > 0) shape[2] = shape[3] = size;
  m->train();
  for (int i = 0; i < steps; ++i) {
    const auto x = torch::randn(shape);
    compress::MinibatchInfo info{0, i, steps};
    s->on_minibatch_begin(info, *opt);
    auto loss = m->forward(x).pow(2).mean();
    loss = s->before_backward_pass(info, loss, *opt);
    opt->zero_grad();
    loss.backward();
    s->before_parameter_optimization(info, *opt);
    opt->step();
    s->on_minibatch_end(info, *opt);
  }
  m->eval();
  return m;
}

models::Model trained(const std::string& name, const std::string& yaml, int steps,
                      int64_t size = 0) {
  return trained_on_text(name, read_text_file(fs::path(IGB_SOURCE_DIR) / "schedules" / yaml), yaml,
                         steps, size);
}

std::shared_ptr<InferenceModel> int8_form(const models::Model& m) {
  InferenceOptions o;
  o.int8 = true;
  o.int8_engine = Int8Engine::kOneDnn;
  return InferenceModel::make(
      m, [m](const at::Tensor& x) { return m->forward(x); }, "model", o);
}

int int8_steps(const std::vector<StepInfo>& steps) {
  return static_cast<int>(
      std::count_if(steps.begin(), steps.end(), [](const StepInfo& s) { return s.int8; }));
}

/// Runs `m` at `shape` as one int8 stage returning every fake-quantized value and compares each
/// with the same value of the fake-quantized model (its trace replayed): the share of elements
/// equal, and the largest difference in steps of the value's grid. Returns the number of values.
int compare_grids(const models::Model& m, const std::vector<int64_t>& shape, double* min_equal,
                  double* max_steps, InferenceModel::Forward forward = nullptr) {
  if (!forward) forward = [m](const at::Tensor& x) { return m->forward(x); };
  auto g = graph::SummaryGraph::build(*m, shape, forward);
  std::vector<int> ops, outputs;
  for (const auto& op : g.ops()) {
    ops.push_back(op.id);
    if (op.op_kind == graph::OpKind::kFakeQuantize) outputs.push_back(op.outputs[0]);
  }
  InferenceOptions o;
  o.int8 = true;
  o.int8_engine = Int8Engine::kOneDnn;
  InferenceStage stage(g, ops, {}, outputs, o);
  EXPECT_GT(int8_steps(stage.steps()), 0);
  torch::manual_seed(2);
  const auto x = torch::randn(shape);
  std::map<int, at::Tensor> expected;
  torch::NoGradGuard no_grad;
  graph::replay_trace(g, x, [&](int id, at::Tensor& t) { expected[id] = t.clone(); });
  std::map<int, at::Tensor> values = {{g.inputs()[0], x}};
  EXPECT_TRUE(stage.run(values));
  *min_equal = 1;
  *max_steps = 0;
  for (int id : outputs) {
    const double step = g.op(g.values()[id].producer).scale;
    const auto d = (values.at(id) - expected.at(id)).abs() / step;
    *min_equal = std::min(*min_equal, (d < 1e-3).to(at::kFloat).mean().item<double>());
    *max_steps = std::max(*max_steps, d.max().item<double>());
  }
  return static_cast<int>(outputs.size());
}

/// Runs each convolution of `m` at `shape` on `engine` as a stage of its own, from the conv to the
/// fake quantization after it, given the fake-quantized model's values (its input's grid, a
/// residual add's other operand), and compares its output with the model's: the share of
/// elements equal and the largest difference in steps, at worst over the layers. Returns the
/// number of layers, `on_engine` those whose step ran on QNNPACK.
int compare_layers(const models::Model& m, const std::vector<int64_t>& shape, Int8Engine engine,
                   double* min_equal, double* max_steps, int* on_qnnpack,
                   InferenceModel::Forward forward = nullptr) {
  if (!forward) forward = [m](const at::Tensor& x) { return m->forward(x); };
  auto g = graph::SummaryGraph::build(*m, shape, forward);
  torch::manual_seed(2);
  const auto x = torch::randn(shape);
  std::map<int, at::Tensor> expected;
  torch::NoGradGuard no_grad;
  graph::replay_trace(g, x, [&](int id, at::Tensor& t) { expected[id] = t.clone(); });
  InferenceOptions o;
  o.int8 = true;
  o.int8_engine = engine;
  *min_equal = 1;
  *max_steps = 0;
  *on_qnnpack = 0;
  int layers = 0;
  for (const auto& op : g.ops()) {
    if (op.op_kind != graph::OpKind::kConv) continue;
    std::vector<int> ops = {op.id}, inputs = {op.inputs[0]};
    int at = op.id;
    while (g.op(at).op_kind != graph::OpKind::kFakeQuantize) {
      const auto& users = g.values()[g.op(at).outputs[0]].consumers;
      if (users.size() != 1) break;
      at = users[0];
      ops.push_back(at);
      for (int in : g.op(at).inputs)
        if (in != g.op(ops[ops.size() - 2]).outputs[0]) inputs.push_back(in);
    }
    if (g.op(at).op_kind != graph::OpKind::kFakeQuantize) continue;
    const int out = g.op(at).outputs[0];
    InferenceStage stage(g, ops, inputs, {out}, o);
    for (const auto& s : stage.steps()) *on_qnnpack += s.qnnpack;
    std::map<int, at::Tensor> values;
    for (int in : inputs) values[in] = expected.at(in);
    EXPECT_TRUE(stage.run(values)) << op.name;
    const auto d = (values.at(out) - expected.at(out)).abs() / g.op(at).scale;
    *min_equal = std::min(*min_equal, (d < 1e-3).to(at::kFloat).mean().item<double>());
    *max_steps = std::max(*max_steps, d.max().item<double>());
    ++layers;
  }
  return layers;
}

}  // namespace

TEST(Int8, Resnet20QatRunsEveryConvolutionInIntegersAndEqualsTheFakeQuantizedModel) {
  auto m = trained("resnet20_cifar", "classify/resnet20_int8_qat.yaml", 3);
  auto form = int8_form(m);
  const std::vector<int64_t> shape = {4, 3, 32, 32};
  const auto steps = form->steps(shape);
  std::printf("[ int8     ] %s\n", form->summary(shape).c_str());
  // Every convolution reads a fake-quantized value (the model input's, a ReLU's); the fc layer
  // reads the average pool's float output.
  EXPECT_EQ(int8_steps(steps), 19);
  // The option-A shortcuts (a strided slice of the block's 8-bit output, zero channels around
  // it) are copied in 8 bits, into the next residual layer's output buffer: no LibTorch.
  int views = 0;
  for (const auto& s : steps) {
    views += s.native && (s.kind == "Slice" || s.kind == "Pad");
    EXPECT_NE(s.kind, "aten::slice");
    EXPECT_NE(s.kind, "aten::constant_pad_nd");
  }
  EXPECT_EQ(views, 6);
  torch::manual_seed(2);
  const auto x = torch::randn(shape);
  torch::NoGradGuard no_grad;
  const auto y = m->forward(x);
  const auto z = form->forward(x);
  const double diff = (z - y).abs().max().item<double>(), top = y.abs().max().item<double>();
  std::printf("[ int8     ] max |int8 - fake quant| %.3g of max |y| %.3g\n", diff, top);
  EXPECT_TRUE(z.argmax(1).equal(y.argmax(1)));
  EXPECT_LT(diff, 0.05 * top);
  // The float form of the same model runs nothing in integers.
  auto f32 = InferenceModel::make(m, [m](const at::Tensor& x) { return m->forward(x); });
  EXPECT_EQ(int8_steps(f32->steps(shape)), 0);
}

TEST(Int8, EveryFakeQuantizedValueOfResnet20IsTheTrainedModelsWithinOneStep) {
  // Layer by layer, each integer layer given the fake-quantized model's own inputs: its grid
  // values are the model's, but where the model's float sum and the exact integer one round to
  // different sides of a half step (a tie: one element in 32768 on AVX2 here). Run as one stage
  // the model would pass such a flip on through nineteen layers (3 training steps on noise leave
  // gains above 1), so the whole model is compared on its classes.
  auto m = trained("resnet20_cifar", "classify/resnet20_int8_qat.yaml", 3);
  double equal = 0, steps = 0;
  int on_qnnpack = 0;
  const std::vector<int64_t> shape = {2, 3, 32, 32};
  EXPECT_EQ(compare_layers(m, shape, Int8Engine::kOneDnn, &equal, &steps, &on_qnnpack), 19);
  std::printf(
      "[ int8     ] ResNet-20: every layer's grid values equal in %.5f of elements at worst, %.3g "
      "steps apart at most\n",
      equal, steps);
  EXPECT_GE(equal, 0.999);
  EXPECT_LE(steps, 1.001);
  EXPECT_EQ(on_qnnpack, 0);
  double whole_equal = 0, whole_steps = 0;
  EXPECT_EQ(compare_grids(m, shape, &whole_equal, &whole_steps), 20);
  std::printf("[ int8     ] ResNet-20 as one stage: equal in %.5f at worst, %.3g steps apart\n",
              whole_equal, whole_steps);
}

TEST(Int8, PairsOfProductsAreBoundedByTheWeightsAndTheSplitKeepsEverySum) {
  // Filter 0: the two largest positive weights 127 + 100, negative 5 + 3; filter 1: −120 − 60.
  const auto q = at::tensor({127, 100, -5, -3, 1, 0, 2, -1, -120, 10, -60, 0}, at::kChar)
                     .reshape({2, 6, 1, 1});
  EXPECT_EQ(largest_pair(q), 227);
  Int8Isa saturating{"AVX2", true}, vnni{"AVX-512 VNNI", false};
  // 127·227 = 28829 fits a 16-bit lane, 255·227 = 57885 does not.
  EXPECT_TRUE(int8_sums_exact(saturating, q, false, 127, false));
  EXPECT_FALSE(int8_sums_exact(saturating, q, false, 255, false));
  EXPECT_TRUE(int8_sums_exact(saturating, q, false, 255, true));   // depthwise widens
  EXPECT_FALSE(int8_sums_exact(saturating, q, true, 127, false));  // s8 halves the weights
  EXPECT_TRUE(int8_sums_exact(vnni, q, true, 255, false));
  // Two groups, one filter each over its group's six input channels: per group [q, −q] for a
  // signed input.
  const auto w = split_weights(q, 2, true);
  ASSERT_EQ(w.sizes(), (std::vector<int64_t>{2, 12, 1, 1}));
  EXPECT_TRUE(w[0].flatten().equal(
      at::tensor({127, 100, -5, -3, 1, 0, -127, -100, 5, 3, -1, 0}, at::kChar)));
  // Any input: the split's sums are the layer's (u = lo + hi, v = pos − neg).
  torch::manual_seed(5);
  const auto u = torch::randint(0, 256, {4, 6}), v = torch::randint(-128, 128, {4, 6});
  const auto lo = u.clamp_max(128), pos = v.clamp_min(0), neg = (-v).clamp_min(0);
  const auto q2 = q.reshape({2, 6}).to(at::kLong), uw = split_weights(q, 1, false).reshape({2, 12});
  EXPECT_TRUE(at::cat({lo, u - lo}, 1).matmul(uw.to(at::kLong).t()).equal(u.matmul(q2.t())));
  const auto sw = split_weights(q, 1, true).reshape({2, 12}).to(at::kLong);
  EXPECT_TRUE(at::cat({pos, neg}, 1).matmul(sw.t()).equal(v.matmul(q2.t())));
}

TEST(Int8, Resnet18sFloatDownsamplingRunsInIntegersIntoFloat) {
  // torchvision's ResNet-18: the downsampling conv+BatchNorm has no ReLU, so no fake
  // quantization: it runs in integers with a float32 output, and the block's second conv, whose
  // residual add reads it, too, its fake quantization a step of its own.
  auto m = trained("resnet18", "classify/resnet20_int8_qat.yaml", 1, 64);
  auto form = int8_form(m);
  const std::vector<int64_t> shape = {1, 3, 64, 64};
  const auto steps = form->steps(shape);
  EXPECT_EQ(int8_steps(steps), 20);  // every conv; the fc reads the average pool's float output
  double equal = 0, max_steps = 0;
  EXPECT_EQ(compare_grids(m, shape, &equal, &max_steps), 18);
  std::printf("[ int8     ] ResNet-18: grid values equal in %.5f at worst, %.3g steps apart\n",
              equal, max_steps);
  EXPECT_GE(equal, 0.999);
  EXPECT_LE(max_steps, 1.001);
}

TEST(Int8, QnnpackRunsTheSameLayersWithinOneStepAndAutoKeepsTheFasterEngine) {
  if (!qnnpack_available()) GTEST_SKIP() << "this LibTorch has no QNNPACK engine";
  auto m = trained("resnet20_cifar", "classify/resnet20_int8_qat.yaml", 3);
  const std::vector<int64_t> shape = {2, 3, 32, 32};
  InferenceOptions o;
  o.int8 = true;
  o.int8_engine = Int8Engine::kQnnpack;
  auto form = InferenceModel::make(
      m, [m](const at::Tensor& x) { return m->forward(x); }, "model", o);
  const auto steps = form->steps(shape);
  const auto qnnpack_steps =
      std::count_if(steps.begin(), steps.end(), [](const StepInfo& s) { return s.qnnpack; });
  std::printf("[ int8     ] %s\n", form->summary(shape).c_str());
  // Every convolution writes a fake quantization's grid: all run on QNNPACK.
  EXPECT_EQ(int8_steps(steps), 19);
  EXPECT_EQ(qnnpack_steps, 19);
  EXPECT_EQ(form->int8_engine(shape), "QNNPACK (as asked)");
  torch::manual_seed(2);
  const auto x = torch::randn(shape);
  {
    torch::NoGradGuard no_grad;
    const auto y = m->forward(x), z = form->forward(x);
    EXPECT_TRUE(z.argmax(1).equal(y.argmax(1)));
    EXPECT_LT((z - y).abs().max().item<double>(), 0.05 * y.abs().max().item<double>());
  }
  // Layer by layer, from the fake-quantized model's own inputs: within one step of its output
  // (a residual layer's output is rounded before the add as well as after it).
  double equal = 0, max_steps = 0;
  int on_qnnpack = 0;
  EXPECT_EQ(compare_layers(m, shape, Int8Engine::kQnnpack, &equal, &max_steps, &on_qnnpack), 19);
  std::printf("[ int8     ] QNNPACK layer by layer: equal in %.5f at worst, %.3g steps apart\n",
              equal, max_steps);
  EXPECT_EQ(on_qnnpack, 19);
  EXPECT_GE(equal, 0.8);
  EXPECT_LE(max_steps, 1.001);
  // oneDNN's, the same way: each layer's output rounded once, as the model's.
  EXPECT_EQ(compare_layers(m, shape, Int8Engine::kOneDnn, &equal, &max_steps, &on_qnnpack), 19);
  EXPECT_GE(equal, 0.999);
  EXPECT_LE(max_steps, 1.001);
  // auto: both timed, the faster kept, and said so.
  o.int8_engine = Int8Engine::kAuto;
  auto chosen = InferenceModel::make(
      m, [m](const at::Tensor& x) { return m->forward(x); }, "model", o);
  const auto why = chosen->int8_engine(shape);
  std::printf("[ int8     ] auto: %s\n", why.c_str());
  EXPECT_NE(why.find("timed faster (oneDNN "), std::string::npos) << why;
  EXPECT_NE(why.find(" ms, QNNPACK "), std::string::npos) << why;
  const auto kept = chosen->steps(shape);
  const bool qnnpack = why.rfind("QNNPACK", 0) == 0;
  EXPECT_EQ(std::count_if(kept.begin(), kept.end(), [](const StepInfo& s) { return s.qnnpack; }),
            qnnpack ? 19 : 0);
}

TEST(Int8, PostTrainingQuantizedResnet20RunsInIntegersOnItsCalibratedGrids) {
  // Distiller's symmetric post-training grids: zero point 128 on [0, 255] (the s8 grid), a
  // layer's output quantized and then its ReLU's on the same step; BatchNorm folded by the
  // quantizer, weights rounded in place per channel, biases on the sums' grid.
  models::register_builtin_models();
  torch::manual_seed(0);
  auto m = models::create_model("resnet20_cifar", nlohmann::json::object());
  m->eval();
  const auto options = compress::PostTrainOptions::load(
      (fs::path(IGB_SOURCE_DIR) / "schedules/classify/resnet20_ptq_int8.yaml").string());
  const std::vector<int64_t> shape = {2, 3, 32, 32};
  auto q = std::make_shared<compress::PostTrainLinearQuantizer>(
      options, *m, shape, [m](const at::Tensor& x) { return m->forward(x); });
  q->prepare(q->calibrate([&](const auto& f) {
    for (int i = 0; i < 2; ++i) f(torch::randn({8, 3, 32, 32}));
  }),
             "calibration", nullptr);
  InferenceModel::Forward forward = [q](const at::Tensor& x) { return q->forward(x); };
  InferenceOptions o;
  o.int8 = true;
  o.int8_engine = Int8Engine::kOneDnn;
  auto form = InferenceModel::make(m, forward, "ptq", o);
  EXPECT_EQ(int8_steps(form->steps(shape)), 19);
  // The whole model, every quantization fused into its layer: the fake-quantized output (the
  // quantizer's last layer's grid) within one of its steps.
  torch::manual_seed(4);
  const auto x = torch::randn(shape);
  {
    torch::NoGradGuard no_grad;
    const auto y = forward(x), z = form->forward(x);
    EXPECT_TRUE(z.argmax(1).equal(y.argmax(1)));
    EXPECT_LE((z - y).abs().max().item<double>(), 0.02 * y.abs().max().item<double>());
  }
  // Each fake-quantized value on its own (the stage returns them all, so none is fused away).
  double equal = 0, steps = 0;
  EXPECT_GT(compare_grids(m, shape, &equal, &steps, forward), 30);
  std::printf(
      "[ int8     ] post-training ResNet-20: grid values equal in %.5f at worst, %.3g "
      "steps apart\n",
      equal, steps);
  EXPECT_GE(equal, 0.999);
  EXPECT_LE(steps, 1.001);
}

}  // namespace igb::runtime

namespace igb::runtime {

TEST(Int8, AStageGivenAnotherStagesQuantizedValueRunsInIntegersFromIt) {
  // A serving worker's second stage receives the first stage's fake-quantized value as float32
  // on its grid: it is held in 8 bits exactly, so the stage's first convolution runs in integers.
  auto m = trained("resnet20_cifar", "classify/resnet20_int8_qat.yaml", 3);
  const std::vector<int64_t> shape = {1, 3, 32, 32};
  auto g =
      graph::SummaryGraph::build(*m, shape, [m](const at::Tensor& x) { return m->forward(x); });
  const int cut = g.op("layer2.0.relu2.fakequantize").outputs.at(0);
  std::vector<int> first, second;
  for (const auto& op : g.ops())
    (op.id <= g.values().at(cut).producer ? first : second).push_back(op.id);
  InferenceOptions o;
  o.int8 = true;
  o.int8_engine = Int8Engine::kOneDnn;
  InferenceStage a(g, first, {g.inputs().at(0)}, {cut}, o);
  InferenceStage b(g, second, {cut}, {g.outputs().at(0)}, o);
  int convs = 0, int8 = 0;
  for (const auto& s : b.steps()) {
    convs += s.kind.rfind("Conv", 0) == 0;
    int8 += s.int8;
  }
  EXPECT_EQ(convs, 10);  // layer2.1 .. layer3.2
  EXPECT_EQ(int8, convs);
  torch::manual_seed(5);
  const auto x = torch::randn(shape);
  std::map<int, at::Tensor> values{{g.inputs().at(0), x}};
  ASSERT_TRUE(a.run(values));
  values.erase(g.inputs().at(0));
  ASSERT_TRUE(b.run(values));
  auto whole = int8_form(m);
  const auto y = whole->forward(x);
  EXPECT_LE((values.at(g.outputs().at(0)) - y).abs().max().item<double>(),
            1e-5 * y.abs().max().item<double>());
}

}  // namespace igb::runtime

namespace igb::runtime {

TEST(Int8, PostTrainingQuantizedResnet18FusesItsBlockOutputsIntoTheResidualLayers) {
  // A block's output grid [0, 127] after the ReLU, read unclamped, is held in s8 where it is
  // quantized on its own (layer2.0's, after the float downsampling add); the next block's
  // residual layer adds it into its u8 output as it is, so that layer's quantization stays fused.
  models::register_builtin_models();
  torch::manual_seed(0);
  auto m = models::create_model("resnet18", nlohmann::json::object());
  m->eval();
  const std::vector<int64_t> shape = {1, 3, 64, 64};
  auto q = std::make_shared<compress::PostTrainLinearQuantizer>(
      compress::PostTrainOptions::load(
          (fs::path(IGB_SOURCE_DIR) / "schedules/classify/resnet20_ptq_int8.yaml").string()),
      *m, shape, [m](const at::Tensor& x) { return m->forward(x); });
  q->prepare(q->calibrate([&](const auto& f) {
    f(torch::randn({4, 3, 64, 64}));
  }),
             "calibration", nullptr);
  InferenceModel::Forward forward = [q](const at::Tensor& x) { return q->forward(x); };
  InferenceOptions o;
  o.int8 = true;
  o.int8_engine = Int8Engine::kOneDnn;
  auto form = InferenceModel::make(m, forward, "ptq", o);
  int int8 = 0, fused_adds = 0;
  for (const auto& s : form->steps(shape)) {
    int8 += s.int8;
    fused_adds += s.int8 && s.kind.find("Add+ReLU+FakeQuantize") != std::string::npos;
  }
  EXPECT_EQ(int8, 20);
  // layer1's two, layer2.1's, layer3.1's, layer4.1's; the downsampling blocks add a float skip.
  EXPECT_EQ(fused_adds, 5);
  torch::manual_seed(4);
  const auto x = torch::randn(shape);
  torch::NoGradGuard no_grad;
  const auto y = forward(x), z = form->forward(x);
  EXPECT_TRUE(z.argmax(1).equal(y.argmax(1)));
  // The output is on the quantizer's last grid: at most one of its steps apart.
  EXPECT_LE((z - y).abs().max().item<double>(), y.abs().max().item<double>() / 127.0 * 1.01);
}

}  // namespace igb::runtime

namespace igb::runtime {

namespace {

/// resnet20_cifar post-training quantized with activations ASYMMETRIC_UNSIGNED (a ReLU's output
/// on [0, 255]) and weights symmetric per channel, `weight_bits` wide, calibrated on random
/// batches; its fake-quantized forward pass in `forward`.
models::Model unsigned_ptq_resnet20(int64_t weight_bits, InferenceModel::Forward* forward) {
  models::register_builtin_models();
  torch::manual_seed(0);
  auto m = models::create_model("resnet20_cifar", nlohmann::json::object());
  m->eval();
  test::TempDir tmp;
  write_text_atomically(tmp / "ptq.yaml",
                        "version: 1\nquantizers:\n  q:\n    class: PostTrainLinearQuantizer\n"
                        "    bits_activations: 8\n    bits_parameters: 8\n    bits_accum: 32\n"
                        "    mode: {activations: ASYMMETRIC_UNSIGNED, weights: SYMMETRIC}\n"
                        "    per_channel_wts: True\n");
  auto options = compress::PostTrainOptions::load((tmp / "ptq.yaml").string());
  if (weight_bits != 8) options.quant.narrow_weights(8, weight_bits);
  auto q = std::make_shared<compress::PostTrainLinearQuantizer>(
      options, *m, std::vector<int64_t>{2, 3, 32, 32},
      [m](const at::Tensor& x) { return m->forward(x); });
  q->prepare(q->calibrate([&](const auto& f) {
    for (int i = 0; i < 2; ++i) f(torch::randn({8, 3, 32, 32}));
  }),
             "calibration", nullptr);
  *forward = [q](const at::Tensor& x) { return q->forward(x); };
  return m;
}

}  // namespace

// The grids quantizers write, found whatever bits the graph records: DoReFa's 7-bit weights (odd
// multiples of 1/127 over the whole tensor, one channel's largest below 1) and symmetric 7-bit
// weights under the 8 bits post-training quantization is assumed to have.
TEST(Int8, IntegerWeightsFindPerTensorDorefaAndNarrowerSymmetricGrids) {
  torch::manual_seed(3);
  auto k = at::randint(0, 128, {4, 2, 3, 3});
  k[0][0][0][0] = 127;
  k.select(0, 1).clamp_(10, 100);  // channel 1's largest |w| is 81/127
  const auto dorefa = (2 * k.to(at::kFloat) - 127) / 127;
  auto w = integer_weights(dorefa, 7);
  ASSERT_TRUE(w.has_value());
  EXPECT_TRUE(at::allclose(w->q.to(at::kFloat) * w->scale.view({4, 1, 1, 1}), dorefa, 0, 1e-6));
  EXPECT_EQ(w->q.to(at::kInt).remainder(2).ne(0).all().item<bool>(), true);  // odd integers

  auto j = at::randint(-63, 64, {3, 8});
  j[0][0] = 63, j[1][0] = -63, j[2][0] = 63;
  const auto scale = at::tensor({0.01f, 0.2f, 3.0f});
  const auto sym7 = j.to(at::kFloat) * scale.view({3, 1});
  w = integer_weights(sym7, 8);
  ASSERT_TRUE(w.has_value());
  EXPECT_TRUE(w->q.to(at::kInt).equal(j.to(at::kInt)));
  EXPECT_TRUE(at::allclose(w->scale, scale));
  EXPECT_FALSE(integer_weights(at::randn({3, 8}), 8).has_value());
}

// Unsigned activations on [0, 255] against 8-bit weights: without VNNI pairs of products could
// pass 16 bits, so every integer layer (each reads a ReLU's output) runs on its input split, and
// each stays within one step of the fake-quantized model. With --int8-weights 7 the pairs fit and
// none splits. (The stem stays float: the input's asymmetric grid has a zero point neither 0 nor
// 128.)
TEST(Int8, UnsignedActivationsSplitWithEightBitWeightsAndNotWithSeven) {
  const std::vector<int64_t> shape = {2, 3, 32, 32};
  for (const int64_t bits : {8, 7}) {
    SCOPED_TRACE(std::to_string(bits) + "-bit weights");
    InferenceModel::Forward forward;
    auto m = unsigned_ptq_resnet20(bits, &forward);
    InferenceOptions o;
    o.int8 = true;
    o.int8_engine = Int8Engine::kOneDnn;
    auto form = InferenceModel::make(m, forward, "ptq", o);
    const auto steps = form->steps(shape);
    EXPECT_EQ(int8_steps(steps), 18);  // conv1's input grid has a zero point neither 0 nor 128
    const int split = static_cast<int>(
        std::count_if(steps.begin(), steps.end(), [](const StepInfo& s) { return s.int8_split; }));
    if (!int8_isa().pairs_saturate)
      EXPECT_EQ(split, 0);
    else
      EXPECT_EQ(split, bits == 8 ? 18 : 0);
    // Layer by layer, each given the fake-quantized model's input (over 18 layers of a model
    // with random weights a tie rounded the other way grows into whole steps).
    double equal = 0, max_steps = 0;
    int on_qnnpack = 0;
    EXPECT_EQ(
        compare_layers(m, shape, Int8Engine::kOneDnn, &equal, &max_steps, &on_qnnpack, forward),
        19);
    std::printf(
        "[ int8     ] unsigned PTQ, %lld-bit weights (%s): %d split, equal %.5f, %.3g steps\n",
        static_cast<long long>(bits), int8_isa().name.c_str(), split, equal, max_steps);
    EXPECT_GE(equal, 0.999);
    EXPECT_LE(max_steps, 1.001);
  }
}

}  // namespace igb::runtime

namespace igb::runtime {

// MobileNet-v2 post-training quantized: a ReLU6's output is never negative, so without VNNI it
// is read as u8 (integers up to 127, whose pairs fit 16 bits) and no layer after one is split;
// only the stem, reading the signed image, runs on a split input. A depthwise layer that would
// need a split stays float instead (split, it would be a grouped layer on oneDNN's reference
// path).
TEST(Int8, MobilenetV2ReadsItsRelu6OutputsAsUnsignedAndSplitsOnlyTheStem) {
  models::register_builtin_models();
  torch::manual_seed(0);
  auto m = models::create_model("mobilenet_v2", nlohmann::json::object());
  m->eval();
  const std::vector<int64_t> shape = {1, 3, 64, 64};
  auto q = std::make_shared<compress::PostTrainLinearQuantizer>(
      compress::PostTrainOptions::load(
          (fs::path(IGB_SOURCE_DIR) / "schedules/classify/resnet20_ptq_int8.yaml").string()),
      *m, shape, [m](const at::Tensor& x) { return m->forward(x); });
  q->prepare(q->calibrate([&](const auto& f) {
    f(torch::randn({2, 3, 64, 64}));
  }),
             "calibration", nullptr);
  InferenceOptions o;
  o.int8 = true;
  o.int8_engine = Int8Engine::kOneDnn;
  auto form = InferenceModel::make(
      m, [q](const at::Tensor& x) { return q->forward(x); }, "ptq", o);
  const auto steps = form->steps(shape);
  std::vector<std::string> split;
  for (const auto& s : steps)
    if (s.int8_split) split.push_back(s.ops.front());
  std::printf("[ int8     ] MobileNet-v2 (%s): %d layers in INT8, %zu split\n",
              int8_isa().name.c_str(), int8_steps(steps), split.size());
  // The same 35 of its 53 layers in integers on every ISA.
  EXPECT_EQ(int8_steps(steps), 35);
  if (int8_isa().pairs_saturate)
    EXPECT_EQ(split, std::vector<std::string>{"features.0.0"});
  else
    EXPECT_TRUE(split.empty());
}

}  // namespace igb::runtime
