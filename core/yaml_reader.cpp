#include "core/yaml_reader.h"

#include <yaml-cpp/depthguard.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "core/fs.h"

namespace igb {

std::string yaml_where(const std::string& file, const YAML::Mark& mark) {
  return file + ":" + std::to_string(mark.line + 1);
}

std::string yaml_where(const std::string& file, const YAML::Node& node) {
  return yaml_where(file, node.Mark());
}

std::string yaml_describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return "nothing";
    case YAML::NodeType::Scalar:
      break;
  }
  const std::string& s = node.Scalar();
  return "'" + (s.size() > 40 ? s.substr(0, 40) + "…" : s) + "'";
}

std::string yaml_scalar(const std::string& file, const YAML::Node& node, const std::string& what) {
  if (node.IsScalar()) return node.Scalar();
  if (node.IsNull()) return "null";  // as yaml-cpp reads it
  throw InputError(yaml_where(file, node) + ": " + what + " must be a single value, not " +
                   yaml_describe(node));
}

namespace {

// Walks every mapping under `node`; `path` is the key path of `node` ("" at the root). Collections
// reached twice through anchors and aliases are walked once.
void walk_for_duplicates(const YAML::Node& node, const std::string& file, const std::string& path,
                         std::set<int>& seen) {
  if (!node.IsMap() && !node.IsSequence()) return;
  if (!node.Mark().is_null() && !seen.insert(node.Mark().pos).second) return;
  if (node.IsSequence()) {
    size_t i = 0;
    for (const auto& e : node)
      walk_for_duplicates(e, file, path + "[" + std::to_string(i++) + "]", seen);
    return;
  }
  std::map<std::string, int> first_line;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) continue;  // refused where the key is read
    const std::string& key = kv.first.Scalar();
    const std::string full = path.empty() ? key : path + "." + key;
    const int line = kv.first.Mark().line + 1;
    auto [it, fresh] = first_line.emplace(key, line);
    if (!fresh)
      throw InputError(file + ":" + std::to_string(line) + ": duplicate key '" + full +
                       "' (lines " + std::to_string(it->second) + " and " + std::to_string(line) +
                       "); give each key once");
    walk_for_duplicates(kv.second, file, full, seen);
  }
}

// The nodes `node` stands for once every alias is replaced by what it names, counted once per
// distinct collection (memo, by position) and saturating at `limit`: a few lines of anchors can
// stand for a billion nodes ("billion laughs").
int64_t expanded_nodes(const YAML::Node& node, std::map<int, int64_t>& memo, int64_t limit) {
  if (!node.IsMap() && !node.IsSequence()) return 1;
  const bool keyed = !node.Mark().is_null();
  if (keyed)
    if (auto it = memo.find(node.Mark().pos); it != memo.end()) return it->second;
  int64_t n = 1;
  for (const auto& e : node) {
    n += node.IsMap() ? expanded_nodes(e.first, memo, limit) + expanded_nodes(e.second, memo, limit)
                      : expanded_nodes(e, memo, limit);
    if (n > limit) break;
  }
  n = std::min(n, limit + 1);
  if (keyed) memo[node.Mark().pos] = n;
  return n;
}

}  // namespace

void check_duplicate_keys(const YAML::Node& root, const std::string& file) {
  std::map<int, int64_t> memo;
  if (expanded_nodes(root, memo, kMaxYamlNodes) > kMaxYamlNodes)
    throw InputError(file + ": its anchors and aliases expand it to more than " +
                     std::to_string(kMaxYamlNodes) + " nodes; write the values out instead");
  std::set<int> seen;
  walk_for_duplicates(root, file, "", seen);
}

YAML::Node parse_yaml(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own text for it is "bad file".
    throw InputError(yaml_where(file, e.mark) + ": invalid YAML: nested " +
                     std::to_string(e.depth()) + " levels deep, deeper than igb reads");
  } catch (const YAML::Exception& e) {
    const std::string where = e.mark.is_null() ? file : yaml_where(file, e.mark);
    throw InputError(where + ": invalid YAML: " + e.msg);
  }
  check_duplicate_keys(root, file);
  return root;
}

YAML::Node load_yaml_file(const std::filesystem::path& path) {
  return parse_yaml(read_input_file(path), path.string());
}

YamlReader::YamlReader(YAML::Node node, std::string file, std::string path)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {
  if (!node_.IsMap())
    throw InputError(where() + ": " + path_ + " must be a mapping, not " + yaml_describe(node_));
}

bool YamlReader::has(const std::string& key) const { return static_cast<bool>(node_[key]); }

YAML::Node YamlReader::required(const std::string& key) {
  known_.push_back(key);
  if (!has(key)) throw missing(key);
  return node_[key];
}

YAML::Node YamlReader::node(const std::string& key) {
  known_.push_back(key);
  return has(key) ? node_[key] : YAML::Node();
}

void YamlReader::ignore(const std::vector<std::string>& keys) {
  known_.insert(known_.end(), keys.begin(), keys.end());
}

void YamlReader::finish() const {
  for (const auto& kv : node_) {
    const auto key = yaml_scalar(file_, kv.first, "a key of " + path_);
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    if (known_.empty())
      throw InputError(yaml_where(file_, kv.first) + ": unknown key '" + key + "' in " + path_ +
                       "; it takes no keys");
    throw InputError(yaml_where(file_, kv.first) + ": unknown key '" + key + "' in " + path_ +
                     "; valid keys: " + join(known_) + "; did you mean " +
                     closest_names(key, known_, 1).front() + "?");
  }
}

InputError YamlReader::missing(const std::string& key) const {
  // A key nobody has read yet within one edit per five characters of the missing key (at least
  // one) is taken for a misspelling of it; initial_sparsity and final_sparsity are 4 apart.
  const size_t tolerance = std::max<size_t>(1, key.size() / 5);
  for (const auto& kv : node_) {
    if (!kv.first.IsScalar()) continue;
    const std::string& given = kv.first.Scalar();
    if (std::find(known_.begin(), known_.end(), given) == known_.end() &&
        edit_distance(given, key) <= tolerance)
      return InputError(yaml_where(file_, kv.first) + ": unknown key '" + given + "' in " + path_ +
                        "; did you mean " + key + "?");
  }
  return InputError(where() + ": " + path_ + " is missing the key '" + key + "'");
}

std::string YamlReader::where() const { return yaml_where(file_, node_); }

std::string YamlReader::where(const std::string& key) const {
  for (const auto& kv : node_)
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return yaml_where(file_, kv.first);
  return where();
}

InputError YamlReader::wrong_type(const YAML::Node& n, const std::string& key,
                                  const std::string& expected) const {
  const std::string at = n.Mark().is_null() ? where(key) : yaml_where(file_, n);
  return InputError(at + ": " + path_ + "." + key + " has the wrong type of value: expected " +
                    expected + ", got " + yaml_describe(n));
}

}  // namespace igb
