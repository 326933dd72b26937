#include <gtest/gtest.h>

#include "core/error.h"
#include "core/sequential.h"
#include "models/classify/classifier.h"
#include "models/model.h"

namespace igb::models {

class ClassifyModels : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_builtin_models(); }
};

// REFERENCE.md §5 and the published counts of the CIFAR ResNets with zero-padded shortcuts.
TEST_F(ClassifyModels, ParameterCountsMatchThePublishedFigures) {
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"resnet18", 11'689'512},       {"resnet34", 21'797'672},
      {"resnet50", 25'557'032},       {"vgg16", 138'357'544},
      {"alexnet", 61'100'840},        {"mobilenet_v2", 3'504'872},
      {"resnet20_cifar", 269'722},    {"resnet32_cifar", 464'154},
      {"resnet44_cifar", 658'586},    {"resnet56_cifar", 853'018},
      {"resnet110_cifar", 1'727'962}, {"vgg16_cifar", 14'991'946},
      {"simplenet_cifar", 62'006},    {"lenet5", 61'706}};
  for (const auto& [name, count] : expected)
    EXPECT_EQ(count_parameters(*create_model(name, {})), count) << name;
}

TEST_F(ClassifyModels, DenseNetBcCountFollowsItsLayerArithmetic) {
  // depth 40, growth 12: 3 blocks of 6 bottlenecks; channels 24 → 96 → 48 → 120 → 60 → 132.
  auto m = create_model("densenet_cifar", {});
  int64_t expected = 3 * 9 * 24;  // conv1
  int64_t c = 24;
  for (int b = 0; b < 3; ++b) {
    for (int i = 0; i < 6; ++i) {
      expected += 2 * c + c * 48 + 2 * 48 + 48 * 9 * 12;  // bn1, conv1 1x1, bn2, conv2 3x3
      c += 12;
    }
    if (b < 2) {
      expected += 2 * c + c * (c / 2);  // transition bn + conv
      c /= 2;
    }
  }
  expected += 2 * c + c * 10 + 10;  // final bn, fc
  EXPECT_EQ(c, 132);
  EXPECT_EQ(count_parameters(*m), expected);
}

TEST_F(ClassifyModels, OutputShapesAndOptions) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {
      {"simplenet_cifar", {}},
      {"lenet5", {}},
      {"resnet20_cifar", {{"num_classes", 100}}},
      {"vgg16_cifar", {}},
      {"densenet_cifar", {{"depth", 16}}},
      {"resnet18", {{"input_size", 64}, {"num_classes", 7}}},
      {"resnet50", {{"input_size", 64}}},
      {"mobilenet_v2", {{"input_size", 64}}},
      {"alexnet", {{"input_size", 96}}},
      {"vgg16", {{"input_size", 32}, {"num_classes", 5}}}};
  for (const auto& [name, opts] : cases) {
    auto m = create_model(name, opts);
    m->eval();
    auto shape = m->input_shape();
    shape[0] = 2;
    auto y = m->forward(torch::randn(shape));
    int64_t classes =
        opts.contains("num_classes")
            ? opts["num_classes"].get<int64_t>()
            : (name.find("cifar") != std::string::npos || name == "lenet5" ? 10 : 1000);
    EXPECT_EQ(y.sizes(), torch::IntArrayRef({2, classes})) << name;
    EXPECT_EQ(count_parameters(*create_model(name, m->options_json())), count_parameters(*m))
        << name;
  }
  EXPECT_EQ(create_model("lenet5", {})->input_shape(), (std::vector<int64_t>{1, 1, 28, 28}));
  EXPECT_EQ(create_model("resnet50", {})->input_shape(), (std::vector<int64_t>{1, 3, 224, 224}));
}

TEST_F(ClassifyModels, StableDottedNames) {
  auto r20 = create_model("resnet20_cifar", {})->named_parameters();
  for (const char* n : {"conv1.weight", "bn1.weight", "layer1.0.conv1.weight",
                        "layer2.0.conv2.weight", "layer3.2.bn2.bias", "fc.weight"})
    EXPECT_TRUE(r20.contains(n)) << n;
  auto r50 = create_model("resnet50", {})->named_parameters();
  for (const char* n :
       {"layer1.0.downsample.0.weight", "layer1.0.downsample.1.weight", "layer4.2.conv3.weight"})
    EXPECT_TRUE(r50.contains(n)) << n;
  auto mb = create_model("mobilenet_v2", {})->named_parameters();
  for (const char* n : {"features.0.0.weight", "features.1.conv.0.0.weight",
                        "features.1.conv.1.weight", "features.2.conv.0.0.weight",
                        "features.2.conv.3.weight", "features.18.0.weight", "classifier.1.weight"})
    EXPECT_TRUE(mb.contains(n)) << n;
  auto v = create_model("vgg16_cifar", {})->named_parameters();
  EXPECT_TRUE(v.contains("features.0.weight"));
  EXPECT_TRUE(v.contains("features.1.weight"));  // BN after the first conv
  EXPECT_TRUE(v.contains("classifier.3.weight"));
}

TEST_F(ClassifyModels, ZeroPaddedShortcutCarriesTheInput) {
  // With every conv zeroed and BN at identity (eval, fresh statistics), each block's output is
  // relu(shortcut): layer2 must return x subsampled by 2 with 8 zero channels on each side.
  torch::NoGradGuard no_grad;
  auto m = create_model("resnet20_cifar", {});
  m->eval();
  for (auto& p : m->named_parameters())
    if (p.key().find("conv") != std::string::npos) p.value().zero_();
  auto layer2 = std::dynamic_pointer_cast<SequentialImpl>(m->named_modules()["layer2"]);
  ASSERT_NE(layer2, nullptr);
  torch::manual_seed(1);
  auto x = torch::rand({1, 16, 8, 8});
  auto y = layer2->forward(x);
  ASSERT_EQ(y.sizes(), torch::IntArrayRef({1, 32, 4, 4}));
  using torch::indexing::Slice;
  auto sub = x.index({Slice(), Slice(), Slice(0, 8, 2), Slice(0, 8, 2)});
  EXPECT_TRUE(torch::allclose(y.narrow(1, 8, 16), sub, 1e-5, 1e-5));
  EXPECT_EQ(y.narrow(1, 0, 8).abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(y.narrow(1, 24, 8).abs().sum().item<float>(), 0.0f);
}

TEST_F(ClassifyModels, BadOptionsAreInputErrors) {
  EXPECT_THROW(create_model("resnet20_cifar", {{"num_classes", 0}}), InputError);
  EXPECT_THROW(create_model("densenet_cifar", {{"depth", 41}}), InputError);
  EXPECT_THROW(create_model("vgg16", {{"width", 2}}), InputError);
  EXPECT_THROW(check_model_family("fsrcnn", "classify"), InputError);
  EXPECT_NO_THROW(check_model_family("resnet56_cifar", "classify"));
}

}  // namespace igb::models
