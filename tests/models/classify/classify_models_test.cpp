#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "compress/channel_groups.h"
#include "compress/model_params.h"
#include "compress/thinning.h"
#include "core/error.h"
#include "core/sequential.h"
#include "core/thinning_recipe.h"
#include "graph/summary_graph.h"
#include "models/classify/classifier.h"
#include "models/model.h"

namespace igb::models {

class ClassifyModels : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_builtin_models(); }
};

// torchvision's published counts and the published counts of the CIFAR ResNets with zero-padded
// shortcuts.
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
  EXPECT_THROW(create_model("resnet20_cifar", {{"shortcut", "1x1"}}), InputError);
  EXPECT_THROW(create_model("preact_resnet20_cifar", {{"shortcut", "B"}}), InputError);
  EXPECT_THROW(create_model("plain20_cifar", {{"shortcut", "conv"}}), InputError);  // none at all
  EXPECT_THROW(create_model("mobilenet", {{"channel_multiplier", 0}}), InputError);
  EXPECT_THROW(create_model("mobilenet", {{"channel_multiplier", "wide"}}), InputError);
  EXPECT_THROW(create_model("alexnet_bn", {{"input_size", 66}}), InputError);
  EXPECT_THROW(create_model("vgg16_cifar", {{"layout", "torchvision"}}), InputError);
  EXPECT_THROW(create_model("densenet_cifar", {{"depth", 41}}), InputError);
  EXPECT_THROW(create_model("vgg16", {{"width", 2}}), InputError);
  EXPECT_THROW(check_model_family("fsrcnn", "classify"), InputError);
  EXPECT_NO_THROW(check_model_family("resnet56_cifar", "classify"));
}

// Distiller's model variants. Counts are weights + biases + BatchNorm affine terms, summed layer by
// layer from each architecture's definition.
namespace {

// CIFAR ResNet of n blocks per stage (16, 32, 64 channels). conv: Distiller's downsampling
// shortcut (1x1 conv, + BN unless pre-activated) on layer2.0 and layer3.0.
int64_t cifar_resnet_count(int64_t n, bool preact, bool conv_shortcut) {
  int64_t total = 3 * 9 * 16 + (preact ? 0 : 2 * 16);  // conv1 (+ bn1)
  int64_t in = 16;
  for (int64_t stage = 0; stage < 3; ++stage) {
    const int64_t out = 16 << stage;
    for (int64_t b = 0; b < n; ++b) {
      if (preact)  // pre_bn(in), conv1 3x3, bn(out), conv2 3x3
        total += 2 * in + in * out * 9 + 2 * out + out * out * 9;
      else  // conv1 3x3, bn1, conv2 3x3, bn2
        total += in * out * 9 + 2 * out + out * out * 9 + 2 * out;
      if (in != out && conv_shortcut) total += in * out + (preact ? 0 : 2 * out);
      in = out;
    }
  }
  return total + (preact ? 2 * 64 : 0) + 64 * 10 + 10;  // (final_bn), fc
}

// Distiller's preact_resnet18/34/50: conv1 7x7 + bn1, blocks with pre_bn except layer1.0, a 1x1
// downsample conv where the shape changes, final_bn, fc.
int64_t preact_resnet_count(int64_t depth) {
  const bool bottleneck = depth == 50;
  const std::vector<int64_t> blocks =
      depth == 18 ? std::vector<int64_t>{2, 2, 2, 2} : std::vector<int64_t>{3, 4, 6, 3};
  int64_t total = 3 * 64 * 49 + 2 * 64;
  int64_t in = 64;
  for (int64_t stage = 0; stage < 4; ++stage) {
    const int64_t planes = 64 << stage, out = bottleneck ? 4 * planes : planes;
    for (int64_t b = 0; b < blocks[stage]; ++b) {
      if (b > 0 || stage > 0) total += 2 * in;  // pre_bn
      if (bottleneck)                           // conv1 1x1, bn1_2, conv2 3x3, bn2_3, conv3 1x1
        total += in * planes + 2 * planes + planes * planes * 9 + 2 * planes + planes * out;
      else  // conv1 3x3, bn1_2, conv2 3x3
        total += in * planes * 9 + 2 * planes + planes * planes * 9;
      if (b == 0 && (stage > 0 || in != out)) total += in * out;  // downsample.0
      in = out;
    }
  }
  return total + 2 * in + in * 1000 + 1000;  // final_bn, fc
}

// VGG features: 3x3 convs with bias (+ BN).
int64_t vgg_features_count(const std::vector<int64_t>& widths, bool bn) {
  int64_t total = 0, in = 3;
  for (int64_t w : widths) {
    total += in * w * 9 + w + (bn ? 2 * w : 0);
    in = w;
  }
  return total;
}

// torchvision VGG: the features, classifier 25088→4096→4096→1000.
int64_t vgg_count(const std::vector<int64_t>& widths, bool bn) {
  return vgg_features_count(widths, bn) + 25088 * 4096 + 4096 + 4096 * 4096 + 4096 + 4096 * 1000 +
         1000;
}

// Distiller's MobileNet v1: widths max(floor(c · m), 8) for c = 32 … 1024; conv 3x3/2 + BN, then
// 13 × (depthwise 3x3 + BN, pointwise 1x1 + BN), fc → 1000.
int64_t mobilenet_count(double m) {
  std::vector<int64_t> c;
  for (int64_t base : {32, 64, 128, 256, 512, 1024})
    c.push_back(std::max<int64_t>(static_cast<int64_t>(std::floor(base * m)), 8));
  const std::vector<std::pair<int64_t, int64_t>> blocks = {
      {c[0], c[1]}, {c[1], c[2]}, {c[2], c[2]}, {c[2], c[3]}, {c[3], c[3]},
      {c[3], c[4]}, {c[4], c[4]}, {c[4], c[4]}, {c[4], c[4]}, {c[4], c[4]},
      {c[4], c[4]}, {c[4], c[5]}, {c[5], c[5]}};
  int64_t total = 3 * c[0] * 9 + 2 * c[0];
  for (const auto& [in, out] : blocks) total += in * 9 + 2 * in + in * out + 2 * out;
  return total + c[5] * 1000 + 1000;
}

}  // namespace

// distiller/models/cifar10/{resnet,preresnet,plain}_cifar.py, imagenet/preresnet_imagenet.py,
// imagenet/mobilenet.py, imagenet/alexnet_batchnorm.py, mnist/simplenet_mnist.py; torchvision vgg.
TEST_F(ClassifyModels, DistillerVariantCountsFollowTheirLayerArithmetic) {
  for (int64_t depth : {20, 32, 44, 56, 110}) {
    const int64_t n = (depth - 2) / 6;
    const std::string d = std::to_string(depth);
    EXPECT_EQ(count_parameters(*create_model("resnet" + d + "_cifar", {{"shortcut", "conv"}})),
              cifar_resnet_count(n, false, true))
        << depth;
    EXPECT_EQ(count_parameters(*create_model("preact_resnet" + d + "_cifar", {})),
              cifar_resnet_count(n, true, false))
        << depth;
    EXPECT_EQ(
        count_parameters(*create_model("preact_resnet" + d + "_cifar", {{"shortcut", "conv"}})),
        cifar_resnet_count(n, true, true))
        << depth;
  }
  // resnet20 + 16·32 + 2·32 (layer2.0.downsample) + 32·64 + 2·64 (layer3.0.downsample).
  EXPECT_EQ(cifar_resnet_count(3, false, true), 269'722 + 576 + 2'176);
  // plain20 is resnet20 with no shortcuts; the zero-padded ones have no parameters either.
  EXPECT_EQ(count_parameters(*create_model("plain20_cifar", {})), 269'722);
  for (int64_t depth : {18, 34, 50})
    EXPECT_EQ(count_parameters(*create_model("preact_resnet" + std::to_string(depth), {})),
              preact_resnet_count(depth))
        << depth;
  // torchvision's ResNet counts less its own BNs in the blocks' places: 18 → 11,687,720.
  EXPECT_EQ(preact_resnet_count(18), 11'687'720);
  EXPECT_EQ(preact_resnet_count(50), 25'549'352);
  const std::vector<int64_t> vgg11 = {64, 128, 256, 256, 512, 512, 512, 512};
  const std::vector<int64_t> vgg19 = {64,  64,  128, 128, 256, 256, 256, 256,
                                      512, 512, 512, 512, 512, 512, 512, 512};
  EXPECT_EQ(count_parameters(*create_model("vgg11", {})), vgg_count(vgg11, false));
  EXPECT_EQ(count_parameters(*create_model("vgg11_bn", {})), vgg_count(vgg11, true));
  EXPECT_EQ(count_parameters(*create_model("vgg19_bn", {})), vgg_count(vgg19, true));
  // Distiller's CIFAR VGGs: the same features, one fc 512→10.
  const std::vector<int64_t> vgg16 = {64,  64,  128, 128, 256, 256, 256,
                                      512, 512, 512, 512, 512, 512};
  EXPECT_EQ(count_parameters(*create_model("vgg11_cifar", {})),
            vgg_features_count(vgg11, false) + 512 * 10 + 10);
  EXPECT_EQ(count_parameters(*create_model("vgg19_bn_cifar", {})),
            vgg_features_count(vgg19, true) + 512 * 10 + 10);
  EXPECT_EQ(count_parameters(*create_model("vgg16_bn_cifar", {})),
            vgg_features_count(vgg16, true) + 512 * 10 + 10);
  EXPECT_EQ(count_parameters(*create_model("vgg16_cifar", {{"layout", "distiller"}})),
            vgg_features_count(vgg16, false) + 512 * 10 + 10);
  // Li et al.'s: BN after each conv, fc 512→512, BN1d, fc 512→10.
  EXPECT_EQ(count_parameters(*create_model("vgg16_cifar", {})),
            vgg_features_count(vgg16, true) + 512 * 512 + 512 + 2 * 512 + 512 * 10 + 10);
  // torchvision's published figures for vgg11, vgg19_bn.
  EXPECT_EQ(vgg_count(vgg11, false), 132'863'336);
  EXPECT_EQ(vgg_count(vgg19, true), 143'678'248);
  EXPECT_EQ(mobilenet_count(1.0), 4'231'976);  // MobileNet v1's published 4.2M
  EXPECT_EQ(count_parameters(*create_model("mobilenet", {})), mobilenet_count(1.0));
  EXPECT_EQ(count_parameters(*create_model("mobilenet_025", {})), mobilenet_count(0.25));
  EXPECT_EQ(count_parameters(*create_model("mobilenet", {{"channel_multiplier", 0.3}})),
            mobilenet_count(0.3));
  // alexnet_bn: convs 3→96 k11, 96→256 k5, 256→384, 384→384, 384→256 k3 (with biases and BN),
  // fc 9216→4096, 4096→4096, 4096→1000, each + BN1d.
  const int64_t alexnet_bn = (3 * 96 * 121 + 96 + 2 * 96) + (96 * 256 * 25 + 256 + 2 * 256) +
                             (256 * 384 * 9 + 384 + 2 * 384) + (384 * 384 * 9 + 384 + 2 * 384) +
                             (384 * 256 * 9 + 256 + 2 * 256) + (9216 * 4096 + 4096 + 2 * 4096) +
                             (4096 * 4096 + 4096 + 2 * 4096) + (4096 * 1000 + 1000 + 2 * 1000);
  EXPECT_EQ(alexnet_bn, 62'399'480);
  EXPECT_EQ(count_parameters(*create_model("alexnet_bn", {})), alexnet_bn);
  // simplenet_mnist: conv 1→20 k5, conv 20→50 k5, fc 4·4·50→500, fc 500→10.
  EXPECT_EQ(count_parameters(*create_model("simplenet_mnist", {})),
            (20 * 25 + 20) + (20 * 50 * 25 + 50) + (800 * 500 + 500) + (500 * 10 + 10));
}

TEST_F(ClassifyModels, DistillerVariantsRunAndRebuildFromTheirOptions) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  const std::vector<std::tuple<std::string, nlohmann::json, int64_t>> cases = {
      {"resnet20_cifar", {{"shortcut", "conv"}}, 10},
      {"resnet110_cifar", {{"shortcut", "conv"}, {"num_classes", 100}}, 100},
      {"preact_resnet20_cifar", {}, 10},
      {"preact_resnet32_cifar", {{"shortcut", "conv"}}, 10},
      {"plain20_cifar", {}, 10},
      {"preact_resnet18", {{"input_size", 64}}, 1000},
      {"preact_resnet50", {{"input_size", 64}, {"num_classes", 3}}, 3},
      {"vgg13", {{"input_size", 32}, {"num_classes", 4}}, 4},
      {"vgg16_bn", {{"input_size", 32}, {"num_classes", 4}}, 4},
      {"vgg16_cifar", {{"layout", "distiller"}}, 10},
      {"vgg13_bn_cifar", {{"input_size", 64}, {"num_classes", 3}}, 3},
      {"mobilenet_050", {{"input_size", 64}, {"num_classes", 6}}, 6},
      {"alexnet_bn", {{"num_classes", 5}}, 5},
      {"alexnet_bn", {{"input_size", 67}, {"num_classes", 5}}, 5},
      {"simplenet_mnist", {}, 10}};
  for (const auto& [name, opts, classes] : cases) {
    auto m = create_model(name, opts);
    m->eval();
    auto shape = m->input_shape();
    shape[0] = 2;
    auto y = m->forward(torch::randn(shape));
    EXPECT_EQ(y.sizes(), torch::IntArrayRef({2, classes})) << name;
    auto again = create_model(name, m->options_json());
    EXPECT_EQ(again->options_json(), m->options_json()) << name;
    EXPECT_EQ(count_parameters(*again), count_parameters(*m)) << name;
  }
  EXPECT_EQ(create_model("alexnet_bn", {})->input_shape(), (std::vector<int64_t>{1, 3, 227, 227}));
  EXPECT_EQ(create_model("simplenet_mnist", {})->input_shape(),
            (std::vector<int64_t>{1, 1, 28, 28}));
  EXPECT_EQ(create_model("resnet20_cifar", {})->options_json()["shortcut"], "pad");
  EXPECT_EQ(create_model("mobilenet_075", {})->options_json()["channel_multiplier"], 0.75);
  // simplenet_mnist returns log-probabilities, as Distiller's does.
  auto y = create_model("simplenet_mnist", {})->forward(torch::randn({3, 1, 28, 28}));
  EXPECT_TRUE(torch::allclose(y.exp().sum(1), torch::ones({3}), 1e-5, 1e-5));
}

// The names Distiller's schedules use (module.-less), e.g. examples/pruning_filters_for_efficiency
// and examples/quantization: distiller/models/cifar10/resnet_cifar.py _make_layer, preresnet_*.py.
TEST_F(ClassifyModels, DistillerParameterNames) {
  auto has = [](const Model& m, const std::vector<std::string>& names) {
    auto params = m->named_parameters();
    for (const auto& n : names) EXPECT_TRUE(params.contains(n)) << n;
  };
  auto lacks = [](const Model& m, const std::vector<std::string>& names) {
    auto params = m->named_parameters();
    for (const auto& n : names) EXPECT_FALSE(params.contains(n)) << n;
  };
  auto r20 = create_model("resnet20_cifar", {{"shortcut", "conv"}});
  has(r20, {"layer1.0.conv1.weight", "layer2.0.downsample.0.weight", "layer2.0.downsample.1.weight",
            "layer2.0.downsample.1.bias", "layer3.0.downsample.0.weight", "layer3.2.bn2.bias"});
  lacks(r20, {"layer1.0.downsample.0.weight", "layer2.1.downsample.0.weight"});
  EXPECT_EQ(r20->named_parameters()["layer3.0.downsample.0.weight"].sizes(),
            torch::IntArrayRef({64, 32, 1, 1}));
  EXPECT_EQ(
      r20->named_modules()["layer2.0.downsample.0"]->as<torch::nn::Conv2d>()->options.stride()->at(
          0),
      2);
  lacks(create_model("resnet20_cifar", {}), {"layer2.0.downsample.0.weight"});
  lacks(create_model("plain20_cifar", {}), {"layer2.0.downsample.0.weight"});
  has(create_model("plain20_cifar", {}), {"layer2.0.conv1.weight", "layer3.2.bn2.weight"});

  auto p20 = create_model("preact_resnet20_cifar", {});
  has(p20, {"conv1.weight", "layer1.0.pre_bn.weight", "layer1.0.conv1.weight", "layer1.0.bn.weight",
            "layer1.0.conv2.weight", "layer3.2.pre_bn.bias", "final_bn.weight", "fc.weight"});
  lacks(p20, {"bn1.weight", "layer1.0.bn1.weight", "layer2.0.downsample.weight"});
  has(create_model("preact_resnet20_cifar", {{"shortcut", "conv"}}),
      {"layer2.0.downsample.weight", "layer3.0.downsample.weight"});

  auto p50 = create_model("preact_resnet50", {{"input_size", 32}});
  has(p50, {"bn1.weight", "layer1.0.conv1.weight", "layer1.0.bn1_2.weight", "layer1.0.bn2_3.bias",
            "layer1.0.conv3.weight", "layer1.0.downsample.0.weight", "layer1.1.pre_bn.weight",
            "layer2.0.pre_bn.weight", "layer4.2.conv3.weight", "final_bn.weight"});
  // layer1.0 is not pre-activated (bn1 and relu1 of the stem precede it); no BN in downsample.
  lacks(p50, {"layer1.0.pre_bn.weight", "layer1.0.downsample.1.weight"});
  lacks(create_model("preact_resnet18", {{"input_size", 32}}), {"layer1.0.downsample.0.weight"});

  auto v16 = create_model("vgg16_bn", {{"input_size", 32}});
  has(v16, {"features.0.weight", "features.1.weight", "features.40.weight", "features.41.bias",
            "classifier.0.weight", "classifier.3.weight", "classifier.6.weight"});
  has(create_model("vgg19", {{"input_size", 32}}), {"features.34.weight", "classifier.6.bias"});
  has(create_model("vgg11", {{"input_size", 32}}), {"features.3.weight", "features.18.weight"});
  // distiller/models/cifar10/vgg_cifar.py: no BN in vgg16_cifar, and `classifier` is one fc.
  auto dv16 = create_model("vgg16_cifar", {{"layout", "distiller"}});
  has(dv16, {"features.0.weight", "features.2.weight", "features.28.weight", "classifier.weight",
             "classifier.bias"});
  lacks(dv16, {"features.1.weight", "classifier.0.weight"});
  has(create_model("vgg16_bn_cifar", {}),
      {"features.1.weight", "features.40.weight", "classifier.weight"});
  lacks(create_model("vgg16_cifar", {}),
        {"features.2.weight", "classifier.weight"});  // Li et al.'s

  auto mb = create_model("mobilenet", {{"input_size", 32}});
  has(mb, {"model.0.0.weight", "model.0.1.weight", "model.1.0.weight", "model.1.1.weight",
           "model.1.3.weight", "model.1.4.bias", "model.13.3.weight", "fc.weight"});
  EXPECT_EQ(mb->named_parameters()["model.1.0.weight"].sizes(), torch::IntArrayRef({32, 1, 3, 3}));
  EXPECT_EQ(mb->named_parameters()["model.13.3.weight"].sizes(),
            torch::IntArrayRef({1024, 1024, 1, 1}));
  EXPECT_EQ(create_model("mobilenet_025", {})->named_parameters()["model.1.3.weight"].sizes(),
            torch::IntArrayRef({16, 8, 1, 1}));  // max(floor(32 · 0.25), 8), floor(64 · 0.25)

  auto ab = create_model("alexnet_bn", {});
  has(ab,
      {"features.0.weight", "features.1.weight", "features.4.weight", "features.8.weight",
       "features.11.weight", "features.14.weight", "features.15.bias", "classifier.0.weight",
       "classifier.1.weight", "classifier.3.weight", "classifier.6.weight", "classifier.7.weight"});
  has(create_model("simplenet_mnist", {}),
      {"conv1.weight", "conv2.bias", "fc1.weight", "fc2.weight"});
}

// The weights Distiller's example schedules name resolve on the zoo's models: examples/agp-pruning/
// mobilenet.imagenet.schedule_agp.yaml and examples/drop_filter/plain20_cifar_dropfilter_training
// .yaml (whose log reports plain20_cifar's 268,336 conv and fc weights, biases and BN excluded).
TEST_F(ClassifyModels, DistillerExampleScheduleWeightsResolve) {
  auto mobilenet = create_model("mobilenet", {{"input_size", 32}});
  compress::ModelParams mp(*mobilenet);
  for (int block = 4; block <= 13; ++block) {
    const std::string name = "model." + std::to_string(block) + ".3.weight";
    EXPECT_EQ(mp.resolve("module." + name, "mobilenet.schedule_agp.yaml"), name);
  }
  EXPECT_EQ(mp.resolve("module.fc.weight", "mobilenet.schedule_agp.yaml"), "fc.weight");
  EXPECT_EQ(mobilenet->named_parameters()["model.12.3.weight"].sizes(),
            torch::IntArrayRef({1024, 512, 1, 1}));
  auto plain = create_model("plain20_cifar", {});
  compress::ModelParams pp(*plain);
  int64_t weights = 0;
  for (const auto& name : pp.weight_names()) weights += pp.at(name).numel();
  EXPECT_EQ(weights, 268'336);
  EXPECT_EQ(pp.resolve("module.conv1.weight", "dropfilter.yaml"), "conv1.weight");
  for (int stage = 1; stage <= 3; ++stage)
    for (int block = 0; block < 3; ++block)
      for (const char* conv : {"conv1", "conv2"}) {
        const std::string name =
            "layer" + std::to_string(stage) + "." + std::to_string(block) + "." + conv + ".weight";
        EXPECT_EQ(pp.resolve("module." + name, "dropfilter.yaml"), name);
      }
}

// distiller/models/cifar10/preresnet_cifar.py: without conv_downsample the shortcut of a block
// that halves the size is AvgPool2d(2) of the raw (not pre-activated) input, zero-padded by
// in/2 channels on each side, and the block adds it with no ReLU after.
TEST_F(ClassifyModels, PreactCifarPaddedShortcutAveragesTheRawInput) {
  torch::NoGradGuard no_grad;
  auto m = create_model("preact_resnet20_cifar", {});
  m->eval();
  for (auto& p : m->named_parameters())
    if (p.key().find("conv") != std::string::npos) p.value().zero_();
  auto layer2 = std::dynamic_pointer_cast<SequentialImpl>(m->named_modules()["layer2"]);
  ASSERT_NE(layer2, nullptr);
  torch::manual_seed(2);
  auto x = torch::randn({1, 16, 8, 8});  // negative entries too: no ReLU may touch the shortcut
  auto y = layer2->forward(x);
  ASSERT_EQ(y.sizes(), torch::IntArrayRef({1, 32, 4, 4}));
  auto pooled = torch::avg_pool2d(x, {2, 2}, {2, 2});
  EXPECT_TRUE(torch::allclose(y.narrow(1, 8, 16), pooled, 1e-6, 1e-6));
  EXPECT_EQ(y.narrow(1, 0, 8).abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(y.narrow(1, 24, 8).abs().sum().item<float>(), 0.0f);
}

// A schedule naming Distiller's downsample parameters on a model built without them is told which
// model option provides them.
TEST_F(ClassifyModels, ScheduleNamingAMissingDownsampleNamesTheOption) {
  auto plain = create_model("resnet20_cifar", {});
  compress::ModelParams params(*plain);
  try {
    params.resolve("module.layer2.0.downsample.0.weight", "s.yaml:7");
    FAIL() << "resolved a parameter the model does not have";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("s.yaml:7"), std::string::npos) << what;
    EXPECT_NE(what.find("shortcut=conv"), std::string::npos) << what;
  }
  auto conv = create_model("resnet20_cifar", {{"shortcut", "conv"}});
  EXPECT_EQ(compress::ModelParams(*conv).resolve("module.layer2.0.downsample.0.weight", "s.yaml:7"),
            "layer2.0.downsample.0.weight");
}

namespace {

graph::SummaryGraph graph_of(const Model& m) {
  return graph::SummaryGraph::build(*m, m->input_shape(),
                                    [m](const torch::Tensor& x) { return m->forward(x); });
}

/// A model in double precision with non-trivial BatchNorm statistics and affine terms, in eval.
Model thinnable(const std::string& name, const nlohmann::json& opts) {
  torch::manual_seed(0);
  auto m = create_model(name, opts);
  torch::NoGradGuard no_grad;
  m->to(torch::kDouble);
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

/// Zeroes channel `c` of producer `op` with its whole group (as a group-aware filter pruner
/// does); returns the group's producers as "op@channel".
std::set<std::string> zero_group(const Model& m, const graph::SummaryGraph& g,
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

/// Thins `m` by remove_filters; returns max |masked − thinned| over a random batch, after
/// checking a fresh model with the recipe and the thinned weights computes the same.
double thin_and_compare(const Model& m, const std::string& name, const nlohmann::json& opts) {
  torch::NoGradGuard no_grad;
  auto shape = m->input_shape();
  shape[0] = 2;
  torch::manual_seed(1);
  const auto x = torch::randn(shape, torch::kDouble);
  const auto masked = m->forward(x).clone();
  auto plan = compress::plan_thinning(*m, graph_of(m), compress::ThinningKind::kFilters);
  EXPECT_FALSE(plan.empty()) << name;
  apply_thinning_recipe(*m, plan.recipe, name);
  const auto thinned = m->forward(x);
  auto fresh = create_model(name, opts);
  fresh->to(torch::kDouble);
  fresh->eval();
  apply_thinning_recipe(*fresh, plan.recipe, name);
  auto dst = fresh->named_parameters();
  for (auto& item : m->named_parameters()) dst[item.key()].copy_(item.value());
  auto db = fresh->named_buffers();
  for (auto& item : m->named_buffers()) db[item.key()].copy_(item.value());
  EXPECT_TRUE(torch::allclose(fresh->forward(x), thinned, 0, 0)) << name;
  return (thinned - masked).abs().max().item<double>();
}

int64_t dim_of(const Model& m, const std::string& param, int64_t dim) {
  return m->named_parameters()[param].size(dim);
}

}  // namespace

// distiller/thinning.py remove_filters on Distiller's resnet20_cifar: the 1x1 downsample conv
// (+ BN) writes into the stage's residual adds, so its filters are tied to every conv2 of the
// stage, and it reads the previous stage's channels, which it unties from the next stage.
TEST_F(ClassifyModels, ConvShortcutTiesTheResidualChannelsOfItsStageForThinning) {
  const nlohmann::json opts = {{"shortcut", "conv"}};
  auto m = thinnable("resnet20_cifar", opts);
  auto g = graph_of(m);
  EXPECT_EQ(zero_group(m, g, "layer2.0.downsample.0", 5),
            (std::set<std::string>{"layer2.0.conv2@5", "layer2.0.downsample.0@5",
                                   "layer2.1.conv2@5", "layer2.2.conv2@5"}));
  EXPECT_EQ(zero_group(m, g, "layer1.1.conv2", 3),
            (std::set<std::string>{"conv1@3", "layer1.0.conv2@3", "layer1.1.conv2@3",
                                   "layer1.2.conv2@3"}));
  EXPECT_EQ(zero_group(m, g, "layer3.1.conv1", 7), (std::set<std::string>{"layer3.1.conv1@7"}));
  EXPECT_LE(thin_and_compare(m, "resnet20_cifar", opts), 1e-9);
  EXPECT_EQ(dim_of(m, "layer2.0.downsample.0.weight", 0), 31);
  EXPECT_EQ(dim_of(m, "layer2.0.downsample.1.weight", 0), 31);
  EXPECT_EQ(dim_of(m, "layer2.2.conv2.weight", 0), 31);
  EXPECT_EQ(dim_of(m, "layer3.0.conv1.weight", 1), 31);
  EXPECT_EQ(dim_of(m, "layer3.0.downsample.0.weight", 1), 31);
  EXPECT_EQ(dim_of(m, "layer2.0.downsample.0.weight", 1), 15);
  EXPECT_EQ(dim_of(m, "layer2.0.conv1.weight", 1), 15);
  EXPECT_EQ(dim_of(m, "conv1.weight", 0), 15);
  EXPECT_EQ(dim_of(m, "layer3.1.conv1.weight", 0), 63);
  EXPECT_EQ(dim_of(m, "layer3.0.downsample.0.weight", 0), 64);
  EXPECT_EQ(dim_of(m, "fc.weight", 1), 64);
  EXPECT_EQ(m->named_buffers()["layer2.0.downsample.1.running_mean"].size(0), 31);
}

// The pre-activation variants and Distiller's other layouts thin too: masked == thinned.
TEST_F(ClassifyModels, DistillerVariantsThinToTheMaskedOutput) {
  struct Case {
    std::string name;
    nlohmann::json opts;
    std::vector<std::pair<std::string, int64_t>> filters;
  };
  const std::vector<Case> cases = {
      // A stage-1 residual channel runs through the average-pooled, padded shortcut into stage 2
      // and 3 and through every pre_bn and final_bn on its way.
      {"preact_resnet20_cifar", {}, {{"layer1.1.conv2", 3}, {"layer2.0.conv1", 4}}},
      {"preact_resnet20_cifar", {{"shortcut", "conv"}}, {{"layer2.0.downsample", 2}}},
      {"preact_resnet18", {{"input_size", 64}}, {{"layer2.0.downsample.0", 9}, {"conv1", 1}}},
      {"plain20_cifar", {}, {{"layer1.0.conv2", 3}, {"layer3.2.conv1", 9}}},
      {"mobilenet_025", {{"input_size", 32}}, {{"model.3.3", 5}}},
      {"simplenet_mnist", {}, {{"conv2", 7}, {"fc1", 11}}},
      {"vgg11_bn_cifar", {}, {{"features.8", 5}, {"features.22", 100}}},
      {"alexnet_bn", {{"input_size", 67}}, {{"features.4", 10}, {"classifier.0", 7}}}};
  for (const auto& c : cases) {
    auto m = thinnable(c.name, c.opts);
    auto g = graph_of(m);
    const int64_t before = count_parameters(*m);
    for (const auto& [op, ch] : c.filters) zero_group(m, g, op, ch);
    EXPECT_LE(thin_and_compare(m, c.name, c.opts), 1e-9) << c.name;
    EXPECT_LT(count_parameters(*m), before) << c.name;
  }
}

}  // namespace igb::models
