#include <gtest/gtest.h>

#include "core/activation.h"
#include "core/error.h"
#include "models/model.h"
#include "models/sr/fsrcnn.h"

namespace igb::models {

namespace {
int64_t count_weights(const torch::nn::Module& m) {
  // Convolution kernels only (4-D tensors named *.weight): the published counts exclude biases
  // and PReLU slopes.
  int64_t n = 0;
  for (const auto& p : m.named_parameters())
    if (p.value().dim() == 4) n += p.value().numel();
  return n;
}
int64_t count_biases(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.named_parameters())
    if (p.key().size() > 5 && p.key().substr(p.key().size() - 5) == ".bias") n += p.value().numel();
  return n;
}
}  // namespace

class SrModels : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_builtin_models(); }
};

TEST_F(SrModels, FsrcnnDefaultHas12464WeightsPlusBiasesAndSlopes) {
  auto m = create_model("fsrcnn", {});
  EXPECT_EQ(count_weights(*m), 12464);
  // Biases: 56 + 12 + 4·12 + 56 + 1; PReLU slopes: 56 + 12 + 4·12 + 56.
  EXPECT_EQ(count_biases(*m), 173);
  EXPECT_EQ(count_parameters(*m), 12464 + 173 + 172);
}

TEST_F(SrModels, SrcnnHas57184WeightsPlusBiases) {
  auto m = create_model("srcnn", {});
  EXPECT_EQ(count_weights(*m), 57184);
  EXPECT_EQ(count_parameters(*m), 57184 + 64 + 32 + 1);
}

TEST_F(SrModels, FsrcnnNamesMatchTheCommonPyTorchLayout) {
  auto m = create_model("fsrcnn", {{"scale", 3}});
  auto params = m->named_parameters();
  for (const char* name :
       {"first_part.0.weight", "first_part.1.weight", "mid_part.0.0.weight", "mid_part.0.1.weight",
        "mid_part.1.weight", "mid_part.2.weight", "mid_part.7.weight", "mid_part.8.weight",
        "mid_part.9.0.weight", "mid_part.9.1.weight", "last_part.weight", "last_part.bias"})
    EXPECT_TRUE(params.contains(name)) << name;
  EXPECT_EQ(params["mid_part.9.0.weight"].sizes(), torch::IntArrayRef({56, 12, 1, 1}));
  EXPECT_EQ(params["last_part.weight"].sizes(), torch::IntArrayRef({56, 1, 9, 9}));
  auto small = create_model("fsrcnn", {{"m", 2}, {"d", "32"}, {"s", 5}});
  EXPECT_TRUE(small->named_parameters().contains("mid_part.5.0.weight"));
  EXPECT_EQ(small->named_parameters()["first_part.0.weight"].size(0), 32);
}

TEST_F(SrModels, OutputShapesPerScale) {
  torch::NoGradGuard no_grad;
  for (const char* name : {"srcnn", "fsrcnn", "espcn", "vdsr"}) {
    for (int64_t scale : {2, 3, 4}) {
      for (int64_t channels : {1, 3}) {
        nlohmann::json opts = {{"scale", scale}, {"channels", channels}};
        if (std::string(name) == "vdsr") opts["depth"] = 4;
        auto m = create_model(name, opts);
        auto y = m->forward(torch::rand({2, channels, 13, 17}));
        EXPECT_EQ(y.sizes(), torch::IntArrayRef({2, channels, 13 * scale, 17 * scale}))
            << name << " x" << scale << " c" << channels;
        EXPECT_EQ(m->input_shape(), (std::vector<int64_t>{1, channels, 32, 32}));
        // Options round-trip: the emitted options rebuild the same architecture.
        auto again = create_model(name, m->options_json());
        EXPECT_EQ(count_parameters(*again), count_parameters(*m));
      }
    }
  }
}

TEST_F(SrModels, ActivationReplacementChangesFsrcnnOutput) {
  torch::manual_seed(0);
  torch::NoGradGuard no_grad;
  auto model = create_model("fsrcnn", {});
  auto* fsrcnn = dynamic_cast<sr::FsrcnnImpl*>(model.get());
  ASSERT_NE(fsrcnn, nullptr);
  auto x = torch::rand({1, 1, 12, 12});
  auto before = model->forward(x);
  auto act = fsrcnn->mid_part->ptr(2)->as<ActivationImpl>();
  ASSERT_NE(act, nullptr);
  act->replace(torch::nn::AnyModule(Activation(ActivationKind::kIdentity)));
  EXPECT_FALSE(torch::allclose(model->forward(x), before));
  act->restore();
  EXPECT_TRUE(torch::equal(model->forward(x), before));
}

TEST_F(SrModels, BadNamesAndOptionsAreInputErrors) {
  try {
    create_model("fsrcnnn", {});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "valid models: alexnet, alexnet_bn, deblurgan, deblurgan_small, densenet_cifar"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(create_model("fsrcnn", {{"scale", 5}}), InputError);
  EXPECT_THROW(create_model("fsrcnn", {{"channels", 2}}), InputError);
  EXPECT_THROW(create_model("fsrcnn", {{"d", "abc"}}), InputError);
  try {
    create_model("espcn", {{"depth", 3}});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("has no option 'depth'"), std::string::npos) << e.what();
  }
}

}  // namespace igb::models
