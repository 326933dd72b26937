#include "options/yaml_config.h"

#include <yaml-cpp/yaml.h>

#include <iterator>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "core/yaml_reader.h"

namespace igb::options {

namespace {
bool skip_option(const CLI::Option* opt) {
  const auto& names = opt->get_lnames();
  if (names.empty()) return true;
  const std::string& n = names.front();
  return n == "help" || n == "config" || n == "help-all";
}

nlohmann::json typed(const std::string& s) {
  if (s == "true") return true;
  if (s == "false") return false;
  char* end = nullptr;
  long long i = std::strtoll(s.c_str(), &end, 10);
  if (!s.empty() && end && *end == '\0') return i;
  double d = std::strtod(s.c_str(), &end);
  if (!s.empty() && end && *end == '\0') return d;
  return s;
}
}  // namespace

std::vector<std::pair<std::string, nlohmann::json>> resolved_options(const CLI::App& app) {
  std::vector<std::pair<std::string, nlohmann::json>> out;
  for (const CLI::Option* opt : app.get_options()) {
    if (skip_option(opt)) continue;
    const std::string name = opt->get_lnames().front();
    std::vector<std::string> values = opt->results();
    nlohmann::json v;
    if (opt->get_type_size() == 0) {  // a flag
      v = opt->count() > 0 && !(values.size() == 1 && (values[0] == "false" || values[0] == "0"));
    } else if (opt->get_expected_max() > 1) {
      v = nlohmann::json::array();
      for (const auto& s : values) v.push_back(typed(s));
    } else if (!values.empty()) {
      v = typed(values.back());
    } else {
      v = typed(opt->get_default_str());
    }
    out.emplace_back(name, v);
  }
  return out;
}

std::string YamlConfig::to_config(const CLI::App* app, bool, bool write_description,
                                  std::string) const {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "optform" << YAML::Value << optform_;
  for (const auto& [name, value] : resolved_options(*app)) {
    // --overwrite is said for one command: a rerun from the file must not replace a run unasked.
    if (name == "overwrite") continue;
    out << YAML::Key << name << YAML::Value;
    if (value.is_array()) {
      out << YAML::Flow << YAML::BeginSeq;
      for (const auto& v : value) out << (v.is_string() ? v.get<std::string>() : v.dump());
      out << YAML::EndSeq;
    } else if (value.is_string()) {
      const auto& s = value.get_ref<const std::string&>();
      if (s.empty())
        out << YAML::DoubleQuoted << s;
      else
        out << s;
    } else {
      out << YAML::Value << value.dump();
    }
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string YamlConfig::where(const std::string& option) const {
  const auto it = lines_.find(option);
  return it == lines_.end() ? std::string() : it->second;
}

std::vector<CLI::ConfigItem> YamlConfig::from_config(std::istream& input) const {
  const YAML::Node root = parse_yaml(std::string(std::istreambuf_iterator<char>(input), {}), file_);
  std::vector<CLI::ConfigItem> items;
  // A file that sets nothing (empty, comments only, `{}`, or only `optform`) is a mistake, not a
  // request for the defaults.
  const auto no_settings = [&] {
    return InputError(file_ + ": no settings in " + file_ +
                      " (a config file maps option names to values)");
  };
  if (root.IsNull() || (root.IsMap() && root.size() == 0)) throw no_settings();
  if (root.IsMap() && root.size() == 1 && root["optform"]) {
    const YAML::Node optform = root["optform"];
    if (optform.IsScalar() && optform.Scalar() == optform_) throw no_settings();
  }
  if (!root.IsMap())
    throw InputError(file_ + ":" + std::to_string(root.Mark().line + 1) +
                     ": a config file is a mapping of option names to values");
  for (const auto& kv : root) {
    const std::string key = yaml_scalar(file_, kv.first, "an option name");
    const auto& val = kv.second;
    const std::string where = file_ + ":" + std::to_string(kv.first.Mark().line + 1);
    if (key == "optform") {
      if (!val.IsScalar())
        throw InputError(where +
                         ": optform has the wrong type of value: expected a single value, got " +
                         yaml_describe(val));
      if (val.Scalar() != optform_)
        throw InputError(where + ": the file is for --optform=" + val.Scalar() +
                         ", but this run is --optform=" + optform_);
      continue;
    }
    const CLI::Option* option = nullptr;
    if (app_) {
      std::vector<std::string> valid;
      for (const CLI::Option* opt : app_->get_options()) {
        if (skip_option(opt)) continue;
        for (const auto& n : opt->get_lnames()) {
          valid.push_back(n);
          if (n == key) option = opt;
        }
      }
      if (!option)
        throw InputError(where + ": unknown option '" + key + "'; did you mean " +
                         join(closest_names(key, valid), " or ") + "?");
      // A list where one value belongs (epochs: [1]) is refused, not read as its first element.
      if (val.IsSequence() && option->get_items_expected_max() <= 1)
        throw InputError(where + ": option '" + key +
                         "' has the wrong type of value: expected a single value, got " +
                         yaml_describe(val));
    }
    lines_[key] = where;
    CLI::ConfigItem item;
    item.name = key;
    if (val.IsScalar()) {
      item.inputs.push_back(val.as<std::string>());
    } else if (val.IsSequence()) {
      for (const auto& v : val) {
        if (!v.IsScalar())
          throw InputError(yaml_where(file_, v) + ": option '" + key +
                           "' has the wrong type of value: expected a list of single values, got "
                           "a list holding " +
                           yaml_describe(v));
        item.inputs.push_back(v.as<std::string>());
      }
      if (item.inputs.empty()) continue;  // `[]`, as written for a repeatable option not given
    } else if (val.IsNull()) {
      continue;
    } else {
      throw InputError(where + ": option '" + key +
                       "' has the wrong type of value: expected a value or a list of values, got " +
                       yaml_describe(val));
    }
    items.push_back(std::move(item));
  }
  return items;
}

}  // namespace igb::options
