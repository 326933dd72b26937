// The inference form computes the model's forward (every zoo classifier, super-resolution and
// deblurring model, thinned models, every batch and input size), and folds and fuses what it
// should.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "compress/thinning.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/thinning_recipe.h"
#include "graph/summary_graph.h"
#include "models/model.h"
#include "runtime/algorithm_cache.h"
#include "runtime/inference_model.h"
#include "runtime/width_search.h"
#include "tests/support.h"

namespace igb::runtime {

namespace {

std::vector<std::string> zoo(const std::string& family) {
  models::register_builtin_models();
  return models::model_names(family);
}

/// `name` with drawn BatchNorm statistics and affine terms, so a folded BatchNorm is not the
/// identity, in eval mode.
models::Model make(const std::string& name) {
  models::register_builtin_models();
  torch::manual_seed(0);
  auto m = models::create_model(name, nlohmann::json::object());
  torch::NoGradGuard no_grad;
  for (auto& item : m->named_buffers())
    if (item.key().find("running_mean") != std::string::npos)
      item.value().uniform_(-0.5, 0.5);
    else if (item.key().find("running_var") != std::string::npos)
      item.value().uniform_(0.5, 1.5);
  for (auto& item : m->named_modules())
    if (auto* bn = item.value()->as<torch::nn::BatchNorm2d>()) {
      bn->weight.uniform_(0.5, 1.5);
      bn->bias.uniform_(-0.2, 0.2);
    }
  m->eval();
  return m;
}

std::shared_ptr<InferenceModel> form_of(const models::Model& m, const InferenceOptions& o = {}) {
  return InferenceModel::make(
      m, [m](const at::Tensor& x) { return m->forward(x); }, "model", o);
}

/// The model's input at `batch`; ImageNet-size inputs at 96x96 (the same layers, a fraction of
/// the time).
std::vector<int64_t> shape_of(const models::Model& m, int64_t batch) {
  auto s = m->input_shape();
  s[0] = batch;
  if (s.size() == 4 && s[2] > 96) s[2] = s[3] = 96;
  return s;
}

/// max |form − forward| / max |forward| on a random input of `shape`.
double relative_difference(const models::Model& m, InferenceModel& form,
                           const std::vector<int64_t>& shape) {
  torch::manual_seed(1);
  const auto x = torch::randn(shape);
  torch::NoGradGuard no_grad;
  const auto y = m->forward(x);
  const auto z = form.forward(x);
  EXPECT_EQ(z.sizes(), y.sizes());
  if (z.sizes() != y.sizes()) return 1;
  return (z - y).abs().max().item<double>() / y.abs().max().item<double>();
}

int count_kind(const std::vector<StepInfo>& steps, const std::string& kind) {
  return static_cast<int>(
      std::count_if(steps.begin(), steps.end(), [&](const StepInfo& s) { return s.kind == kind; }));
}

}  // namespace

class ZooModel : public testing::TestWithParam<std::string> {};

TEST_P(ZooModel, InferenceFormEqualsTheForwardPassAtBatch1And3) {
  auto m = make(GetParam());
  auto form = form_of(m);
  EXPECT_LE(relative_difference(m, *form, shape_of(m, 1)), 1e-5);
  EXPECT_LE(relative_difference(m, *form, shape_of(m, 3)), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Classify, ZooModel, testing::ValuesIn(zoo("classify")));
INSTANTIATE_TEST_SUITE_P(Sr, ZooModel, testing::ValuesIn(zoo("sr")));

class DeblurModel : public testing::TestWithParam<std::string> {};

// The deblurring generator's instance norms amplify the rounding of Winograd kernels (1.2e-5 on
// DeblurGAN's nine residual blocks): 1e-5 with direct kernels only, 5e-5 with the measured pick.
TEST_P(DeblurModel, InferenceFormEqualsTheForwardPass) {
  auto m = make(GetParam());
  InferenceOptions direct;
  direct.pick_algorithms = false;
  EXPECT_LE(relative_difference(m, *form_of(m, direct), shape_of(m, 2)), 1e-5);
  EXPECT_LE(relative_difference(m, *form_of(m), shape_of(m, 2)), 5e-5);
}

INSTANTIATE_TEST_SUITE_P(Deblur, DeblurModel, testing::ValuesIn(zoo("deblur")));

TEST(InferenceModel, ResNet20FoldsEveryBatchNormAndFusesResidualAddsAndReLUs) {
  auto m = make("resnet20_cifar");
  auto form = form_of(m);
  const auto steps = form->steps(m->input_shape());
  // conv1 and each block's first conv: Conv+BN+ReLU; each block's second conv takes the
  // shortcut's add and the ReLU after it.
  EXPECT_EQ(count_kind(steps, "Conv+BatchNorm+ReLU"), 10);
  EXPECT_EQ(count_kind(steps, "Conv+BatchNorm+Add+ReLU"), 9);
  EXPECT_EQ(count_kind(steps, "Linear"), 1);
  for (const auto& s : steps) {
    EXPECT_NE(s.kind, "aten::batch_norm");
    EXPECT_NE(s.kind, "aten::_convolution");
  }
  int64_t macs = 0;
  for (const auto& s : steps) macs += s.macs;
  const auto graph = graph::SummaryGraph::build(*m, m->input_shape(),
                                                [m](const at::Tensor& x) { return m->forward(x); });
  EXPECT_EQ(macs, graph.total_macs());
}

TEST(InferenceModel, MobileNetV2AndFsrcnnFuseTheirActivations) {
  auto mobilenet = make("mobilenet_v2");
  const auto steps = form_of(mobilenet)->steps(shape_of(mobilenet, 1));
  // 17 inverted residual blocks: expansion and depthwise convs with ReLU6, the projection with
  // the residual add where the block keeps its shape (10 of them).
  EXPECT_EQ(count_kind(steps, "Conv+BatchNorm+Add"), 10);
  EXPECT_EQ(count_kind(steps, "Conv+BatchNorm+ReLU6"), 2 * 17 - 1 + 1 + 1);
  auto fsrcnn = make("fsrcnn");
  const auto sr_steps = form_of(fsrcnn)->steps(fsrcnn->input_shape());
  // PReLU as its own oneDNN primitive (no JIT convolution takes it as a post-op); the 9x9
  // stride-3 transposed convolution in the sub-pixel form: a convolution, then the shuffle.
  EXPECT_EQ(count_kind(sr_steps, "Conv"), 7);
  EXPECT_EQ(count_kind(sr_steps, "PReLU"), 7);
  EXPECT_EQ(count_kind(sr_steps, "ConvTranspose"), 1);
  EXPECT_EQ(count_kind(sr_steps, "PixelShuffle"), 1);
  for (const auto& s : sr_steps)
    if (s.kind != "PixelShuffle") EXPECT_TRUE(s.native) << s.kind;
}

TEST(InferenceModel, OnePlanPerShapeReusedAndEachOutputFresh) {
  auto m = make("resnet20_cifar");
  auto form = form_of(m);
  torch::manual_seed(2);
  const auto a = torch::randn({2, 3, 32, 32});
  const auto b = torch::randn({1, 3, 40, 24});
  auto first = form->forward(a);
  const auto copy = first.clone();
  first.fill_(7);  // the caller owns the output: the next call must not see this
  const auto other = form->forward(b);
  const auto again = form->forward(a);
  EXPECT_TRUE(torch::equal(again, copy));
  torch::NoGradGuard no_grad;
  EXPECT_LE((other - m->forward(b)).abs().max().item<double>(), 1e-5);
}

TEST(InferenceModel, UnfusedAndLibTorchOnlyFormsComputeTheSame) {
  auto m = make("resnet20_cifar");
  InferenceOptions unfused;
  unfused.fuse = false;
  auto form = form_of(m, unfused);
  EXPECT_LE(relative_difference(m, *form, m->input_shape()), 1e-5);
  for (const auto& s : form->steps(m->input_shape()))
    EXPECT_EQ(s.kind.find('+'), std::string::npos) << s.kind;
  InferenceOptions torch_only;
  torch_only.native = false;
  auto plain = form_of(m, torch_only);
  EXPECT_LE(relative_difference(m, *plain, m->input_shape()), 1e-6);
  for (const auto& s : plain->steps(m->input_shape())) EXPECT_FALSE(s.native) << s.kind;
}

TEST(InferenceModel, ThinnedResNet56) {
  auto m = make("resnet56_cifar");
  const auto graph = graph::SummaryGraph::build(*m, m->input_shape(),
                                                [m](const at::Tensor& x) { return m->forward(x); });
  // Zero 3 of 16, 5 of 32 and 7 of 64 filters of every block's first conv, then thin.
  {
    torch::NoGradGuard no_grad;
    auto params = m->named_parameters();
    const int zeroed[] = {3, 5, 7};
    for (int stage = 1; stage <= 3; ++stage)
      for (int b = 0; b < 9; ++b) {
        const std::string conv =
            "layer" + std::to_string(stage) + "." + std::to_string(b) + ".conv1";
        for (int c = 0; c < zeroed[stage - 1]; ++c) {
          params[conv + ".weight"].select(0, 2 * c).zero_();
          params["layer" + std::to_string(stage) + "." + std::to_string(b) + ".bn1.weight"][2 * c]
              .fill_(0);
          params["layer" + std::to_string(stage) + "." + std::to_string(b) + ".bn1.bias"][2 * c]
              .fill_(0);
        }
      }
  }
  auto plan = compress::plan_thinning(*m, graph, compress::ThinningKind::kFilters);
  ASSERT_FALSE(plan.empty());
  apply_thinning_recipe(*m, plan.recipe, "resnet56_cifar");
  EXPECT_EQ(m->named_parameters()["layer3.0.conv1.weight"].size(0), 64 - 7);
  auto form = form_of(m);
  EXPECT_LE(relative_difference(m, *form, shape_of(m, 1)), 1e-5);
  EXPECT_LE(relative_difference(m, *form, shape_of(m, 4)), 1e-5);
}

TEST(InferenceStage, TwoHalvesOfResNet20RunNativeAndEqualTheModel) {
  auto m = make("resnet20_cifar");
  const auto g = graph::SummaryGraph::build(*m, m->input_shape(),
                                            [m](const at::Tensor& x) { return m->forward(x); });
  const int n = static_cast<int>(g.ops().size());
  std::vector<int> first, second, crossing;
  for (int i = 0; i < n; ++i) (i < n / 2 ? first : second).push_back(i);
  for (int i : first)
    for (int v : g.op(i).outputs)
      for (int c : g.values().at(v).consumers)
        if (c >= n / 2 && std::find(crossing.begin(), crossing.end(), v) == crossing.end())
          crossing.push_back(v);
  ASSERT_FALSE(crossing.empty());
  InferenceStage a(g, first, {g.inputs().at(0)}, crossing);
  InferenceStage b(g, second, crossing, {g.outputs().at(0)});
  int fused = 0;
  for (const auto& step : a.steps()) fused += step.kind == "Conv+BatchNorm+ReLU";
  EXPECT_GE(fused, 4);
  torch::manual_seed(3);
  const auto x = torch::randn(m->input_shape());
  std::map<int, at::Tensor> values{{g.inputs().at(0), x}};
  ASSERT_TRUE(a.run(values));
  // The second half is given only what crosses into it (as a serving worker or an early-exit
  // segment is), not the model's input, which none of its nodes reads.
  values.erase(g.inputs().at(0));
  ASSERT_TRUE(b.run(values));
  torch::NoGradGuard no_grad;
  const auto y = m->forward(x);
  EXPECT_LE((values.at(g.outputs().at(0)) - y).abs().max().item<double>(),
            1e-5 * y.abs().max().item<double>());
  // Another batch is not the shape the stage was made for: it runs nothing.
  std::map<int, at::Tensor> other{{g.inputs().at(0), torch::randn({2, 3, 32, 32})}};
  EXPECT_FALSE(a.run(other));
  EXPECT_EQ(other.size(), 1u);
}

TEST(InferenceStage, AnOutputAResidualAddAlsoReadsIsNotOverwritten) {
  // layer1.0's input is the skip of its residual add, whose conv writes in place into the skip's
  // buffer when the add is its last reader; as a stage output it is read after the last step.
  auto m = make("resnet20_cifar");
  const auto g = graph::SummaryGraph::build(*m, m->input_shape(),
                                            [m](const at::Tensor& x) { return m->forward(x); });
  std::vector<int> ops;
  for (const auto& op : g.ops()) ops.push_back(op.id);
  const int block_input = g.op("relu").outputs.at(0);
  InferenceStage stage(g, ops, {g.inputs().at(0)}, {block_input, g.outputs().at(0)});
  torch::manual_seed(3);
  const auto x = torch::randn(m->input_shape());
  std::map<int, at::Tensor> values{{g.inputs().at(0), x}};
  ASSERT_TRUE(stage.run(values));
  std::map<int, at::Tensor> expected;
  torch::NoGradGuard no_grad;
  graph::replay_trace(g, x, [&](int id, at::Tensor& t) { expected[id] = t.clone(); });
  const auto& want = expected.at(block_input);
  EXPECT_LE((values.at(block_input) - want).abs().max().item<double>(),
            1e-5 * want.abs().max().item<double>());
}

// A serving worker makes its plan in one request thread and runs frames in others: the plan's
// primitives share its own scratchpad (oneDNN's is per thread) and take the process's thread
// count in whichever thread runs them.
TEST(InferenceModel, APlanMadeInOneThreadRunsInAnother) {
  auto m = make("resnet20_cifar");
  auto form = form_of(m);
  form->prepare({1, 3, 32, 32});
  torch::manual_seed(4);
  const auto x = torch::randn({1, 3, 32, 32});
  at::Tensor y;
  std::thread([&] { y = form->forward(x); }).join();
  torch::NoGradGuard no_grad;
  const auto expected = m->forward(x);
  EXPECT_LE((y - expected).abs().max().item<double>(), 1e-5 * expected.abs().max().item<double>());
}

// An early exit's head: pooling straight on the plan's plain input runs as oneDNN's pooling in
// the plain layout, and the head computes what LibTorch's forward does.
TEST(InferenceModel, PoolingOnAPlainInputIsNative) {
  torch::manual_seed(5);
  torch::nn::Sequential head(torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(3)),
                             torch::nn::Flatten(), torch::nn::Linear(16 * 10 * 10, 10));
  head->eval();
  auto form = InferenceModel::make(
      head.ptr(), [head](const at::Tensor& x) mutable { return head->forward(x); }, "head");
  const std::vector<int64_t> shape = {1, 16, 32, 32};
  int pools = 0;
  for (const auto& step : form->steps(shape)) {
    pools += step.kind == "AvgPool";
    EXPECT_NE(step.kind, "aten::avg_pool2d");
  }
  EXPECT_EQ(pools, 1);
  const auto x = torch::randn(shape);
  torch::NoGradGuard no_grad;
  const auto expected = head->forward(x);
  EXPECT_LE((form->forward(x) - expected).abs().max().item<double>(),
            1e-5 * expected.abs().max().item<double>());
}

/// The activations exporters write as several ops: SiLU as x·sigmoid(x), a squeeze-excitation's
/// hard sigmoid as scale, shift and clamp, the hard swish as x·clamp(x + 3, 0, 6)/6; a
/// pre-activation batch norm after a concatenation; arithmetic with constants.
struct ExportedActivations : torch::nn::Module {
  ExportedActivations() {
    using torch::nn::Conv2dOptions;
    stem = register_module("stem", torch::nn::Conv2d(Conv2dOptions(3, 16, 3).padding(1)));
    fc = register_module("fc", torch::nn::Conv2d(Conv2dOptions(16, 16, 1)));
    conv = register_module("conv", torch::nn::Conv2d(Conv2dOptions(16, 8, 3).padding(1)));
    bn = register_module("bn", torch::nn::BatchNorm2d(24));
  }
  at::Tensor forward(at::Tensor x) {
    x = stem(x);
    x = x * torch::sigmoid(x);
    auto s = fc(torch::adaptive_avg_pool2d(x, {1, 1}));
    s = torch::clamp(s * (1.0 / 6) + 0.5, 0, 1);
    x = x * s;
    auto z = torch::relu(bn(torch::cat({x, conv(x)}, 1)));
    z = z * (torch::clamp(z + 3, 0, 6) / 6);
    return torch::sub(one, z / 4);
  }
  torch::nn::Conv2d stem{nullptr}, fc{nullptr}, conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  at::Tensor one = torch::ones({1});
};

TEST(InferenceModel, ExportersActivationsRunAsOneDnnPostOpsAndPrimitives) {
  torch::manual_seed(6);
  auto net = std::make_shared<ExportedActivations>();
  {
    torch::NoGradGuard no_grad;
    net->bn->running_mean.uniform_(-0.5, 0.5);
    net->bn->running_var.uniform_(0.5, 1.5);
    net->bn->weight.uniform_(0.5, 1.5);
    net->bn->bias.uniform_(-0.2, 0.2);
  }
  net->eval();
  auto form = InferenceModel::make(
      net, [net](const at::Tensor& x) { return net->forward(x); }, "net");
  const std::vector<int64_t> shape = {1, 3, 20, 24};
  const auto steps = form->steps(shape);
  std::string kinds;
  for (const auto& s : steps) kinds += s.kind + " [" + s.implementation + "]\n";
  // SiLU as the stem's swish post-op; the hard sigmoid's scale and shift as linear post-ops and
  // its clamp as a clip; the excitation a broadcast product; the batch norm with its ReLU; the
  // hard swish one eltwise; the closing arithmetic two eltwise steps.
  EXPECT_EQ(count_kind(steps, "Conv+Sigmoid+Mul"), 1) << kinds;
  EXPECT_EQ(count_kind(steps, "Conv+Mul+Add+Clamp"), 1) << kinds;
  EXPECT_EQ(count_kind(steps, "Mul"), 1) << kinds;
  EXPECT_EQ(count_kind(steps, "Concat"), 1) << kinds;
  EXPECT_EQ(count_kind(steps, "BatchNorm+ReLU"), 1) << kinds;
  EXPECT_EQ(count_kind(steps, "Add+Clamp+Div+Mul"), 1) << kinds;
  EXPECT_EQ(count_kind(steps, "Div"), 1) << kinds;
  EXPECT_EQ(count_kind(steps, "Sub"), 1) << kinds;
  for (const auto& s : steps) {
    EXPECT_TRUE(s.native || s.kind.rfind("prim::", 0) == 0) << kinds;
    EXPECT_NE(s.implementation.rfind("ref", 0), 0u) << kinds;
  }
  torch::NoGradGuard no_grad;
  for (int64_t batch : {1, 2}) {
    auto x = torch::randn({batch, 3, 20, 24});
    const auto expected = net->forward(x);
    EXPECT_LE((form->forward(x) - expected).abs().max().item<double>(),
              1e-5 * expected.abs().max().item<double>());
  }
}

/// ShuffleNet's unit as PyTorch writes it: the channels split in two by slices, one half through
/// convolutions, the halves concatenated and shuffled (a view to N×2×C/2×H×W, the channel axes
/// transposed, a view back).
struct ShuffleUnit : torch::nn::Module {
  ShuffleUnit() {
    using torch::nn::Conv2dOptions;
    stem = register_module("stem", torch::nn::Conv2d(Conv2dOptions(3, 16, 3).padding(1)));
    branch = register_module("branch", torch::nn::Conv2d(Conv2dOptions(8, 8, 3).padding(1)));
    head = register_module("head", torch::nn::Conv2d(Conv2dOptions(12, 4, 1)));
  }
  at::Tensor forward(at::Tensor x) {
    x = torch::relu(stem(x));
    auto y = torch::cat({x.slice(1, 0, 8), torch::relu(branch(x.slice(1, 8, 16)))}, 1);
    const int64_t n = y.size(0), h = y.size(2), w = y.size(3);
    y = y.view({n, 2, 8, h, w}).transpose(1, 2).contiguous().view({n, 16, h, w});
    return head(y.slice(1, 4, 16)) + head(y.slice(1, 0, 12));
  }
  torch::nn::Conv2d stem{nullptr}, branch{nullptr}, head{nullptr};
};

TEST(InferenceModel, ChannelShufflesAndSlicesAreReordersBetweenViews) {
  torch::manual_seed(7);
  auto net = std::make_shared<ShuffleUnit>();
  net->eval();
  auto form = InferenceModel::make(
      net, [net](const at::Tensor& x) { return net->forward(x); }, "net");
  const auto steps = form->steps({1, 3, 12, 10});
  std::string kinds;
  for (const auto& s : steps) kinds += s.kind + " [" + s.implementation + "]\n";
  EXPECT_EQ(count_kind(steps, "ChannelShuffle"), 1) << kinds;
  // The halves, and the two overlapping windows of 12 channels the head reads.
  EXPECT_EQ(count_kind(steps, "Slice"), 4) << kinds;
  for (const auto& s : steps) {
    EXPECT_TRUE(s.native || s.kind.rfind("prim::", 0) == 0) << kinds;
    EXPECT_NE(s.implementation.rfind("ref", 0), 0u) << kinds;
  }
  torch::NoGradGuard no_grad;
  for (int64_t batch : {1, 3}) {
    auto x = torch::randn({batch, 3, 12, 10});
    const auto expected = net->forward(x);
    EXPECT_LE((form->forward(x) - expected).abs().max().item<double>(),
              1e-5 * expected.abs().max().item<double>());
  }
}

// The algorithm cache reads what it wrote (a key is measured once, by any process), and measures
// again what a file of the older single-run method holds.
TEST(AlgorithmCache, KeepsWhatItMeasuredAndRemeasuresAnOlderMethodsFile) {
  test::TempDir tmp;
  const char* before = std::getenv("IGB_CACHE_DIR");
  const std::string saved = before ? before : "";
  ::setenv("IGB_CACHE_DIR", tmp.path().c_str(), 1);
  const std::string key = "test " + tmp.path().filename().string();
  int measured = 0;
  auto measure = [&] {
    ++measured;
    return true;
  };
  EXPECT_TRUE(winograd_pays(key + " a", measure));
  EXPECT_TRUE(winograd_pays(key + " a", measure));
  EXPECT_EQ(measured, 1);
  std::filesystem::path file;
  for (const auto& e : std::filesystem::directory_iterator(tmp / "conv-algorithms"))
    file = e.path();
  auto j = nlohmann::json::parse(read_text_file(file));
  EXPECT_EQ(j.at("measure"), 2);
  EXPECT_EQ(j.at("winograd").at(key + " a"), true);
  // A file of the older method: its entries are not taken.
  j.erase("measure");
  j["winograd"][key + " b"] = false;
  write_text_atomically(file, j.dump());
  EXPECT_TRUE(winograd_pays(key + " b", measure));
  EXPECT_EQ(measured, 2);
  if (before)
    ::setenv("IGB_CACHE_DIR", saved.c_str(), 1);
  else
    ::unsetenv("IGB_CACHE_DIR");
}

TEST(InferenceModel, RefusesWhatItCannotRun) {
  auto m = make("resnet20_cifar");
  auto form = form_of(m);
  EXPECT_THROW(form->forward(torch::zeros({1, 3, 32, 32}, torch::kDouble)), InputError);
  m->to(torch::kDouble);
  EXPECT_THROW(form_of(m)->forward(torch::zeros({1, 3, 32, 32})), InputError);
}

// fastest_widths times each candidate width of a thinned tensor on the inference form: with no
// tolerance it keeps one of the candidates (and the same one when asked again); with any width
// counting as fast, the widest, so the zeroed filters all stay.
TEST(WidthSearch, KeepsACandidateWidthOrTheWidestWithinTolerance) {
  auto m = make("resnet20_cifar");
  {
    torch::NoGradGuard no_grad;
    auto p = m->named_parameters();
    for (int64_t c = 0; c < 10; ++c)
      for (const char* t : {"layer1.0.conv1.weight", "layer1.0.bn1.weight", "layer1.0.bn1.bias"})
        p[t][c].zero_();
  }
  const auto g = graph::SummaryGraph::build(*m, m->input_shape(),
                                            [m](const at::Tensor& x) { return m->forward(x); });
  const auto fastest = fastest_widths({0.0, 5, 1});
  std::vector<int64_t> answers;
  const compress::WidthPolicy recorded = [&](const compress::ThinnedTensor& t) {
    EXPECT_EQ(t.dense, 16);
    answers.push_back(fastest(t));
    return answers.back();
  };
  auto plan = compress::plan_thinning(*m, g, compress::ThinningKind::kFilters, recorded);
  ASSERT_FALSE(answers.empty());
  EXPECT_TRUE(answers[0] == 6 || answers[0] == 8 || answers[0] == 16) << answers[0];
  for (auto a : answers) EXPECT_EQ(a, answers[0]);
  EXPECT_EQ(plan.rounded_groups, answers[0] - 6);
  plan =
      compress::plan_thinning(*m, g, compress::ThinningKind::kFilters, fastest_widths({1e9, 2, 1}));
  EXPECT_TRUE(plan.empty());
  EXPECT_EQ(plan.rounded_groups, 10);
}

}  // namespace igb::runtime
