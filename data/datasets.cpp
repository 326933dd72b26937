#include "data/datasets.h"

#include <algorithm>
#include <mutex>

#include "core/error.h"

namespace igb::data {

Registry<DatasetSpec>& dataset_registry() {
  static Registry<DatasetSpec> registry("dataset");
  return registry;
}

void register_builtin_datasets() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = dataset_registry();
    register_sr_datasets(r);
    register_deblur_datasets(r);
    register_classify_datasets(r);
    r.freeze();
  });
}

std::vector<std::string> dataset_names(const std::string& family) {
  register_builtin_datasets();
  std::vector<std::string> out;
  for (const auto& n : dataset_registry().names())
    if (dataset_registry().entry(n).factory.family == family)
      out.push_back(n.substr(family.size() + 1));
  return out;
}

const DatasetSpec& dataset_spec(const std::string& family, const std::string& name) {
  register_builtin_datasets();
  const std::string key = family + "/" + name;
  if (!dataset_registry().contains(key))
    throw InputError("unknown dataset '" + name +
                     "'; valid datasets: " + join(dataset_names(family)));
  return dataset_registry().get(key);
}

std::string dataset_unavailable(const std::string& family, const std::string& name) {
  register_builtin_datasets();
  const std::string key = family + "/" + name;
  if (!dataset_registry().contains(key)) return {};
  const auto& spec = dataset_registry().get(key);
  return spec.unavailable ? spec.unavailable() : std::string();
}

std::string recognise_dataset(const std::string& family, const std::string& data) {
  auto names = dataset_names(family);
  std::stable_sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    return dataset_spec(family, a).recognise_order < dataset_spec(family, b).recognise_order;
  });
  for (const auto& n : names) {
    const auto& spec = dataset_spec(family, n);
    if (spec.recognises && spec.recognises(data)) return n;
  }
  return {};
}

}  // namespace igb::data
