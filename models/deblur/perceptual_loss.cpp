#include "models/deblur/perceptual_loss.h"

#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/tensor_util.h"

namespace igb::models::deblur {

namespace nn = torch::nn;
namespace fs = std::filesystem;

namespace {

/// VGG-19's layer list up to conv3_3: channel counts, 0 = ReLU, -1 = 2x2 max pool.
const std::vector<int64_t> kLayers = {64, 0, 64, 0, -1, 128, 0, 128, 0, -1, 256, 0, 256, 0, 256};

}  // namespace

nn::Sequential vgg19_conv3_3() {
  nn::Sequential net;
  int64_t in = 3;
  for (int64_t c : kLayers) {
    if (c > 0) {
      net->push_back(nn::Conv2d(nn::Conv2dOptions(in, c, 3).padding(1)));
      in = c;
    } else if (c == 0) {
      net->push_back(nn::ReLU());
    } else {
      net->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2)));
    }
  }
  return net;
}

PerceptualLoss::PerceptualLoss(const fs::path& weights, const c10::Device& device)
    : net_(vgg19_conv3_3()) {
  const std::string where = "--perceptual-weights " + weights.string();
  if (!fs::exists(weights)) throw InputError(where + " does not exist");
  if (!fs::is_regular_file(weights)) throw InputError(where + " is not a regular file");
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(weights.string());
  } catch (const std::exception& e) {
    throw InputError(where + " is not a LibTorch archive" + library_error_detail(e));
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < net_->size(); ++i) {
    auto* conv = net_[i]->as<nn::Conv2d>();
    if (!conv) continue;
    const std::string layer = "layer " + std::to_string(i);
    torch::serialize::InputArchive sub;
    bool found = false;
    try {
      found = archive.try_read(std::to_string(i), sub);
    } catch (const std::exception&) {
      found = false;
    }
    if (!found)
      throw InputError(where + " has no " + layer +
                       " (VGG-19's features up to conv3_3: children 0, 2, 5, 7, 10, 12, 14)");
    for (const char* name : {"weight", "bias"}) {
      at::Tensor value;
      bool ok = false;
      try {
        ok = sub.try_read(name, value);
      } catch (const std::exception&) {
        ok = false;
      }
      at::Tensor& target = std::string(name) == "weight" ? conv->weight : conv->bias;
      if (!ok || !value.defined()) throw InputError(where + ": " + layer + " has no " + name);
      if (value.sizes() != target.sizes())
        throw InputError(where + ": " + layer + "." + name + " is " + shape_text(value.sizes()) +
                         ", VGG-19 has " + shape_text(target.sizes()));
      if (!value.is_floating_point())
        throw InputError(where + ": " + layer + "." + name + " is not floating point");
      target.copy_(value.to(at::kFloat));
    }
  }
  for (auto& p : net_->parameters()) p.requires_grad_(false);
  net_->eval();
  net_->to(device);
  mean_ = torch::tensor({0.485, 0.456, 0.406}, torch::kFloat).view({1, 3, 1, 1}).to(device);
  std_ = torch::tensor({0.229, 0.224, 0.225}, torch::kFloat).view({1, 3, 1, 1}).to(device);
}

at::Tensor PerceptualLoss::features(const at::Tensor& images) {
  return net_->forward(((images.to(at::kFloat) + 1) / 2 - mean_) / std_);
}

at::Tensor PerceptualLoss::operator()(const at::Tensor& restored, const at::Tensor& sharp) {
  at::Tensor target;
  {
    torch::NoGradGuard no_grad;
    target = features(sharp);
  }
  return torch::mse_loss(features(restored), target);
}

}  // namespace igb::models::deblur
