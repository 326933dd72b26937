#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/error.h"

namespace igb {

/// A name → factory table for one extension point (models, datasets, optforms, ...).
/// Filled by an explicit `register_builtin_*()` call at start-up, then frozen. Unknown and
/// duplicate names throw with the list of valid names.
///
///   Registry<ModelFactory>& r = model_registry();
///   r.add("fsrcnn", make_fsrcnn, "FSRCNN (Dong et al. 2016)");
///   auto model = r.get("fsrcnn")(options);
template <class Factory>
class Registry {
 public:
  struct Entry {
    Factory factory;
    std::string help;
  };

  /// `kind` names the registry in messages ("model", "optform").
  explicit Registry(std::string kind) : kind_(std::move(kind)) {}

  void add(const std::string& name, Factory factory, std::string help = {}) {
    if (frozen_) throw std::logic_error("the " + kind_ + " registry is frozen; cannot add " + name);
    if (entries_.count(name)) throw std::logic_error("duplicate " + kind_ + " name '" + name + "'");
    entries_.emplace(name, Entry{std::move(factory), std::move(help)});
  }

  bool contains(const std::string& name) const { return entries_.count(name) != 0; }

  const Entry& entry(const std::string& name) const {
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      throw InputError("unknown " + kind_ + " '" + name + "'; valid " + kind_ +
                       "s: " + join(names()));
    }
    return it->second;
  }

  const Factory& get(const std::string& name) const { return entry(name).factory; }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& kv : entries_) out.push_back(kv.first);
    return out;
  }

  const std::string& kind() const { return kind_; }
  bool empty() const { return entries_.empty(); }
  void freeze() { frozen_ = true; }

 private:
  std::string kind_;
  std::map<std::string, Entry> entries_;
  bool frozen_ = false;
};

}  // namespace igb
