#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace igb::compress {

/// Reads one YAML mapping of a schedule file with every error naming file:line and the key path,
/// and rejects keys nobody asked for.
///
///   YamlReader r(node, "agp.yaml", "pruners.conv_pruner (AutomatedGradualPruner)");
///   double s = r.get<double>("final_sparsity");
///   r.finish();  // unknown keys → InputError listing the valid ones
class YamlReader {
 public:
  YamlReader(YAML::Node node, std::string file, std::string path);

  bool has(const std::string& key) const;
  /// A required key.
  template <class T>
  T get(const std::string& key) {
    known_.push_back(key);
    if (!has(key)) throw InputError(where() + ": " + path_ + " is missing the key '" + key + "'");
    return as<T>(node_[key], key);
  }
  /// An optional key.
  template <class T>
  T get(const std::string& key, T fallback) {
    known_.push_back(key);
    if (!has(key) || node_[key].IsNull()) return fallback;
    return as<T>(node_[key], key);
  }
  /// The raw node of an optional key (a null node when absent); marks the key known.
  YAML::Node node(const std::string& key);
  /// Marks keys as accepted and ignored.
  void ignore(const std::vector<std::string>& keys);
  void finish() const;

  /// "file:line" of the mapping, or of one of its keys.
  std::string where() const;
  std::string where(const std::string& key) const;
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }

  template <class T>
  T as(const YAML::Node& n, const std::string& key) const {
    try {
      return n.as<T>();
    } catch (const YAML::Exception&) {
      throw InputError(where(key) + ": " + path_ + "." + key + " has the wrong type of value");
    }
  }

 private:
  YAML::Node node_;
  std::string file_, path_;
  std::vector<std::string> known_;
};

/// "file:line" of a node.
std::string yaml_where(const std::string& file, const YAML::Node& node);

}  // namespace igb::compress
