#include "models/deblur/perceptual_loss.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "core/error.h"
#include "core/fs.h"
#include "tests/support.h"

namespace igb::models::deblur {

namespace {

namespace F = torch::nn::functional;

/// VGG-19 up to conv3_3 by hand from the seven weight pairs: conv (pad 1), ReLU, conv, ReLU, pool,
/// …, on ImageNet-normalised [0, 1] input.
at::Tensor reference_features(const std::vector<at::Tensor>& w, const std::vector<at::Tensor>& b,
                              const at::Tensor& images) {
  const auto mean = torch::tensor({0.485, 0.456, 0.406}).view({1, 3, 1, 1});
  const auto std = torch::tensor({0.229, 0.224, 0.225}).view({1, 3, 1, 1});
  auto x = ((images + 1) / 2 - mean) / std;
  const std::vector<int> pool_after = {1, 3};  // after conv1_2 and conv2_2
  for (size_t i = 0; i < w.size(); ++i) {
    x = torch::conv2d(x, w[i], b[i], 1, 1);
    if (i + 1 == w.size()) break;
    x = torch::relu(x);
    if (std::find(pool_after.begin(), pool_after.end(), static_cast<int>(i)) != pool_after.end())
      x = torch::max_pool2d(x, 2, 2);
  }
  return x;
}

using test::input_error_of;

}  // namespace

// torchvision's vgg19().features[0..14]: seven convs, 1,735,488 parameters.
TEST(PerceptualLoss, TheNetworkIsVgg19UpToConv33) {
  auto net = vgg19_conv3_3();
  EXPECT_EQ(net->size(), 15u);
  int64_t params = 0, convs = 0;
  for (const auto& p : net->parameters()) params += p.numel();
  for (const auto& m : net->children()) convs += m->as<torch::nn::Conv2d>() != nullptr;
  EXPECT_EQ(convs, 7);
  EXPECT_EQ(params, 1735488);
  for (int i : {0, 2, 5, 7, 10, 12, 14}) EXPECT_NE(net[i]->as<torch::nn::Conv2d>(), nullptr) << i;
  EXPECT_NE(net[4]->as<torch::nn::MaxPool2d>(), nullptr);
  EXPECT_NE(net[9]->as<torch::nn::MaxPool2d>(), nullptr);
}

// Weights written by torch::save load by name; the features and the loss agree with a hand-built
// forward pass; the sharp side carries no gradient, the frozen network gets none.
TEST(PerceptualLoss, LoadsAnArchiveAndMatchesAHandBuiltForwardPass) {
  torch::manual_seed(3);
  TempDir dir("igb-perceptual");
  auto net = vgg19_conv3_3();
  const auto file = dir.path() / "vgg19.pt";
  torch::save(net, file.string());
  std::vector<at::Tensor> w, b;
  for (int i : {0, 2, 5, 7, 10, 12, 14}) {
    w.push_back(net[i]->as<torch::nn::Conv2d>()->weight.detach().clone());
    b.push_back(net[i]->as<torch::nn::Conv2d>()->bias.detach().clone());
  }
  PerceptualLoss loss(file, torch::kCPU);
  const auto sharp = torch::rand({2, 3, 16, 12}) * 2 - 1;
  auto restored = (torch::rand({2, 3, 16, 12}) * 2 - 1).requires_grad_(true);
  const auto f = loss.features(sharp);
  EXPECT_EQ(f.sizes(), (std::vector<int64_t>{2, 256, 4, 3}));
  EXPECT_TRUE(torch::allclose(f, reference_features(w, b, sharp), 1e-4, 1e-5));

  const auto value = loss(restored, sharp);
  const auto expected =
      (reference_features(w, b, restored.detach()) - reference_features(w, b, sharp)).pow(2).mean();
  EXPECT_NEAR(value.item<double>(), expected.item<double>(), 1e-5 * expected.item<double>());
  EXPECT_GT(value.item<double>(), 0);
  value.backward();
  ASSERT_TRUE(restored.grad().defined());
  EXPECT_GT(restored.grad().abs().sum().item<double>(), 0);
  EXPECT_NEAR(loss(sharp, sharp).item<double>(), 0, 1e-12);
}

TEST(PerceptualLoss, BadWeightFilesNameTheFileAndTheLayer) {
  torch::manual_seed(4);
  TempDir dir("igb-perceptual");
  const auto missing = dir.path() / "none.pt";
  EXPECT_EQ(input_error_of([&] { PerceptualLoss(missing, torch::kCPU); }),
            "--perceptual-weights " + missing.string() + " does not exist");

  const auto text = dir.path() / "notes.pt";
  std::ofstream(text) << "not an archive\n";
  EXPECT_NE(input_error_of([&] {
              PerceptualLoss(text, torch::kCPU);
            }).find("--perceptual-weights " + text.string() + " is not a LibTorch archive"),
            std::string::npos);

  // The first ten layers only: conv3_1 onwards is missing.
  auto full = vgg19_conv3_3();
  torch::nn::Sequential head, wrong;
  size_t i = 0;
  for (const auto& layer : *full) {
    if (i < 10) head->push_back(layer);
    // conv2_1 of the wrong width.
    if (i == 5)
      wrong->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(64, 96, 3).padding(1)));
    else
      wrong->push_back(layer);
    ++i;
  }
  const auto short_file = dir.path() / "short.pt";
  torch::save(head, short_file.string());
  EXPECT_NE(
      input_error_of([&] { PerceptualLoss(short_file, torch::kCPU); }).find("has no layer 10"),
      std::string::npos);

  const auto wrong_file = dir.path() / "wrong.pt";
  torch::save(wrong, wrong_file.string());
  EXPECT_EQ(input_error_of([&] { PerceptualLoss(wrong_file, torch::kCPU); }),
            "--perceptual-weights " + wrong_file.string() +
                ": layer 5.weight is [96x64x3x3], VGG-19 has [128x64x3x3]");
}

}  // namespace igb::models::deblur
