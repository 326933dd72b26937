#pragma once

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/finite_number.h"

namespace igb {

/// Parses the YAML `text` of `file` (named in every message), the one way igb reads YAML:
/// InputError "FILE:LINE: invalid YAML: WHAT" for text that is not YAML, and
/// check_duplicate_keys' refusals (a key given twice, an alias bomb). An empty text is a null node.
///
///   YAML::Node root = parse_yaml(text, "schedule.yaml");
YAML::Node parse_yaml(const std::string& text, const std::string& file);

/// Reads `path` and parses it as parse_yaml does; InputError "FILE: cannot be read" when it cannot
/// be opened or read.
YAML::Node load_yaml_file(const std::filesystem::path& path);

/// What a value of type T looks like, for messages: "a number", "an integer", "true or false",
/// "a single value", "a list of numbers", …
template <class T>
std::string yaml_expected();

/// What a node holds, for messages: "a list", "a mapping", "nothing", or its text in quotes
/// (shortened).
std::string yaml_describe(const YAML::Node& node);

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
  /// A required key. When it is missing and a key not read yet looks like a misspelling of it,
  /// that key is the error ("unknown key 'finale_sparsity' …; did you mean final_sparsity?").
  template <class T>
  T get(const std::string& key) {
    known_.push_back(key);
    if (!has(key)) throw missing(key);
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
  /// The raw node of a required key, missing as get's: a misspelling is named as such.
  YAML::Node required(const std::string& key);
  /// Marks keys as accepted and ignored.
  void ignore(const std::vector<std::string>& keys);
  void finish() const;

  /// "file:line" of the mapping, or of one of its keys.
  std::string where() const;
  std::string where(const std::string& key) const;
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }

  /// `n` (the value of `key`, or an element of it) as a T; InputError naming file:line, the key
  /// and the type expected when it is not one (a list where a number belongs, say).
  template <class T>
  T as(const YAML::Node& n, const std::string& key) const {
    if constexpr (is_vector<T>::value) {
      // Element by element, so a nested list is named by its own line.
      if (n.IsSequence()) {
        T out;
        for (const auto& e : n) out.push_back(as<typename T::value_type>(e, key));
        return out;
      }
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!n.IsScalar() && !n.IsNull()) throw wrong_type(n, key, yaml_expected<T>());
    }
    T v;
    try {
      v = n.as<T>();
    } catch (const YAML::Exception&) {
      // 1e400 is a number yaml-cpp cannot hold: not finite, as .nan and .inf are.
      if constexpr (std::is_floating_point_v<T>)
        if (n.IsScalar() && !finite_number_text(n.Scalar()))
          throw wrong_type(n, key, "a finite number");
      throw wrong_type(n, key, yaml_expected<T>());
    }
    // Every number of a schedule is finite: .nan or .inf is refused where it is read.
    if constexpr (std::is_floating_point_v<T>)
      if (!finite_number(v)) throw wrong_type(n, key, "a finite number");
    return v;
  }

  /// The error for a missing required key (see get).
  InputError missing(const std::string& key) const;

  /// "F:L: PATH.KEY has the wrong type of value: expected EXPECTED, got …" at the node's line.
  InputError wrong_type(const YAML::Node& n, const std::string& key,
                        const std::string& expected) const;

 private:
  template <class T>
  struct is_vector : std::false_type {};
  template <class T>
  struct is_vector<std::vector<T>> : std::true_type {};

  YAML::Node node_;
  std::string file_, path_;
  std::vector<std::string> known_;
};

/// "file:line" of a node, or of a mark.
std::string yaml_where(const std::string& file, const YAML::Node& node);
std::string yaml_where(const std::string& file, const YAML::Mark& mark);

/// The text of a mapping key or a value that must be one plain value: InputError naming file:line,
/// `what` (the key path or section) and what was found when it is a list or a mapping.
std::string yaml_scalar(const std::string& file, const YAML::Node& node, const std::string& what);

/// Refuses a key given twice in one mapping, in every mapping of `root` at every depth (yaml-cpp
/// keeps both and its lookups see only the first): InputError "F:L2: duplicate key 'a.b' (lines L1
/// and L2)". Refuses first a file whose anchors and aliases expand it to more than kMaxYamlNodes
/// nodes ("billion laughs").
void check_duplicate_keys(const YAML::Node& root, const std::string& file);

/// The most nodes a YAML file of igb may stand for once its aliases are expanded.
inline constexpr int64_t kMaxYamlNodes = 1000000;

template <class T>
std::string yaml_expected() {
  if constexpr (std::is_same_v<T, bool>) {
    return "true or false";
  } else if constexpr (std::is_integral_v<T>) {
    return "an integer";
  } else if constexpr (std::is_floating_point_v<T>) {
    return "a number";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return "a single value";
  } else {
    using E = typename T::value_type;
    if constexpr (std::is_same_v<E, bool>) {
      return "a list of true/false values";
    } else if constexpr (std::is_integral_v<E>) {
      return "a list of integers";
    } else if constexpr (std::is_floating_point_v<E>) {
      return "a list of numbers";
    } else {
      return "a list of single values";
    }
  }
}

}  // namespace igb
