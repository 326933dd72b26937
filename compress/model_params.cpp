#include "compress/model_params.h"

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

}  // namespace igb::compress
