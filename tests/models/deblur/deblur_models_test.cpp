#include <gtest/gtest.h>

#include <set>

#include "compress/channel_groups.h"
#include "compress/thinning.h"
#include "core/error.h"
#include "core/thinning_recipe.h"
#include "graph/op_table.h"
#include "graph/summary_graph.h"
#include "models/deblur/deblurgan.h"
#include "models/model.h"

namespace igb::models {

namespace {

// DeblurGAN's generator, layer by layer: every conv has a bias, instance norms have no
// parameters, dropout none.
int64_t deblurgan_count(int64_t ngf, int64_t blocks) {
  const int64_t trunk = 4 * ngf;
  int64_t total = 3 * ngf * 49 + ngf;                 // conv 7×7 3→ngf
  total += ngf * 2 * ngf * 9 + 2 * ngf;               // conv 3×3 /2 ngf→2ngf
  total += 2 * ngf * trunk * 9 + trunk;               // conv 3×3 /2 2ngf→4ngf
  total += blocks * 2 * (trunk * trunk * 9 + trunk);  // two 3×3 convs per block
  total += trunk * 2 * ngf * 9 + 2 * ngf;             // transposed 3×3 ×2 4ngf→2ngf
  total += 2 * ngf * ngf * 9 + ngf;                   // transposed 3×3 ×2 2ngf→ngf
  return total + ngf * 3 * 49 + 3;                    // conv 7×7 ngf→3
}

graph::SummaryGraph deblur_graph(const Model& m, std::vector<int64_t> input = {}) {
  if (input.empty()) input = m->input_shape();
  return graph::SummaryGraph::build(*m, input,
                                    [m](const torch::Tensor& x) { return m->forward(x); });
}

/// Zeroes channel `c` of producer `op` with its whole group; returns the group's producers as
/// "op@channel".
std::set<std::string> deblur_zero_group(const Model& m, const graph::SummaryGraph& g,
                                        const std::string& op, int64_t c) {
  bool removable = false;
  auto members = compress::channel_group(*m, g, op, c, &removable);
  EXPECT_TRUE(removable) << op << "@" << c;
  auto params = m->named_parameters();
  std::set<std::string> producers;
  torch::NoGradGuard no_grad;
  for (const auto& mem : members) {
    if (mem.role != compress::GroupMember::Role::kConsumer)
      params[mem.tensor].select(mem.dim, mem.index).zero_();
    if (mem.role == compress::GroupMember::Role::kProducer)
      producers.insert(mem.op + "@" + std::to_string(mem.index));
  }
  return producers;
}

}  // namespace

class DeblurModels : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_builtin_models(); }
};

// DeblurGAN's generator (Kupyn et al. 2018): 11,378,179 parameters with conv biases and non-affine
// instance norm.
TEST_F(DeblurModels, ParameterCountsFollowTheLayerArithmetic) {
  EXPECT_EQ(deblurgan_count(64, 9), 11'378'179);
  EXPECT_EQ(count_parameters(*create_model("deblurgan", {})), 11'378'179);
  EXPECT_EQ(count_parameters(*create_model("deblurgan_small", {})), deblurgan_count(16, 3));
  EXPECT_EQ(deblurgan_count(16, 3), 272'515);
  EXPECT_EQ(count_parameters(*create_model("deblurgan", {{"ngf", 8}, {"blocks", 0}})),
            deblurgan_count(8, 0));
  // Dropout has no parameters: leaving it out changes nothing.
  EXPECT_EQ(count_parameters(*create_model("deblurgan", {{"dropout", 0}})), 11'378'179);
  // PatchGAN, ndf 64: 4×4 convs 3→64, 64→128, 128→256, 256→512, 512→1, each with a bias (pix2pix
  // with instance norm; with batch norm it is 2,765,633, the published 2.765 M).
  const int64_t patchgan =
      (3 * 64 + 64 * 128 + 128 * 256 + 256 * 512 + 512 * 1) * 16 + (64 + 128 + 256 + 512 + 1);
  EXPECT_EQ(patchgan, 2'764'737);
  EXPECT_EQ(count_parameters(*create_model("patchgan", {})), patchgan);
}

TEST_F(DeblurModels, GeneratorKeepsTheImageSize) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  const auto x = torch::rand({1, 3, 48, 64}) * 2 - 1;
  for (const char* name : {"deblurgan", "deblurgan_small"}) {
    auto m = create_model(name, {});
    m->eval();
    const auto y = m->forward(x);
    EXPECT_EQ(y.sizes(), x.sizes()) << name;
    EXPECT_LE(y.abs().max().item<float>(), 1.0f) << name;
    EXPECT_EQ(m->input_shape(), (std::vector<int64_t>{1, 3, 64, 64})) << name;
    auto again = create_model(name, m->options_json());
    EXPECT_EQ(again->options_json(), m->options_json()) << name;
    EXPECT_EQ(count_parameters(*again), count_parameters(*m)) << name;
  }
  EXPECT_EQ(create_model("deblurgan_small", {})->options_json(),
            (nlohmann::json{{"ngf", 16}, {"blocks", 3}, {"dropout", 0.0}}));
  EXPECT_EQ(create_model("patchgan_small", {})->options_json(),
            (nlohmann::json{{"ndf", 16}, {"n_layers", 3}}));
  EXPECT_EQ(create_model("patchgan_tiny", {})->options_json(),
            (nlohmann::json{{"ndf", 8}, {"n_layers", 3}}));
  // 3·8·16 + 8, 8·16·16 + 16, 16·32·16 + 32, 32·64·16 + 64, 64·16 + 1.
  EXPECT_EQ(count_parameters(*create_model("patchgan_tiny", {})), 44537);
}

// learn_residual: the network predicts a correction, so with its last conv at zero it returns the
// input, clamped to the image range [−1, 1].
TEST_F(DeblurModels, GlobalSkipReturnsTheClampedInputWhenTheLastConvIsZero) {
  torch::NoGradGuard no_grad;
  auto m = create_model("deblurgan_small", {});
  m->eval();
  auto params = m->named_parameters();
  params["model.20.weight"].zero_();
  params["model.20.bias"].zero_();
  torch::manual_seed(3);
  const auto x = torch::randn({2, 3, 16, 20}) * 1.5;
  EXPECT_TRUE(torch::equal(m->forward(x), x.clamp(-1, 1)));
  params["model.20.bias"].fill_(0.25);
  EXPECT_TRUE(torch::allclose(m->forward(x), (x + std::tanh(0.25)).clamp(-1, 1)));
}

TEST_F(DeblurModels, OriginalParameterNamesAndDropout) {
  auto params = create_model("deblurgan", {})->named_parameters();
  for (const char* n : {"model.1.weight", "model.1.bias", "model.4.weight", "model.7.bias",
                        "model.10.conv_block.1.weight", "model.10.conv_block.6.weight",
                        "model.18.conv_block.6.bias", "model.19.weight", "model.22.weight",
                        "model.26.weight", "model.26.bias"})
    EXPECT_TRUE(params.contains(n)) << n;
  EXPECT_EQ(params["model.19.weight"].sizes(), torch::IntArrayRef({256, 128, 3, 3}));
  EXPECT_EQ(params["model.26.weight"].sizes(), torch::IntArrayRef({3, 64, 7, 7}));
  EXPECT_EQ(params.size(), 2u * (3 + 2 * 9 + 2 + 1));  // weight and bias of 24 convs
  // Without dropout the second conv of a block moves up to index 5, as in the original.
  auto plain = create_model("deblurgan_small", {})->named_parameters();
  EXPECT_TRUE(plain.contains("model.10.conv_block.5.weight"));
  EXPECT_FALSE(plain.contains("model.10.conv_block.6.weight"));
  // Dropout acts in training only.
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  auto m = create_model("deblurgan_small", {{"dropout", 0.5}});
  const auto x = torch::rand({1, 3, 16, 16}) * 2 - 1;
  m->train();
  EXPECT_FALSE(torch::equal(m->forward(x), m->forward(x)));
  m->eval();
  EXPECT_TRUE(torch::equal(m->forward(x), m->forward(x)));
}

// pix2pix's 70×70 PatchGAN: three 4×4 stride-2 convs and two stride-1 ones, padding 1.
TEST_F(DeblurModels, PatchGanScoresOverlappingPatches) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  auto m = create_model("patchgan", {});
  // 64 → 32 → 16 → 8 (stride 2), → 7 → 6 (stride 1: side + 2 − 4 + 1).
  EXPECT_EQ(m->forward(torch::rand({1, 3, 64, 64})).sizes(), torch::IntArrayRef({1, 1, 6, 6}));
  // 256 → 128 → 64 → 32 → 31 → 30: pix2pix's 30×30 map.
  auto narrow = create_model("patchgan", {{"ndf", 8}});
  EXPECT_EQ(narrow->forward(torch::rand({2, 3, 256, 256})).sizes(),
            torch::IntArrayRef({2, 1, 30, 30}));
  // Receptive field, last conv back to the input: r ← (r − 1)·stride + kernel = 4, 7, 16, 34, 70.
  std::vector<std::pair<int64_t, int64_t>> convs;  // (kernel, stride)
  for (const auto& mod : m->modules(false))
    if (auto* conv = mod->as<torch::nn::Conv2d>())
      convs.emplace_back(conv->options.kernel_size()->at(0), conv->options.stride()->at(0));
  ASSERT_EQ(convs.size(), 5u);
  int64_t rf = 1;
  for (auto it = convs.rbegin(); it != convs.rend(); ++it) rf = (rf - 1) * it->second + it->first;
  EXPECT_EQ(rf, 70);
  auto params = m->named_parameters();
  for (const char* n : {"model.0.weight", "model.2.weight", "model.5.weight", "model.8.weight",
                        "model.11.weight", "model.11.bias"})
    EXPECT_TRUE(params.contains(n)) << n;
  EXPECT_EQ(params["model.8.weight"].sizes(), torch::IntArrayRef({512, 256, 4, 4}));
  // Channels stop doubling at 8·ndf.
  auto deep = create_model("patchgan", {{"ndf", 4}, {"n_layers", 5}})->named_parameters();
  EXPECT_EQ(deep["model.14.weight"].size(0), 32);
}

TEST_F(DeblurModels, FamilyAndBadOptions) {
  EXPECT_EQ(model_names("deblur"),
            (std::vector<std::string>{"deblurgan", "deblurgan_small", "patchgan", "patchgan_small",
                                      "patchgan_tiny"}));
  EXPECT_NO_THROW(check_model_family("patchgan", "deblur"));
  EXPECT_THROW(check_model_family("deblurgan", "sr"), InputError);
  EXPECT_THROW(create_model("deblurgan", {{"ngf", 0}}), InputError);
  EXPECT_THROW(create_model("deblurgan", {{"blocks", 65}}), InputError);
  EXPECT_THROW(create_model("deblurgan", {{"dropout", 1.0}}), InputError);
  EXPECT_THROW(create_model("deblurgan", {{"dropout", -0.1}}), InputError);
  EXPECT_THROW(create_model("patchgan", {{"n_layers", 7}}), InputError);
  try {
    create_model("patchgan", {{"ngf", 8}});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("has no option 'ngf'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(count_parameters(*create_model("deblurgan", {{"ngf", "8"}, {"blocks", "2"}})),
            deblurgan_count(8, 2));
}

// Every op of the three models is in the op table, so MACs, thinning and export follow them.
TEST_F(DeblurModels, SummaryGraphKnowsEveryOp) {
  for (const char* name : {"deblurgan_small", "patchgan"}) {
    // deblurgan_small has no dropout by default; DeblurGAN's blocks have it.
    const bool generator = std::string(name) == "deblurgan_small";
    auto m =
        create_model(name, generator ? nlohmann::json{{"dropout", 0.5}} : nlohmann::json::object());
    const auto g = deblur_graph(m);
    std::set<graph::OpKind> kinds;
    for (const auto& op : g.ops()) {
      EXPECT_NE(op.op_kind, graph::OpKind::kOther) << name << " " << op.name << " " << op.kind;
      kinds.insert(op.op_kind);
    }
    if (std::string(name) == "deblurgan_small") {
      for (auto k : {graph::OpKind::kPad, graph::OpKind::kConv, graph::OpKind::kInstanceNorm,
                     graph::OpKind::kReLU, graph::OpKind::kDropout, graph::OpKind::kAdd,
                     graph::OpKind::kConvTranspose, graph::OpKind::kTanh, graph::OpKind::kClamp})
        EXPECT_TRUE(kinds.count(k)) << graph::op_info(k).type;
    } else {
      EXPECT_TRUE(kinds.count(graph::OpKind::kLeakyReLU));
      EXPECT_TRUE(kinds.count(graph::OpKind::kInstanceNorm));
    }
  }
}

// Filter pruning of the generator thins to the masked output: the trunk channels are tied by the
// residual adds (the second downsampling conv and every block's second conv prune together); the
// last conv's channels reach the global skip and stay.
TEST_F(DeblurModels, PrunedGeneratorThinsToTheMaskedOutput) {
  torch::manual_seed(0);
  auto m = create_model("deblurgan_small", {});
  m->to(torch::kDouble);
  m->eval();
  const auto g = deblur_graph(m);
  EXPECT_EQ(deblur_zero_group(m, g, "model.7", 9),
            (std::set<std::string>{"model.7@9", "model.10.conv_block.5@9",
                                   "model.11.conv_block.5@9", "model.12.conv_block.5@9"}));
  EXPECT_EQ(deblur_zero_group(m, g, "model.1", 3), (std::set<std::string>{"model.1@3"}));
  EXPECT_EQ(deblur_zero_group(m, g, "model.11.conv_block.1", 5),
            (std::set<std::string>{"model.11.conv_block.1@5"}));
  EXPECT_EQ(deblur_zero_group(m, g, "model.13", 2), (std::set<std::string>{"model.13@2"}));
  bool removable = true;
  compress::channel_group(*m, g, "model.20", 0, &removable);
  EXPECT_FALSE(removable);

  torch::NoGradGuard no_grad;
  torch::manual_seed(1);
  const auto x = torch::rand({2, 3, 24, 32}, torch::kDouble) * 2 - 1;
  const auto masked = m->forward(x).clone();
  const int64_t before = count_parameters(*m);
  auto plan = compress::plan_thinning(*m, g, compress::ThinningKind::kFilters);
  EXPECT_EQ(plan.removed_groups, 4);
  apply_thinning_recipe(*m, plan.recipe, "deblurgan_small");
  const auto thinned = m->forward(x);
  EXPECT_LE((thinned - masked).abs().max().item<double>(), 1e-9);
  EXPECT_EQ(before, 272'515);
  // Layer by layer with the shapes below: model.1 15·3·49 + 15, model.4 32·15·9 + 32, model.7
  // 63·32·9 + 63, blocks 10 and 12 (64·63·9 + 64) + (63·64·9 + 63), block 11 2·(63·63·9 + 63),
  // model.13 63·31·9 + 31, model.16 31·16·9 + 16, model.20 16·3·49 + 3.
  EXPECT_EQ(count_parameters(*m),
            2'220 + 4'352 + 18'207 + 2 * 72'703 + 71'568 + 17'608 + 4'480 + 2'355);
  auto params = m->named_parameters();
  EXPECT_EQ(params["model.7.weight"].size(0), 63);
  EXPECT_EQ(params["model.12.conv_block.5.weight"].size(0), 63);
  EXPECT_EQ(params["model.12.conv_block.1.weight"].size(1), 63);
  EXPECT_EQ(params["model.13.weight"].sizes(), torch::IntArrayRef({63, 31, 3, 3}));
  EXPECT_EQ(params["model.16.weight"].size(0), 31);
  EXPECT_EQ(params["model.1.weight"].size(0), 15);
  // A fresh model with the recipe and the thinned weights computes the same.
  auto fresh = create_model("deblurgan_small", {});
  fresh->to(torch::kDouble);
  fresh->eval();
  apply_thinning_recipe(*fresh, plan.recipe, "deblurgan_small");
  auto dst = fresh->named_parameters();
  for (auto& item : m->named_parameters()) dst[item.key()].copy_(item.value());
  EXPECT_TRUE(torch::equal(fresh->forward(x), thinned));
}

}  // namespace igb::models
