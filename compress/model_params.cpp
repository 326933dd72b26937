#include "compress/model_params.h"

#include <algorithm>

#include "core/error.h"

namespace igb::compress {

namespace {
// Drops every "module" path segment (DataParallel wrappers, at the top or inside a model).
std::string strip_module(const std::string& name) {
  std::string out;
  size_t begin = 0;
  while (begin <= name.size()) {
    size_t end = name.find('.', begin);
    if (end == std::string::npos) end = name.size();
    const std::string segment = name.substr(begin, end - begin);
    if (segment != "module") out += (out.empty() ? "" : ".") + segment;
    begin = end + 1;
  }
  return out;
}
}  // namespace

ModelParams::ModelParams(torch::nn::Module& model) : model_(&model) {
  for (auto& p : model.named_parameters(true)) {
    params_[p.key()] = p.value();
    names_.push_back(p.key());
  }
}

std::string ModelParams::resolve(const std::string& name, const std::string& where) const {
  if (params_.count(name)) return name;
  std::string n = strip_module(name);
  if (params_.count(n)) {
    if (std::find(stripped_.begin(), stripped_.end(), std::make_pair(name, n)) == stripped_.end())
      stripped_.emplace_back(name, n);
    return n;
  }
  // Distiller's CIFAR ResNets always have 1x1-conv shortcuts; ours only when asked for.
  std::string hint;
  const auto is_downsample = [](const std::string& p) {
    return p.find("downsample") != std::string::npos;
  };
  if (is_downsample(n) && std::none_of(names_.begin(), names_.end(), is_downsample))
    hint =
        "; this model has no 'downsample' parameters: resnet*_cifar and preact_resnet*_cifar have "
        "Distiller's 1x1-conv shortcuts only when built with the model option shortcut=conv "
        "(--model-arg shortcut=conv)";
  throw InputError(where + ": '" + name + "' is not a parameter of the model; closest: " +
                   join(closest_names(n, names_), ", ") + hint);
}

std::vector<std::string> ModelParams::weight_names() const {
  std::vector<std::string> out;
  for (const auto& n : names_)
    if (params_.at(n).dim() >= 2) out.push_back(n);
  return out;
}

}  // namespace igb::compress
