#include "deploy/onnx/onnx_trt.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "core/fs.h"

namespace igb::deploy {

namespace fs = std::filesystem;

namespace {

bool is_number(const std::string& d) {
  return !d.empty() && d.find_first_not_of("0123456789") == std::string::npos;
}

nlohmann::ordered_json dims_json(const std::vector<std::string>& dims) {
  auto j = nlohmann::ordered_json::array();
  for (const auto& d : dims)
    if (is_number(d))
      j.push_back(std::stoll(d));
    else
      j.push_back(d);
  return j;
}

std::string trt_shape(const std::string& name, const Shape& s) {
  std::string out = name + ":";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

// Single-quoted for the shell.
std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string replace_extension(const fs::path& p, const std::string& ext) {
  return p.stem().string() + ext;
}

}  // namespace

std::vector<TrtInputProfile> trt_profiles(const OnnxExportReport& report,
                                          const std::vector<Shape>& traced,
                                          const TrtProfileOptions& options) {
  if (traced.size() != report.inputs.size())
    throw InputError(report.path.string() + ": " + std::to_string(report.inputs.size()) +
                     " inputs but " + std::to_string(traced.size()) + " traced shapes");
  if (options.min_batch() < 1 || options.min_batch() > options.opt_batch() ||
      options.opt_batch() > options.max_batch())
    throw InputError("TensorRT profile batch sizes must satisfy 1 <= min <= opt <= max, not " +
                     std::to_string(options.min_batch()) + ", " +
                     std::to_string(options.opt_batch()) + ", " +
                     std::to_string(options.max_batch()));
  if (options.min_spatial() < 1 || options.max_spatial_factor() < 1 || options.max_spatial() < 1)
    throw InputError("TensorRT profile spatial sizes and factor must be positive");
  std::vector<TrtInputProfile> out;
  for (size_t i = 0; i < traced.size(); ++i) {
    const auto& io = report.inputs[i];
    if (io.dims.size() != traced[i].size())
      throw InputError(report.path.string() + ": input " + io.name + " has " +
                       std::to_string(io.dims.size()) + " dims, its traced shape " +
                       shape_to_string(traced[i]));
    TrtInputProfile p;
    p.name = io.name;
    for (size_t d = 0; d < io.dims.size(); ++d) {
      const int64_t t = traced[i][d];
      if (is_number(io.dims[d])) {
        p.min.push_back(t);
        p.opt.push_back(t);
        p.max.push_back(t);
      } else if (io.dims[d] == "N") {
        p.dynamic = true;
        p.min.push_back(options.min_batch());
        p.opt.push_back(options.opt_batch());
        p.max.push_back(options.max_batch());
      } else {
        p.dynamic = true;
        p.min.push_back(std::min(options.min_spatial(), t));
        p.opt.push_back(t);
        p.max.push_back(
            std::max(t, std::min(options.max_spatial_factor() * t, options.max_spatial())));
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

namespace {

/// What the trtexec script and the JSON beside the model say of it.
struct TrtEngine {
  std::string onnx_name, plan_name, script_name, precision, version;
  std::vector<TrtInputProfile> profiles;
};

/// The --minShapes, --optShapes and --maxShapes values of the dynamic inputs (empty: none).
struct ShapeFlags {
  std::string mins, opts, maxs;
};
ShapeFlags shape_flags(const std::vector<TrtInputProfile>& profiles) {
  ShapeFlags f;
  for (const auto& p : profiles) {
    if (!p.dynamic) continue;
    const std::string sep = f.mins.empty() ? "" : ",";
    f.mins += sep + trt_shape(p.name, p.min);
    f.opts += sep + trt_shape(p.name, p.opt);
    f.maxs += sep + trt_shape(p.name, p.max);
  }
  return f;
}

/// One trtexec command of the script, with its precision flags.
std::string trtexec_command(const TrtEngine& e, const ShapeFlags& shapes,
                            const std::string& precision_flags, int64_t workspace_mib) {
  std::string c = "  exec \"${TRTEXEC:-trtexec}\" --onnx=\"$here\"/" + sh_quote(e.onnx_name) +
                  " --saveEngine=\"$here\"/" + sh_quote(e.plan_name) + " \\\n";
  if (!precision_flags.empty()) c += "    " + precision_flags + " \\\n";
  if (!shapes.mins.empty())
    c += "    " + sh_quote("--minShapes=" + shapes.mins) + " \\\n    " +
         sh_quote("--optShapes=" + shapes.opts) + " \\\n    " +
         sh_quote("--maxShapes=" + shapes.maxs) + " \\\n";
  c += "    --memPoolSize=workspace:" + std::to_string(workspace_mib) + " \"$@\"\n";
  return c;
}

/// The script that builds the engine with TensorRT 10 (default) or 8.
std::string trtexec_script(const OnnxExportReport& report, const TrtEngine& e,
                           const TrtProfileOptions& options) {
  const ShapeFlags shapes = shape_flags(e.profiles);
  const std::string flags8 = e.precision == "fp16"   ? "--fp16"
                             : e.precision == "int8" ? "--int8 --fp16"
                                                     : "";
  const std::string flags10 = e.precision == "fp16"   ? "--fp16"
                              : e.precision == "int8" ? "--stronglyTyped"
                                                      : "";
  std::ostringstream s;
  s << "#!/bin/sh\n"
    << "# Builds a TensorRT engine, " << e.plan_name << ", from " << e.onnx_name
    << " with trtexec.\n"
    << "# Written by igb-tools export-onnx (" << options.producer_name() << " " << e.version
    << "): " << e.precision << ", ONNX opset " << report.opset << ".\n";
  for (const auto& io : report.inputs) s << "#   input  " << onnx_io_string(io) << "\n";
  for (const auto& io : report.outputs) s << "#   output " << onnx_io_string(io) << "\n";
  if (!shapes.mins.empty()) {
    s << "# Optimization profile (min, opt, max): the batch N " << options.min_batch() << ", "
      << options.opt_batch() << ", " << options.max_batch() << ";\n"
      << "# a symbolic height or width " << options.min_spatial()
      << " (or the traced size if smaller), the traced size,\n# " << options.max_spatial_factor()
      << "x the traced size capped at " << options.max_spatial()
      << " (or the traced size if larger).\n";
  } else {
    s << "# Every dim is fixed: no optimization profile is needed.\n";
  }
  if (e.precision == "fp16")
    s << "# FP16: --fp16 lets TensorRT run layers in half precision.\n";
  else if (e.precision == "int8")
    s << "# INT8 Q/DQ: the scales are in the model; TensorRT 10 takes the types from it\n"
      << "# (--stronglyTyped), TensorRT 8 needs --int8 (and --fp16 for layers left unquantized).\n";
  s << "# Usage: sh " << e.script_name << " [10|8] [trtexec flags...]\n"
    << "#   10 (default) for TensorRT 10.x, 8 for TensorRT 8.4 to 8.6 (--memPoolSize needs 8.4).\n"
    << "#   TRTEXEC names the trtexec binary (default: trtexec on the PATH).\n"
    << "set -e\n"
    << "here=$(cd \"$(dirname \"$0\")\" && pwd)\n"
    << "trt=10\n"
    << "case \"$1\" in\n"
    << "  8 | 10) trt=$1; shift ;;\n"
    << "esac\n"
    << "if [ \"$trt\" = 8 ]; then\n"
    << trtexec_command(e, shapes, flags8, options.workspace_mib()) << "else\n"
    << trtexec_command(e, shapes, flags10, options.workspace_mib()) << "fi\n";
  return s.str();
}

/// The JSON beside the model: its inputs with their profiles, outputs and INT8 scales.
nlohmann::ordered_json trt_json(const OnnxExportReport& report, const TrtEngine& e,
                                const TrtProfileOptions& options) {
  nlohmann::ordered_json j;
  j["model"] = e.onnx_name;
  j["engine"] = e.plan_name;
  j["trtexec_script"] = e.script_name;
  j["producer"] = {{"name", options.producer_name()}, {"version", e.version}};
  j["opset"] = report.opset;
  j["precision"] = e.precision;
  j["inputs"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < report.inputs.size(); ++i) {
    nlohmann::ordered_json in = {{"name", report.inputs[i].name},
                                 {"shape", dims_json(report.inputs[i].dims)}};
    const auto& p = e.profiles[i];
    if (p.dynamic) in["profile"] = {{"min", p.min}, {"opt", p.opt}, {"max", p.max}};
    j["inputs"].push_back(in);
  }
  j["outputs"] = nlohmann::ordered_json::array();
  for (const auto& io : report.outputs)
    j["outputs"].push_back({{"name", io.name}, {"shape", dims_json(io.dims)}});
  if (!report.activation_scales.empty() || !report.weight_scales.empty()) {
    // Symmetric int8 with zero point 0: x = q * scale.
    nlohmann::ordered_json q = {{"zero_point", 0}};
    q["activations"] = nlohmann::ordered_json::object();
    for (const auto& [name, scale] : report.activation_scales) q["activations"][name] = scale;
    q["weights"] = nlohmann::ordered_json::object();
    for (const auto& [name, scales] : report.weight_scales) q["weights"][name] = scales;
    j["quantization"] = q;
  }
  if (!report.lines.empty()) j["notes"] = report.lines;
  return j;
}

/// Writes `text` to `path` atomically as an executable script.
void write_script(const fs::path& path, const std::string& text) {
  write_atomically(path, [&](const fs::path& tmp) {
    write_file_bytes(tmp, text, path);
    fs::permissions(tmp,
                    fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec |
                        fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                        fs::perms::others_read,
                    fs::perm_options::replace);
  });
}

}  // namespace

TrtFiles write_trt_files(const OnnxExportReport& report, const std::vector<Shape>& traced,
                         const TrtProfileOptions& options) {
  TrtEngine e;
  e.profiles = trt_profiles(report, traced, options);
  e.precision = report.precision.empty() ? "fp32" : report.precision;
  if (e.precision != "fp32" && e.precision != "fp16" && e.precision != "int8")
    throw InputError(report.path.string() + ": unknown precision '" + e.precision +
                     "'; valid: fp32, fp16, int8");
  const fs::path dir = report.path.parent_path();
  e.onnx_name = report.path.filename().string();
  e.plan_name = replace_extension(report.path, ".plan");
  TrtFiles files;
  files.script = dir / replace_extension(report.path, ".trtexec.sh");
  files.json = dir / replace_extension(report.path, ".json");
  if (files.json == report.path || files.script == report.path)
    throw InputError(report.path.string() + ": name the ONNX file F.onnx, so that " +
                     files.json.filename().string() + " and " + files.script.filename().string() +
                     " do not replace it");
  e.script_name = files.script.filename().string();
  e.version = options.producer_version().empty() ? IGB_VERSION : options.producer_version();
  write_script(files.script, trtexec_script(report, e, options));
  write_text_atomically(files.json, trt_json(report, e, options).dump(2) + "\n");
  return files;
}

}  // namespace igb::deploy
