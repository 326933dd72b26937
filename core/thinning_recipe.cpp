#include "core/thinning_recipe.h"

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/instancenorm.h>
#include <torch/nn/modules/linear.h>

#include "core/activation.h"
#include "core/channel_pad.h"
#include "core/error.h"
#include "core/tensor_util.h"

namespace igb {

void slice_in_place(at::Tensor& t, int64_t dim, const std::vector<int64_t>& keep) {
  torch::NoGradGuard no_grad;
  const auto index = index_tensor(keep, t.device());
  if (t.grad().defined()) t.mutable_grad() = t.grad().index_select(dim, index).contiguous();
  t.set_data(t.index_select(dim, index).contiguous());
}

namespace {

template <class Options>
bool set_conv(Options& o, const std::string& option, int64_t value) {
  if (option == "in_channels")
    o.in_channels(value);
  else if (option == "out_channels")
    o.out_channels(value);
  else if (option == "groups")
    o.groups(value);
  else
    return false;
  return true;
}

}  // namespace

void set_module_option(torch::nn::Module& module, const std::string& name,
                       const std::string& option, int64_t value) {
  bool done = dynamic_cast<ShapedByTensors*>(&module) != nullptr;
  if (done) {
  } else if (auto* c = module.as<torch::nn::Conv2d>())
    done = set_conv(c->options, option, value);
  else if (auto* c1 = module.as<torch::nn::Conv1d>())
    done = set_conv(c1->options, option, value);
  else if (auto* t = module.as<torch::nn::ConvTranspose2d>())
    done = set_conv(t->options, option, value);
  else if (auto* l = module.as<torch::nn::Linear>()) {
    if (option == "in_features")
      l->options.in_features(value), done = true;
    else if (option == "out_features")
      l->options.out_features(value), done = true;
  } else if (auto* b2 = module.as<torch::nn::BatchNorm2d>()) {
    if (option == "num_features") b2->options.num_features(value), done = true;
  } else if (auto* b1 = module.as<torch::nn::BatchNorm1d>()) {
    if (option == "num_features") b1->options.num_features(value), done = true;
  } else if (auto* in = module.as<torch::nn::InstanceNorm2d>()) {
    if (option == "num_features") in->options.num_features(value), done = true;
  } else if (auto* a = module.as<ActivationImpl>()) {
    if (option == "num_parameters") a->set_num_parameters(value), done = true;
  } else if (auto* p = module.as<ChannelPadImpl>()) {
    if (option == "before")
      p->set_padding(value, p->after()), done = true;
    else if (option == "after")
      p->set_padding(p->before(), value), done = true;
  }
  if (!done)
    throw InputError("thinning cannot set option '" + option + "' of module " + name + " (" +
                     module.name() + ")");
}

void apply_thinning_recipe(torch::nn::Module& model, const nlohmann::json& recipe,
                           const std::string& where, const SliceHook& before_slice) {
  try {
    auto params = model.named_parameters();
    auto buffers = model.named_buffers();
    for (const auto& entry : recipe.at("tensors")) {
      const auto name = entry.at("name").get<std::string>();
      at::Tensor* t = params.find(name);
      if (!t) t = buffers.find(name);
      if (!t)
        throw InputError(where + ": thinning recipe names '" + name +
                         "', which the model does not have");
      const auto dim = entry.at("dim").get<int64_t>();
      const auto size = entry.at("size").get<int64_t>();
      const auto keep = entry.at("keep").get<std::vector<int64_t>>();
      if (dim < 0 || dim >= t->dim() || t->size(dim) != size)
        throw InputError(where + ": thinning recipe expects " + name + " to have " +
                         std::to_string(size) + " entries in dimension " + std::to_string(dim) +
                         ", the model has shape " + c10::str(t->sizes()));
      for (auto k : keep)
        if (k < 0 || k >= size)
          throw InputError(where + ": thinning recipe keeps index " + std::to_string(k) + " of " +
                           name + ", which has " + std::to_string(size));
      if (before_slice) before_slice(name, *t, dim, keep);
      slice_in_place(*t, dim, keep);
    }
    auto modules = model.named_modules("", /*include_self=*/false);
    for (const auto& entry : recipe.at("modules")) {
      const auto name = entry.at("name").get<std::string>();
      auto* m = modules.find(name);
      if (!m)
        throw InputError(where + ": thinning recipe names module '" + name +
                         "', which the model does not have");
      for (const auto& [option, value] : entry.at("set").items())
        set_module_option(**m, name, option, value.get<int64_t>());
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(where + ": malformed thinning recipe (" + e.what() + ")");
  }
}

}  // namespace igb
