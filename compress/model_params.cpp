#include "compress/model_params.h"

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "core/error.h"

namespace igb::compress {

namespace {
std::string strip_module(const std::string& name) {
  return name.rfind("module.", 0) == 0 ? name.substr(7) : name;
}
}  // namespace

ModelParams::ModelParams(torch::nn::Module& model) {
  for (auto& p : model.named_parameters(true)) {
    params_[p.key()] = p.value();
    names_.push_back(p.key());
  }
  // Leaf modules in registration order: a BatchNorm registered right after a conv or linear layer,
  // with as many features as that layer has outputs, normalises that layer's output.
  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> leaves;
  for (const auto& m : model.named_modules("", false))
    if (m.value()->children().empty()) leaves.emplace_back(m.key(), m.value());
  for (size_t i = 0; i < leaves.size(); ++i) {
    const auto& [name, mod] = leaves[i];
    at::Tensor weight, bias;
    if (auto* c = mod->as<torch::nn::Conv2dImpl>()) {
      weight = c->weight;
      bias = c->bias;
    } else if (auto* l = mod->as<torch::nn::LinearImpl>()) {
      weight = l->weight;
      bias = l->bias;
    } else {
      continue;
    }
    Followers f;
    const std::string prefix = name.empty() ? "" : name + ".";
    if (bias.defined()) f.params.push_back(prefix + "bias");
    if (i + 1 < leaves.size()) {
      const auto& [next_name, next] = leaves[i + 1];
      const std::string np = next_name + ".";
      auto take = [&](auto* bn) {
        if (!bn || bn->options.num_features() != weight.size(0)) return;
        if (bn->weight.defined()) f.params.push_back(np + "weight");
        if (bn->bias.defined()) f.params.push_back(np + "bias");
      };
      take(next->as<torch::nn::BatchNorm2dImpl>());
      take(next->as<torch::nn::BatchNorm1dImpl>());
    }
    followers_[prefix + "weight"] = f;
  }
}

std::string ModelParams::resolve(const std::string& name, const std::string& where) const {
  std::string n = strip_module(name);
  if (params_.count(n)) return n;
  throw InputError(where + ": '" + name + "' is not a parameter of the model; closest: " +
                   join(closest_names(n, names_), ", "));
}

std::vector<std::string> ModelParams::weight_names() const {
  std::vector<std::string> out;
  for (const auto& n : names_)
    if (params_.at(n).dim() >= 2) out.push_back(n);
  return out;
}

const ModelParams::Followers& ModelParams::followers(const std::string& weight) const {
  static const Followers none;
  auto it = followers_.find(weight);
  return it == followers_.end() ? none : it->second;
}

}  // namespace igb::compress
