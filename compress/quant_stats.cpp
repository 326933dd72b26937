#include "compress/quant_stats.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/error.h"
#include "core/fs.h"
#include "core/yaml_reader.h"

namespace igb::compress {

namespace {

std::string size_string(const at::Tensor& t) {
  std::string s = "(";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + ")";
}

}  // namespace

void QuantStatsRecord::update(const at::Tensor& tensor, int pass) {
  at::NoGradGuard no_grad;
  const at::Tensor act = tensor.detach().to(at::kDouble).reshape({tensor.size(0), -1});
  const int64_t numel = act.numel();
  if (pass == 2) {
    const at::Tensor d = act - mean;
    sq_sum += d.square().sum().item<double>();
    abs_sum += d.abs().sum().item<double>();
    pass2_numel += numel;
    std = std::sqrt(sq_sum / static_cast<double>(pass2_numel));
    b = abs_sum / static_cast<double>(pass2_numel);
    return;
  }
  // Per-sample minima and maxima, or the batch's when each sample is one value.
  const int64_t dim = numel == act.size(0) ? 0 : 1;
  const at::Tensor mins = std::get<0>(act.min(dim));
  const at::Tensor maxs = std::get<0>(act.max(dim));
  min = std::min(min, mins.min().item<double>());
  max = std::max(max, maxs.max().item<double>());
  const int64_t k = mins.numel();
  const double s = static_cast<double>(samples);
  avg_min = (avg_min * s + mins.sum().item<double>()) / (s + static_cast<double>(k));
  avg_max = (avg_max * s + maxs.sum().item<double>()) / (s + static_cast<double>(k));
  samples += k;
  const double n = static_cast<double>(total_numel);
  mean = (mean * n + act.sum().item<double>()) / (n + static_cast<double>(numel));
  total_numel += numel;
  if (tensor.dim() >= 2) {
    const int64_t c = tensor.size(1);
    const at::Tensor per = tensor.detach().to(at::kDouble).transpose(0, 1).reshape({c, -1});
    const int64_t k2 = per.size(1);
    if (channel_mean.empty()) channel_mean.assign(static_cast<size_t>(c), 0.0);
    if (static_cast<int64_t>(channel_mean.size()) == c) {
      const at::Tensor sums = per.sum(1).contiguous();
      const double* sp = sums.data_ptr<double>();
      const double before = static_cast<double>(channel_numel);
      const double after = before + static_cast<double>(k2);
      for (int64_t i = 0; i < c; ++i)
        channel_mean[static_cast<size_t>(i)] =
            (channel_mean[static_cast<size_t>(i)] * before + sp[i]) / after;
      channel_numel += k2;
    }
  }
  if (shape.empty()) shape = size_string(tensor);
}

LayerQuantStats& QuantStats::at(const std::string& layer) {
  auto it = layers.find(layer);
  if (it == layers.end()) {
    order.push_back(layer);
    it = layers.emplace(layer, LayerQuantStats{}).first;
  }
  return it->second;
}

const LayerQuantStats* QuantStats::find(const std::string& layer) const {
  auto it = layers.find(layer);
  return it == layers.end() ? nullptr : &it->second;
}

namespace {

void emit_record(YAML::Emitter& e, const QuantStatsRecord& r) {
  e << YAML::BeginMap;
  e << YAML::Key << "min" << YAML::Value << r.min;
  e << YAML::Key << "max" << YAML::Value << r.max;
  e << YAML::Key << "avg_min" << YAML::Value << r.avg_min;
  e << YAML::Key << "avg_max" << YAML::Value << r.avg_max;
  e << YAML::Key << "mean" << YAML::Value << r.mean;
  e << YAML::Key << "std" << YAML::Value << r.std;
  e << YAML::Key << "b" << YAML::Value << r.b;
  e << YAML::Key << "shape" << YAML::Value << r.shape;
  e << YAML::Key << "total_numel" << YAML::Value << r.total_numel;
  if (!r.channel_mean.empty())
    e << YAML::Key << "channel_mean" << YAML::Value << YAML::Flow << r.channel_mean;
  e << YAML::EndMap;
}

QuantStatsRecord read_record(const YAML::Node& n, const std::string& file,
                             const std::string& path) {
  if (!n.IsMap())
    throw InputError(yaml_where(file, n) + ": " + path +
                     " must be a mapping of min, max, avg_min, avg_max, mean, std, b, shape");
  YamlReader r(n, file, path);
  QuantStatsRecord rec;
  rec.min = r.get<double>("min");
  rec.max = r.get<double>("max");
  rec.avg_min = r.get<double>("avg_min");
  rec.avg_max = r.get<double>("avg_max");
  rec.mean = r.get<double>("mean");
  // Older Distiller files have no std: N_STD clipping then refuses them.
  rec.std = r.get<double>("std", std::nan(""));
  rec.b = r.get<double>("b", 0.0);
  rec.shape = r.get<std::string>("shape", std::string());
  rec.total_numel = r.get<int64_t>("total_numel", int64_t{0});
  rec.channel_mean = r.get<std::vector<double>>("channel_mean", std::vector<double>{});
  r.finish();
  if (!(rec.min <= rec.max))
    throw InputError(r.where("min") + ": " + path + ".min is above its max");
  return rec;
}

}  // namespace

void write_quant_stats(const QuantStats& stats, const std::filesystem::path& file) {
  YAML::Emitter e;
  e.SetDoublePrecision(17);
  e << YAML::BeginMap;
  for (const auto& name : stats.order) {
    const auto& l = stats.layers.at(name);
    e << YAML::Key << name << YAML::Value << YAML::BeginMap;
    if (!l.inputs.empty()) {
      e << YAML::Key << "inputs" << YAML::Value << YAML::BeginMap;
      for (const auto& [i, r] : l.inputs) {
        e << YAML::Key << i << YAML::Value;
        emit_record(e, r);
      }
      e << YAML::EndMap;
    }
    if (l.output) {
      e << YAML::Key << "output" << YAML::Value;
      emit_record(e, *l.output);
    }
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
  write_text_atomically(file, std::string(e.c_str()) + "\n");
}

QuantStats read_quant_stats(const std::filesystem::path& path) {
  const std::string file = path.string();
  if (!std::filesystem::is_regular_file(path))
    throw InputError("stats file " + file + " does not exist");
  const YAML::Node root = load_yaml_file(path);
  if (!root.IsMap())
    throw InputError(file + ": a stats file maps layer names to {inputs, output} statistics");
  QuantStats stats;
  for (const auto& kv : root) {
    const std::string name = yaml_scalar(file, kv.first, "stats");
    if (!kv.second.IsMap())
      throw InputError(yaml_where(file, kv.first) + ": " + name +
                       " must be a mapping with inputs and output");
    YamlReader r(kv.second, file, name);
    auto& layer = stats.at(name);
    const YAML::Node inputs = r.node("inputs");
    if (inputs && !inputs.IsNull()) {
      if (!inputs.IsMap())
        throw InputError(r.where("inputs") + ": " + name + ".inputs must map input indices");
      for (const auto& in : inputs) {
        const std::string idx = yaml_scalar(file, in.first, name + ".inputs");
        int64_t i = -1;
        try {
          i = std::stoll(idx);
        } catch (const std::exception&) {
        }
        if (i < 0)
          throw InputError(yaml_where(file, in.first) + ": " + name + ".inputs key '" + idx +
                           "' is not an input index");
        layer.inputs[i] = read_record(in.second, file, name + ".inputs." + idx);
      }
    }
    const YAML::Node out = r.node("output");
    if (out && !out.IsNull()) layer.output = read_record(out, file, name + ".output");
    r.finish();
  }
  return stats;
}

}  // namespace igb::compress
