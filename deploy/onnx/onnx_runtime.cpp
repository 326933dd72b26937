#include "deploy/onnx/onnx_runtime.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/npy.h"

namespace igb::deploy {

namespace fs = std::filesystem;

namespace {

/// `s` as one word of a POSIX shell command line.
std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// Runs `cmd` through the shell; its stdout and stderr together, and its exit status.
std::string run_shell(const std::string& cmd, int& status) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) {
    status = -1;
    return out;
  }
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  status = ::pclose(p);
  return out;
}

/// The last non-empty line of `text` (ort_run.js reports an error, and its JSON, last).
std::string last_line(const std::string& text) {
  std::string last, line;
  std::istringstream in(text);
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

fs::path source_dir_of(const OnnxRuntimeOptions& o) {
  if (!o.source_dir().empty()) return o.source_dir();
  if (const char* env = std::getenv("IGB_SOURCE_DIR"); env && *env) return env;
  return IGB_SOURCE_DIR;
}

}  // namespace

OnnxValueShape onnx_model_input(const fs::path& model) {
  std::ifstream in(model, std::ios::binary);
  if (!in) throw InputError(model.string() + ": cannot open the ONNX model");
  onnx::ModelProto proto;
  if (!proto.ParseFromIstream(&in))
    throw InputError(model.string() + ": not an ONNX model (the protobuf does not parse)");
  // Initializers may be listed as graph inputs by older exporters: the data input is the first
  // input without one.
  std::vector<std::string> initializers;
  for (const auto& i : proto.graph().initializer()) initializers.push_back(i.name());
  for (const auto& v : proto.graph().input()) {
    if (std::find(initializers.begin(), initializers.end(), v.name()) != initializers.end())
      continue;
    OnnxValueShape s;
    s.name = v.name();
    for (const auto& d : v.type().tensor_type().shape().dim())
      s.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    return s;
  }
  throw InputError(model.string() + ": the ONNX model has no data input");
}

OnnxRuntimeRunner::OnnxRuntimeRunner(fs::path model, fs::path work_dir, OnnxRuntimeOptions options)
    : model_(std::move(model)), work_dir_(std::move(work_dir)), options_(std::move(options)) {
  const fs::path source = source_dir_of(options_);
  script_ = source / "scripts" / "ort_run.js";
  if (!fs::exists(script_))
    throw InputError("onnxruntime: " + script_.string() +
                     " not found (set IGB_SOURCE_DIR to igb's source tree)");
  const fs::path ort = source / ".cache" / "onnxruntime" / "node_modules" / "onnxruntime-node";
  if (!fs::exists(ort))
    throw InputError("onnxruntime: onnxruntime-node is not installed in " + ort.string() +
                     " (run scripts/install_onnxruntime.sh)");
  int status = 0;
  run_shell("command -v " + shell_quote(options_.node()), status);
  if (status != 0)
    throw InputError("onnxruntime: '" + options_.node() +
                     "' (Node.js) is not installed (run scripts/install_onnxruntime.sh)");
  input_ = onnx_model_input(model_);
  fs::create_directories(work_dir_);
}

at::Tensor OnnxRuntimeRunner::run(const at::Tensor& x) { return run_all(x).front().second; }

std::vector<std::pair<std::string, at::Tensor>> OnnxRuntimeRunner::run_all(const at::Tensor& x) {
  if (x.dim() != static_cast<int64_t>(input_.dims.size()))
    throw InputError(model_.string() + ": input '" + input_.name + "' has " +
                     std::to_string(input_.dims.size()) + " dims, given " +
                     std::to_string(x.dim()));
  for (int64_t d = 0; d < x.dim(); ++d) {
    const int64_t want = input_.dims[static_cast<size_t>(d)];
    if (want < 0 || want == x.size(d)) continue;
    const std::string flag = d == 0 ? "--dynamic-batch" : d >= 2 ? "--dynamic-hw" : "";
    throw InputError(model_.string() + ": input '" + input_.name + "' has a fixed size " +
                     std::to_string(want) + " in dim " + std::to_string(d) + ", given " +
                     std::to_string(x.size(d)) +
                     (flag.empty() ? "" : " (export with " + flag + " to take any size)"));
  }
  return run_named({{input_.name, x}});
}

std::vector<std::pair<std::string, at::Tensor>> OnnxRuntimeRunner::run_named(
    const std::vector<std::pair<std::string, at::Tensor>>& inputs) {
  if (inputs.empty()) throw InputError(model_.string() + ": onnxruntime needs an input");
  const fs::path out_dir = work_dir_ / "ort_output";
  std::string cmd = shell_quote(options_.node()) + " " + shell_quote(script_.string()) + " " +
                    shell_quote(model_.string());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const fs::path in = work_dir_ / ("ort_input_" + std::to_string(i) + ".npy");
    write_npy(in, inputs[i].second.detach().to(at::kCPU, at::kFloat).contiguous());
    cmd += " --input " + shell_quote(inputs[i].first + "=" + in.string());
  }
  cmd += " --output-dir " + shell_quote(out_dir.string());
  if (options_.threads() > 0) cmd += " --threads " + std::to_string(options_.threads());
  if (options_.repeat() > 0)
    cmd += " --repeat " + std::to_string(options_.repeat()) + " --warmup " +
           std::to_string(options_.warmup());
  int status = 0;
  const std::string log = run_shell(cmd, status);
  const std::string last = last_line(log);
  if (status != 0)
    throw InputError(model_.string() + ": onnxruntime failed: " +
                     (last.empty() ? "exit status " + std::to_string(status) : last));
  nlohmann::json report;
  try {
    report = nlohmann::json::parse(last);
  } catch (const nlohmann::json::exception&) {
    throw InputError(model_.string() + ": onnxruntime printed no report (last line: " + last + ")");
  }
  if (!report.is_object() || !report.contains("outputs") || !report["outputs"].is_array() ||
      report["outputs"].empty())
    throw InputError(model_.string() + ": onnxruntime returned no output");
  std::vector<std::pair<std::string, at::Tensor>> outputs;
  const auto device = inputs.front().second.device();
  try {
    if (options_.repeat() > 0) last_median_ms_ = report.at("latency_ms").at("median").get<double>();
    for (const auto& o : report["outputs"])
      outputs.emplace_back(o.at("name").get<std::string>(),
                           read_npy(o.at("file").get<std::string>()).to(device));
  } catch (const nlohmann::json::exception&) {
    throw InputError(model_.string() + ": onnxruntime's report is malformed: " + last);
  }
  return outputs;
}

}  // namespace igb::deploy
