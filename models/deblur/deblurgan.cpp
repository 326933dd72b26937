#include "models/deblur/deblurgan.h"

#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/instancenorm.h>
#include <torch/nn/modules/padding.h>

#include "core/activation.h"
#include "core/conv_space_to_depth.h"
#include "core/conv_transpose.h"
#include "core/error.h"
#include "core/trace_scope.h"
#include "models/deblur/deblur_models.h"

namespace igb::models::deblur {

namespace nn = torch::nn;

void DeblurGanOptions::validate(const std::string& model) const {
  if (!(dropout_ >= 0 && dropout_ < 1))
    throw InputError("model " + model + ": option 'dropout' = " + std::to_string(dropout_) +
                     " is out of range [0, 1)");
}

ResnetBlockImpl::ResnetBlockImpl(int64_t channels, double dropout) {
  conv_block = Sequential();
  for (int half = 0; half < 2; ++half) {
    conv_block->push_back(nn::ReflectionPad2d(1));
    conv_block->push_back(nn::Conv2d(nn::Conv2dOptions(channels, channels, 3)));
    conv_block->push_back(instance_norm(channels));
    if (half == 0) {
      conv_block->push_back(Activation(ActivationKind::kReLU));
      if (dropout > 0) conv_block->push_back(nn::Dropout(dropout));
    }
  }
  register_module("conv_block", conv_block);
}

torch::Tensor ResnetBlockImpl::forward(torch::Tensor x) { return x + conv_block->forward(x); }

DeblurGanImpl::DeblurGanImpl(DeblurGanOptions o) : options(o) {
  const int64_t ngf = o.ngf();
  model = Sequential();
  model->push_back(nn::ReflectionPad2d(3));
  model->push_back(nn::Conv2d(nn::Conv2dOptions(3, ngf, 7)));
  model->push_back(instance_norm(ngf));
  model->push_back(Activation(ActivationKind::kReLU));
  for (int64_t c : {ngf, 2 * ngf}) {
    model->push_back(nn::Conv2d(nn::Conv2dOptions(c, 2 * c, 3).stride(2).padding(1)));
    model->push_back(instance_norm(2 * c));
    model->push_back(Activation(ActivationKind::kReLU));
  }
  for (int64_t i = 0; i < o.blocks(); ++i) model->push_back(ResnetBlock(4 * ngf, o.dropout()));
  for (int64_t c : {4 * ngf, 2 * ngf}) {
    model->push_back(nn::ConvTranspose2d(
        nn::ConvTranspose2dOptions(c, c / 2, 3).stride(2).padding(1).output_padding(1)));
    model->push_back(instance_norm(c / 2));
    model->push_back(Activation(ActivationKind::kReLU));
  }
  model->push_back(nn::ReflectionPad2d(3));
  model->push_back(nn::Conv2d(nn::Conv2dOptions(ngf, 3, 7)));
  model->push_back(Activation(ActivationKind::kTanh));
  register_module("model", model);
  init_gan_weights(*this);
}

torch::Tensor DeblurGanImpl::forward_impl(torch::Tensor x) {
  // Sequential::forward, except that transposed convs take the fast sub-pixel path and the last
  // conv (7×7, 3 outputs) the space-to-depth one.
  auto y = x;
  for (auto& child : *model) {
    TraceScope scope(child.ptr().get());
    if (auto* up = child.ptr()->as<nn::ConvTranspose2d>())
      y = fast_conv_transpose2d(*up, y);
    else if (auto* conv = child.ptr()->as<nn::Conv2d>())
      y = fast_conv2d(*conv, y);
    else
      y = child.forward(std::move(y));
  }
  return torch::clamp(x + y, -1, 1);
}

nlohmann::json DeblurGanImpl::options_json() const { return options_to_json(options); }

Model make_deblurgan(const DeblurGanOptions& options) {
  return std::make_shared<DeblurGanImpl>(options);
}

}  // namespace igb::models::deblur
