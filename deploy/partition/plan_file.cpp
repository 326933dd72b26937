#include "deploy/partition/plan_file.h"

#include <limits>
#include <map>

#include "core/error.h"
#include "core/fs.h"
#include "core/json_reader.h"

namespace igb::deploy {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A cost the writer could not express: JSON has no infinity, so an invalid plan's figures are null.
double cost(const JsonReader& r, const std::string& key) {
  if (r.has(key) && r.raw(key).is_null()) return std::numeric_limits<double>::infinity();
  return r.get<double>(key);
}

json entry_json(const PlanFileEntry& e) {
  json j = {{"method", e.method},
            {"valid", e.valid},
            {"latency_ms", e.latency_ms},
            {"bottleneck_ms", e.bottleneck_ms},
            {"throughput_fps", e.throughput_fps},
            {"devices", json::array()},
            {"links", json::array()}};
  if (!e.valid) j["why_invalid"] = e.why_invalid;
  for (const auto& d : e.devices)
    j["devices"].push_back(
        {{"device", d.device}, {"ms", d.ms}, {"param_bytes", d.param_bytes}, {"ops", d.ops}});
  for (const auto& l : e.links)
    j["links"].push_back({{"from", l.from},
                          {"to", l.to},
                          {"forward_bytes", l.forward_bytes},
                          {"forward_ms", l.forward_ms},
                          {"backward_bytes", l.backward_bytes},
                          {"backward_ms", l.backward_ms},
                          {"values", l.values}});
  return j;
}

PlanFileEntry read_entry(const JsonReader& r) {
  PlanFileEntry e;
  e.method = r.get<std::string>("method");
  e.valid = r.get<bool>("valid");
  if (!e.valid) e.why_invalid = r.get<std::string>("why_invalid", "");
  e.latency_ms = cost(r, "latency_ms");
  e.bottleneck_ms = cost(r, "bottleneck_ms");
  e.throughput_fps = cost(r, "throughput_fps");
  for (const auto& d : r.list("devices"))
    e.devices.push_back({d.get<std::string>("device"), cost(d, "ms"), d.get<int64_t>("param_bytes"),
                         d.get<std::vector<std::string>>("ops")});
  for (const auto& l : r.list("links"))
    e.links.push_back({l.get<std::string>("from"), l.get<std::string>("to"),
                       cost(l, "forward_bytes"), cost(l, "forward_ms"), cost(l, "backward_bytes"),
                       cost(l, "backward_ms"), l.get<std::vector<std::string>>("values")});
  if (e.devices.empty()) throw r.error("devices", "is empty");
  if (e.links.size() + 1 != e.devices.size())
    throw r.error("links", "must hold one link fewer than devices (" +
                               std::to_string(e.devices.size()) + ")");
  return e;
}

}  // namespace

PlanFileEntry plan_file_entry(const PartitionProblem& p, const PartitionPlan& plan) {
  PlanFileEntry e;
  e.method = plan.method;
  e.valid = plan.cost.valid;
  e.why_invalid = plan.cost.why_invalid;
  e.latency_ms = plan.cost.latency_ms;
  e.bottleneck_ms = plan.cost.bottleneck_ms;
  e.throughput_fps = plan.cost.throughput_fps();
  for (int d = 0; d < p.device_count(); ++d) {
    PlanFileEntry::Device device{
        p.devices[d], plan.cost.device_ms.at(d), plan.cost.device_param_bytes.at(d), {}};
    for (size_t i = 0; i < plan.assignment.size(); ++i)
      if (plan.assignment[i] == d) device.ops.push_back(p.nodes[i].name);
    e.devices.push_back(std::move(device));
  }
  for (int l = 0; l + 1 < p.device_count(); ++l)
    e.links.push_back({p.devices[l], p.devices[l + 1], plan.cost.forward_bytes.at(l),
                       plan.cost.forward_ms.at(l), plan.cost.backward_bytes.at(l),
                       plan.cost.backward_ms.at(l), plan.cost.forward_values.at(l)});
  return e;
}

PlanFileSimulation plan_file_simulation(const SimulationOptions& options,
                                        const SimulationResult& result) {
  PlanFileSimulation s;
  s.frames = options.frames;
  s.rate_fps = options.rate_fps;
  s.first_latency_ms = result.latency_ms.empty() ? 0 : result.latency_ms.front();
  s.mean_latency_ms = result.mean_latency_ms;
  s.max_latency_ms = result.max_latency_ms;
  s.throughput_fps = result.steady_fps;
  for (const auto& v : result.servers)
    s.servers.push_back({v.name, v.utilisation, v.mean_queue, v.max_queue});
  return s;
}

json plan_file_json(const PlanFile& plan) {
  const auto& s = plan.simulation;
  json j = {{"format", PlanFile::kFormat},
            {"version", PlanFile::kVersion},
            {"model", plan.model},
            {"input", plan.input},
            {"devices_file", plan.devices_file},
            {"objective", plan.objective},
            {"transfer", plan.transfer},
            {"mode", plan.mode},
            {"plans", json::array()},
            {"simulation",
             {{"frames", s.frames},
              {"rate_fps", s.rate_fps},
              {"first_latency_ms", s.first_latency_ms},
              {"mean_latency_ms", s.mean_latency_ms},
              {"max_latency_ms", s.max_latency_ms},
              {"throughput_fps", s.throughput_fps},
              {"servers", json::array()}}}};
  for (const auto& e : plan.plans) j["plans"].push_back(entry_json(e));
  for (const auto& v : s.servers)
    j["simulation"]["servers"].push_back({{"name", v.name},
                                          {"utilisation", v.utilisation},
                                          {"max_queue", v.max_queue},
                                          {"mean_queue", v.mean_queue}});
  return j;
}

PlanFile plan_file_from_json(const json& j, const std::string& file) {
  const JsonReader r(j, file, "plan");
  if (r.has("format") || r.has("version")) {
    if (r.get<std::string>("format") != PlanFile::kFormat)
      throw r.error("format", std::string("must be \"") + PlanFile::kFormat +
                                  "\" (igb-tools partition --out writes plan.json)");
    const int64_t version = r.get<int64_t>("version");
    if (version != PlanFile::kVersion)
      throw r.error("version", "is " + std::to_string(version) + "; this igb reads version " +
                                   std::to_string(PlanFile::kVersion));
  }
  PlanFile plan;
  plan.model = r.get<std::string>("model");
  plan.input = r.get<graph::Shape>("input");
  plan.devices_file = r.get<std::string>("devices_file");
  plan.objective = r.get<std::string>("objective", plan.objective);
  plan.transfer = r.get<std::string>("transfer", plan.transfer);
  plan.mode = r.get<std::string>("mode", plan.mode);
  for (const auto& e : r.list("plans")) plan.plans.push_back(read_entry(e));
  if (plan.plans.empty()) throw r.error("plans", "is empty");
  if (r.has("simulation")) {
    const auto s = r.object("simulation");
    auto& sim = plan.simulation;
    sim.frames = s.get<int64_t>("frames");
    sim.rate_fps = s.get<double>("rate_fps");
    sim.first_latency_ms = cost(s, "first_latency_ms");
    sim.mean_latency_ms = cost(s, "mean_latency_ms");
    sim.max_latency_ms = cost(s, "max_latency_ms");
    sim.throughput_fps = cost(s, "throughput_fps");
    for (const auto& v : s.list("servers"))
      sim.servers.push_back({v.get<std::string>("name"), v.get<double>("utilisation"),
                             v.get<double>("mean_queue"), v.get<int64_t>("max_queue")});
  }
  plan.source = file;
  return plan;
}

Assignment PlanFile::assignment(const graph::SummaryGraph& graph) const {
  const std::string where = source.empty() ? std::string("the plan") : source.string();
  std::map<std::string, int> index;
  for (size_t i = 0; i < graph.ops().size(); ++i) index[graph.ops()[i].name] = static_cast<int>(i);
  Assignment a(graph.ops().size(), -1);
  const auto& best = plans.at(0);
  for (size_t d = 0; d < best.devices.size(); ++d)
    for (const auto& op : best.devices[d].ops) {
      const auto it = index.find(op);
      if (it == index.end())
        throw InputError(where + ": op '" + op + "' of device " + best.devices[d].device +
                         " is not an op of " + model + " (was the plan made for another model?)");
      a[static_cast<size_t>(it->second)] = static_cast<int>(d);
    }
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] < 0)
      throw InputError(where + ": op '" + graph.ops()[i].name + "' of " + model +
                       " is on no device of the plan");
  return a;
}

std::vector<std::string> PlanFile::device_names() const {
  std::vector<std::string> out;
  for (const auto& d : plans.at(0).devices) out.push_back(d.device);
  return out;
}

fs::path PlanFile::devices_path() const {
  fs::path p = devices_file;
  if (!fs::exists(p) && p.is_relative() && !source.empty()) p = source.parent_path() / p;
  return p;
}

void write_plan_file(const PlanFile& plan, const fs::path& path) {
  write_text_atomically(path, plan_file_json(plan).dump(1) + "\n");
}

PlanFile read_plan_file(const fs::path& path) {
  return plan_file_from_json(load_json_file(path), path.string());
}

}  // namespace igb::deploy
