#include "deploy/partition/devices_file.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <set>

#include "core/error.h"
#include "core/yaml_reader.h"

namespace igb::deploy {

namespace fs = std::filesystem;

namespace {

double positive(YamlReader& r, const std::string& key, double value) {
  if (!(value > 0))
    throw InputError(r.where(key) + ": " + r.path() + "." + key + " must be above 0");
  return value;
}

int device_index(const DevicesFile& d, YamlReader& r, const std::string& key, int fallback) {
  const std::string name = r.get<std::string>(key, "");
  if (name.empty()) return fallback;
  std::vector<std::string> names;
  for (size_t i = 0; i < d.devices.size(); ++i) {
    if (d.devices[i].name == name) return static_cast<int>(i);
    names.push_back(d.devices[i].name);
  }
  throw InputError(r.where(key) + ": " + key + " names no device '" + name + "'; the devices are " +
                   join(names));
}

}  // namespace

DevicesFile load_devices_file(const fs::path& path) {
  const std::string file = path.string();
  if (!fs::is_regular_file(path)) throw InputError("--devices " + file + " is not a file");
  const YAML::Node root = load_yaml_file(path);
  if (!root.IsMap())
    throw InputError(file +
                     ": a devices file is a mapping with 'devices' and 'links' (see "
                     "docs/partition.md)");
  YamlReader top(root, file, "devices file");
  DevicesFile d;
  d.file = path;
  const YAML::Node devices = top.required("devices");
  const YAML::Node links = top.node("links");
  if (!devices.IsSequence() || devices.size() == 0)
    throw InputError(top.where("devices") + ": 'devices' must be a non-empty list");
  std::set<std::string> names;
  for (size_t i = 0; i < devices.size(); ++i) {
    const YAML::Node& n = devices[i];
    const std::string at = "devices[" + std::to_string(i) + "]";
    if (!n.IsMap()) throw InputError(yaml_where(file, n) + ": " + at + " is not a mapping");
    YamlReader r(n, file, at);
    DeviceSpec s;
    s.name = r.get<std::string>("name");
    if (s.name.empty()) throw InputError(r.where("name") + ": " + at + ".name is empty");
    if (!names.insert(s.name).second)
      throw InputError(r.where("name") + ": device name '" + s.name + "' is used twice");
    const std::string costs = r.get<std::string>("costs", "measured");
    if (costs != "measured") {
      s.costs = fs::path(costs).is_absolute() ? fs::path(costs) : path.parent_path() / costs;
      if (!fs::is_regular_file(s.costs))
        throw InputError(r.where("costs") + ": " + at + ".costs: no cost file " + s.costs.string() +
                         " (write one with igb-tools partition --write-costs on that device, or "
                         "say 'measured')");
    }
    s.speed = positive(r, "speed", r.get<double>("speed", 1.0));
    const double memory_mb = r.get<double>("memory_mb", 0.0);
    if (r.has("memory_mb")) s.memory_bytes = 1e6 * positive(r, "memory_mb", memory_mb);
    r.finish();
    d.devices.push_back(s);
  }
  const size_t want = d.devices.size() - 1;
  if (want > 0 && (!links || !links.IsSequence()))
    throw InputError(top.where("links") + ": 'links' must list the " + std::to_string(want) +
                     " links between the devices, in chain order");
  const size_t have = links && links.IsSequence() ? links.size() : 0;
  if (have != want)
    throw InputError(top.where("links") + ": " + std::to_string(d.devices.size()) +
                     " devices need " + std::to_string(want) + " links, not " +
                     std::to_string(have));
  for (size_t i = 0; i < have; ++i) {
    const YAML::Node& n = links[i];
    const std::string at = "links[" + std::to_string(i) + "] (" + d.devices[i].name + " - " +
                           d.devices[i + 1].name + ")";
    if (!n.IsMap()) throw InputError(yaml_where(file, n) + ": " + at + " is not a mapping");
    YamlReader r(n, file, at);
    LinkSpec l;
    l.bandwidth = 1e6 * positive(r, "bandwidth_mb_s", r.get<double>("bandwidth_mb_s"));
    l.latency_ms = r.get<double>("latency_ms", 0.0);
    if (l.latency_ms < 0)
      throw InputError(r.where("latency_ms") + ": " + at + ".latency_ms must be 0 or more");
    l.message_ms = r.get<double>("message_ms", 0.0);
    if (!(l.message_ms >= 0) || !std::isfinite(l.message_ms))
      throw InputError(r.where("message_ms") + ": " + at +
                       ".message_ms must be a finite number of 0 or more");
    r.finish();
    d.links.push_back(l);
  }
  d.source = device_index(d, top, "frames_from", 0);
  d.sink = device_index(d, top, "results_to", static_cast<int>(d.devices.size()) - 1);
  top.finish();
  return d;
}

}  // namespace igb::deploy
