#include "compress/yaml_reader.h"

#include <algorithm>

namespace igb::compress {

std::string yaml_where(const std::string& file, const YAML::Node& node) {
  return file + ":" + std::to_string(node.Mark().line + 1);
}

YamlReader::YamlReader(YAML::Node node, std::string file, std::string path)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {
  if (!node_.IsMap()) throw InputError(where() + ": " + path_ + " must be a mapping");
}

bool YamlReader::has(const std::string& key) const { return static_cast<bool>(node_[key]); }

YAML::Node YamlReader::node(const std::string& key) {
  known_.push_back(key);
  return has(key) ? node_[key] : YAML::Node();
}

void YamlReader::ignore(const std::vector<std::string>& keys) {
  known_.insert(known_.end(), keys.begin(), keys.end());
}

void YamlReader::finish() const {
  for (const auto& kv : node_) {
    const auto key = kv.first.as<std::string>();
    if (std::find(known_.begin(), known_.end(), key) == known_.end())
      throw InputError(yaml_where(file_, kv.first) + ": unknown key '" + key + "' in " + path_ +
                       "; valid keys: " + join(known_));
  }
}

std::string YamlReader::where() const { return yaml_where(file_, node_); }

std::string YamlReader::where(const std::string& key) const {
  for (const auto& kv : node_)
    if (kv.first.as<std::string>() == key) return yaml_where(file_, kv.first);
  return where();
}

}  // namespace igb::compress
