// Inference latency of igb's eager forward, igb's inference form (runtime/inference_model.h) and
// onnxruntime on the same model, in one run: each zoo model (weights drawn after a fixed seed, eval
// mode, BatchNorm statistics drawn too so folding is exercised) is exported as FP32 ONNX with a
// dynamic batch, then for each batch size the eager forward (no grad), the inference form and
// onnxruntime's CPU session (scripts/ort_run.js through Node.js) run the same input with the same
// number of intra-op threads, W warm-up runs then R timed ones each; medians compared. The eager
// and inference-form passes alternate in blocks of five runs, so a change in the machine's load
// falls on both; the whole comparison, onnxruntime's process included, runs in --rounds rounds
// and each side keeps its best round's median (a shared machine's neighbours slow whole rounds).
// The outputs are compared too, so a wrong export or a wrong plan cannot pass as a fast one. A
// model named onnx:PATH (docs/onnx-import.md) keeps its file's weights, and onnxruntime runs the
// file itself: igb's import against onnxruntime on the same file. With --int8-qdq each model is
// also exported as INT8 Q/DQ (activation ranges calibrated on random inputs, max method) and
// onnxruntime's latency on it is added as a column. With
// --igb-int8 a copy of each model is post-training quantized (symmetric 8-bit grids, weights per
// channel, calibrated on 4 random batches) and igb's inference form runs it in integers
// (InferenceOptions::int8) as a third side of the same alternating blocks; its output is compared
// with the fake-quantized model's. Prints a table and one JSON line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include <torch/optim/sgd.h>
#include <CLI/CLI.hpp>

#include "compress/post_train_quantizer.h"
#include "compress/scheduler.h"
#include "core/host.h"
#include "deploy/onnx/onnx_export.h"
#include "deploy/onnx/onnx_qdq.h"
#include "deploy/onnx/onnx_runtime.h"
#include "graph/summary_graph.h"
#include "models/import/imported_options.h"
#include "models/model.h"
#include "runtime/inference_model.h"

namespace {

namespace fs = std::filesystem;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

struct Row {
  std::string model;
  int64_t batch = 0;
  double torch_ms = 0, ort_ms = 0, max_abs_diff = 0;
  double form_ms = 0, form_rel_diff = 0;      // the inference form
  double int8_ms = 0, int8_max_abs_diff = 0;  // with --int8-qdq
  // With --igb-int8: igb's integer form, and its largest difference from the fake-quantized
  // model relative to that model's largest output.
  double igb_int8_ms = 0, igb_int8_rel_diff = 0;
  int igb_int8_layers = 0;
  // With --igb-int8 and onnxruntime: the same quantized model exported with the CPU Q/DQ
  // placement, and its largest difference from igb's integer output, relative.
  double ort_cpu_int8_ms = 0, ort_cpu_int8_rel_diff = 0;
};

/// Draws every BatchNorm's running statistics (mean in [-0.5, 0.5], variance in [0.5, 1.5]) so
/// that a folded BatchNorm differs from the identity.
void randomize_batchnorm(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& b : model.named_buffers()) {
    const auto& key = b.key();
    if (key.size() > 13 && key.compare(key.size() - 13, 13, ".running_mean") == 0)
      b.value().uniform_(-0.5, 0.5);
    if (key.size() > 12 && key.compare(key.size() - 12, 12, ".running_var") == 0)
      b.value().uniform_(0.5, 1.5);
  }
}

/// Thins `model` as its filter-pruning schedule's first epoch does (Li et al.'s pruned models).
void thin(const igb::models::Model& model, const fs::path& schedule) {
  auto forward = [model](const torch::Tensor& x) { return model->forward(x); };
  auto sched = igb::compress::CompressionScheduler::from_file(schedule, *model, 0.1, nullptr);
  sched->set_tracer(model->input_shape(), forward);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1));
  sched->on_epoch_begin(0, opt);
  sched->on_minibatch_begin({0, 0, 1}, opt);  // thinning acts at the epoch's first minibatch
}

double elapsed_ms(const std::chrono::steady_clock::time_point& t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// The model `name` with the bench's weights: a zoo model's drawn after seed 0, BatchNorm
/// statistics too; an imported file's own.
igb::models::Model bench_model(const std::string& name) {
  torch::manual_seed(0);
  auto model = igb::models::create_model(name, {});
  if (!igb::models::is_imported_model(name)) randomize_batchnorm(*model);
  return model;
}

/// A copy of the model `name` (the same weights as the bench's) post-training quantized by the
/// schedule `yaml`, calibrated on 4 random batches of `shape`.
std::shared_ptr<igb::compress::PostTrainLinearQuantizer> post_train_quantized(
    const std::string& name, const std::vector<int64_t>& shape, const fs::path& yaml,
    igb::models::Model& model) {
  model = bench_model(name);
  model->eval();
  auto m = model;
  auto q = std::make_shared<igb::compress::PostTrainLinearQuantizer>(
      igb::compress::PostTrainOptions::load(yaml.string()), *model, shape,
      [m](const torch::Tensor& x) { return m->forward(x); });
  q->prepare(q->calibrate([&](const auto& f) {
    for (int i = 0; i < 4; ++i) f(torch::rand(shape));
  }),
             yaml.string(), nullptr);
  return q;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "Inference latency of igb's eager forward, igb's inference form and onnxruntime (FP32 ONNX "
      "export)");
  std::string model_list = "resnet20_cifar,mobilenet_v2,resnet18,vgg16,fsrcnn", batch_list = "1,16";
  int64_t threads = 2, repeat = 10, warmup = 2, sr_size = 128, rounds = 3;
  std::string dir = (fs::temp_directory_path() / "igb_bench_inference_latency").string();
  std::string node = "node", source_dir = IGB_SOURCE_DIR;
  app.add_option("--models", model_list, "Comma-separated zoo models or onnx:PATH files")
      ->capture_default_str();
  app.add_option("--batches", batch_list, "Comma-separated batch sizes")->capture_default_str();
  app.add_option("--threads", threads, "Intra-op threads of every side")->capture_default_str();
  app.add_option("--repeat", repeat, "Timed runs per side (the median is reported)")
      ->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed runs before them")->capture_default_str();
  app.add_option("--rounds", rounds,
                 "Rounds of every side in turn; each side's best round median is reported")
      ->capture_default_str();
  app.add_option("--sr-size", sr_size, "Height and width of a super-resolution model's input")
      ->capture_default_str();
  app.add_option("--dir", dir, "Folder for the exported models and tensors")->capture_default_str();
  app.add_option("--node", node, "Node.js executable")->capture_default_str();
  app.add_option("--source-dir", source_dir, "igb's source tree (for scripts/ort_run.js)")
      ->capture_default_str();
  bool int8 = false, no_ort = false, show_steps = false;
  app.add_flag("--steps", show_steps, "Print the inference form's steps and their median times");
  app.add_flag("--int8-qdq", int8,
               "Also time onnxruntime on an INT8 Q/DQ export (calibrated on 8 random inputs)");
  app.add_flag("--no-onnxruntime", no_ort, "Time igb's two forms only");
  bool igb_int8 = false;
  app.add_flag("--igb-int8", igb_int8,
               "Also time igb's integer form of each model post-training quantized by "
               "schedules/classify/resnet20_ptq_int8.yaml (symmetric 8 bits, weights per channel)");
  std::string engine = "onednn";
  app.add_option("--int8-engine", engine,
                 "Whose integer kernels the igb INT8 side runs: onednn, qnnpack or auto (both "
                 "timed when the plan is made, the faster kept)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "onednn", "qnnpack"}));
  std::vector<std::string> thinned = {
      "resnet56_cifar=schedules/classify/resnet56_filter_rank.yaml"};
  app.add_option("--thinned", thinned,
                 "Also MODEL=SCHEDULE: the model thinned by its schedule's pruning and thinning "
                 "epoch (a path relative to --source-dir); none: \"\"")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (threads < 1 || repeat < 1 || warmup < 0 || rounds < 1) {
    std::cerr << "--threads, --repeat and --rounds must be at least 1, --warmup at least 0\n";
    return 2;
  }
  torch::set_num_threads(static_cast<int>(threads));
  igb::tune_allocator();
  igb::models::register_builtin_models();
  fs::create_directories(dir);
  const auto ort_options = igb::deploy::OnnxRuntimeOptions()
                               .node(node)
                               .source_dir(source_dir)
                               .threads(threads)
                               .repeat(repeat)
                               .warmup(warmup);

  std::vector<Row> rows;
  try {
    auto models = split(model_list);
    for (const auto& t : thinned)
      if (!t.empty()) models.push_back(t);
    for (const auto& name : models) {
      const auto at = name.find('=');
      const bool imported = igb::models::is_imported_model(name);
      const std::string label =
          imported ? fs::path(name).stem().string()
                   : (at == std::string::npos ? name : name.substr(0, at) + "_thinned");
      auto model = bench_model(name.substr(0, at));
      if (at != std::string::npos) thin(model, fs::path(source_dir) / name.substr(at + 1));
      model->eval();
      auto shape = model->input_shape();
      const std::string family = imported
                                     ? model->options_json().value("family", "")
                                     : igb::models::model_registry().get(name.substr(0, at)).family;
      if (family == "sr") shape[2] = shape[3] = sr_size;
      const auto forward = [model](const torch::Tensor& x) { return model->forward(x); };
      const auto graph = igb::graph::SummaryGraph::build(*model, shape, forward, label);
      auto form = igb::runtime::InferenceModel::make(model, forward, label);
      igb::models::Model quantized;
      std::shared_ptr<igb::compress::PostTrainLinearQuantizer> ptq;
      std::shared_ptr<igb::runtime::InferenceModel> int8_form;
      bool int8_export = false;  // onnxruntime runs the quantized model's CPU Q/DQ export
      if (igb_int8 && at == std::string::npos) {
        ptq = post_train_quantized(
            name, shape, fs::path(source_dir) / "schedules/classify/resnet20_ptq_int8.yaml",
            quantized);
        igb::runtime::InferenceOptions o;
        o.int8 = true;
        o.int8_engine = engine == "qnnpack" ? igb::runtime::Int8Engine::kQnnpack
                        : engine == "auto"  ? igb::runtime::Int8Engine::kAuto
                                            : igb::runtime::Int8Engine::kOneDnn;
        const igb::runtime::InferenceModel::Forward fake = [ptq](const torch::Tensor& x) {
          return ptq->forward(x);
        };
        int8_form = igb::runtime::InferenceModel::make(quantized, fake, label, o);
        int8_export = !no_ort;
        if (int8_export) try {
            const auto qgraph = igb::graph::SummaryGraph::build(*quantized, shape, fake, label);
            auto calibration =
                std::make_shared<igb::deploy::OnnxCalibration>(igb::deploy::calibrate_onnx(
                    *quantized, qgraph,
                    [&](const std::function<void(const at::Tensor&)>& f) {
                      for (int i = 0; i < 4; ++i) f(torch::rand(shape));
                    },
                    "max", 99.99));
            igb::deploy::export_onnx(*quantized, qgraph,
                                     igb::deploy::OnnxExportOptions()
                                         .dynamic_batch(true)
                                         .precision(igb::deploy::OnnxPrecision::kInt8)
                                         .qdq_placement(igb::deploy::QdqPlacement::kCpu)
                                         .calibration(calibration),
                                     fs::path(dir) / (label + ".int8cpu.onnx"));
          } catch (const std::exception& e) {
            // igb's exporter cannot write every imported op: that side stays empty, said why.
            std::cerr << label << ": no onnxruntime INT8 side: " << e.what() << "\n";
            int8_export = false;
          }
      }
      const fs::path onnx =
          imported ? fs::path(name.substr(name.find(':') + 1)) : fs::path(dir) / (label + ".onnx");
      if (!no_ort && !imported)
        igb::deploy::export_onnx(*model, graph,
                                 igb::deploy::OnnxExportOptions().dynamic_batch(true), onnx);
      const fs::path onnx_int8 = fs::path(dir) / (label + ".int8.onnx");
      if (int8 && !no_ort) {
        auto calibration =
            std::make_shared<igb::deploy::OnnxCalibration>(igb::deploy::calibrate_onnx(
                *model, graph,
                [&](const std::function<void(const at::Tensor&)>& f) {
                  for (int i = 0; i < 8; ++i) f(torch::rand(shape));
                },
                "max", 99.99));
        igb::deploy::export_onnx(*model, graph,
                                 igb::deploy::OnnxExportOptions()
                                     .dynamic_batch(true)
                                     .precision(igb::deploy::OnnxPrecision::kInt8)
                                     .calibration(calibration),
                                 onnx_int8);
      }
      for (const auto& b : split(batch_list)) {
        Row row;
        row.model = label;
        row.batch = std::stoll(b);
        auto s = shape;
        s[0] = row.batch;
        const auto x = torch::rand(s);
        torch::Tensor y, z, z8;
        // Each round times every side (igb's in blocks, then onnxruntime's process); a side's
        // figure is its best round's median: a neighbour's load on a shared machine slows whole
        // rounds, not one side's runs alone.
        const auto keep = [](double& best, double ms) {
          best = best > 0 ? std::min(best, ms) : ms;
        };
        for (int64_t round = 0; round < rounds; ++round) {
          std::vector<double> eager_times, form_times, int8_times;
          {
            torch::NoGradGuard no_grad;
            form->prepare(s);
            if (int8_form) int8_form->prepare(s);
            for (int64_t i = 0; i < warmup; ++i) {
              y = model->forward(x);
              z = form->forward(x);
              if (int8_form) z8 = int8_form->forward(x);
            }
            // Blocks of up to five runs of each side in turn: a change of the machine's load falls
            // on both, and each side runs with its own weights in the caches, as it would alone.
            for (int64_t i = 0; i < repeat; i += 5) {
              const int64_t n = std::min<int64_t>(5, repeat - i);
              for (int64_t k = 0; k < n; ++k) {
                const auto t0 = std::chrono::steady_clock::now();
                y = model->forward(x);
                eager_times.push_back(elapsed_ms(t0));
              }
              for (int64_t k = 0; k < n; ++k) {
                const auto t0 = std::chrono::steady_clock::now();
                z = form->forward(x);
                form_times.push_back(elapsed_ms(t0));
              }
              for (int64_t k = 0; int8_form && k < n; ++k) {
                const auto t0 = std::chrono::steady_clock::now();
                z8 = int8_form->forward(x);
                int8_times.push_back(elapsed_ms(t0));
              }
            }
            if (int8_form) {
              const auto fake = ptq->forward(x);
              keep(row.igb_int8_ms, median(int8_times));
              row.igb_int8_rel_diff = (z8 - fake).abs().max().item<double>() /
                                      std::max(1e-30, fake.abs().max().item<double>());
              for (const auto& step : int8_form->steps(s)) row.igb_int8_layers += step.int8;
            }
          }
          keep(row.torch_ms, median(eager_times));
          keep(row.form_ms, median(form_times));
          row.form_rel_diff =
              (z - y).abs().max().item<double>() / std::max(1e-30, y.abs().max().item<double>());
          // onnxruntime's median latency on `model`, and the largest difference from LibTorch.
          auto ort = [&](const fs::path& model, double& ms, double& diff) {
            igb::deploy::OnnxRuntimeRunner runner(model, dir, ort_options);
            diff = (runner.run(x) - y).abs().max().item<double>();
            keep(ms, runner.last_median_ms());
          };
          if (!no_ort) ort(onnx, row.ort_ms, row.max_abs_diff);
          if (int8 && !no_ort) ort(onnx_int8, row.int8_ms, row.int8_max_abs_diff);
          if (int8_form && int8_export) {
            igb::deploy::OnnxRuntimeRunner runner(fs::path(dir) / (label + ".int8cpu.onnx"), dir,
                                                  ort_options);
            row.ort_cpu_int8_rel_diff = (runner.run(x) - z8).abs().max().item<double>() /
                                        std::max(1e-30, z8.abs().max().item<double>());
            keep(row.ort_cpu_int8_ms, runner.last_median_ms());
          }
        }
        rows.push_back(row);
        std::cerr << label << " batch " << row.batch << ": eager " << fixed(row.torch_ms, 2)
                  << " ms, inference form " << fixed(row.form_ms, 2) << " ms, onnxruntime "
                  << fixed(row.ort_ms, 2) << " ms"
                  << (int8 ? ", onnxruntime INT8 " + fixed(row.int8_ms, 2) + " ms" : "")
                  << (int8_form ? ", igb INT8 " + fixed(row.igb_int8_ms, 2) + " ms" : "")
                  << (int8_form && !no_ort
                          ? ", onnxruntime INT8 (CPU Q/DQ) " + fixed(row.ort_cpu_int8_ms, 2) + " ms"
                          : "")
                  << "\n";
        if (int8_form && row.batch == 1) std::cerr << "  " << int8_form->summary(s) << "\n";
        if (row.batch == 1) std::cerr << "  " << form->summary(s) << "\n";
        if (show_steps) {
          const auto steps = form->steps(s);
          const auto times = form->time_steps(x, static_cast<int>(repeat));
          for (size_t k = 0; k < steps.size(); ++k)
            std::cerr << "    " << fixed(times[k], 3) << " ms  " << steps[k].kind << "  "
                      << steps[k].name
                      << (steps[k].implementation.empty() ? ""
                                                          : "  [" + steps[k].implementation + "]")
                      << "\n";
          if (int8_form) {
            const auto steps8 = int8_form->steps(s);
            const auto times8 = int8_form->time_steps(x, static_cast<int>(repeat));
            std::cerr << "  INT8:\n";
            for (size_t k = 0; k < steps8.size(); ++k)
              std::cerr << "    " << fixed(times8[k], 3) << " ms  " << steps8[k].kind
                        << (steps8[k].int8 ? " (INT8)  " : "  ") << steps8[k].name << "\n";
          }
        }
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "inference_latency: " << e.what() << "\n";
    return 1;
  }

  std::cout << "FP32 inference, " << threads << " threads, median of " << repeat << " runs after "
            << warmup << " warm-up runs per side, best of " << rounds << " rounds\n"
            << "| model | batch | eager ms | inference form ms | form/eager | onnxruntime ms | "
               "form/ort | form rel. diff | ort max |diff| |"
            << (int8 ? " ort INT8 ms | INT8/FP32 (ort) | INT8 max |diff| |" : "")
            << (igb_int8 ? " igb INT8 ms | form/INT8 | INT8 layers | INT8 rel. diff | ort INT8 "
                           "(CPU Q/DQ) ms | ort FP32/INT8 | ort INT8 rel. diff |"
                         : "")
            << "\n"
            << "|---|---|---|---|---|---|---|---|---|" << (int8 ? "---|---|---|" : "")
            << (igb_int8 ? "---|---|---|---|---|---|---|" : "") << "\n";
  nlohmann::json j = {{"bench", "inference_latency"},
                      {"threads", threads},
                      {"repeat", repeat},
                      {"warmup", warmup},
                      {"rounds", rounds},
                      {"int8_qdq", int8},
                      {"rows", nlohmann::json::array()}};
  for (const auto& r : rows) {
    auto sci = [](double v) {
      std::ostringstream o;
      o << std::setprecision(2) << v;
      return o.str();
    };
    std::cout << "| " << r.model << " | " << r.batch << " | " << fixed(r.torch_ms, 2) << " | "
              << fixed(r.form_ms, 2) << " | " << fixed(r.form_ms / r.torch_ms, 2) << " | "
              << fixed(r.ort_ms, 2) << " | " << fixed(r.form_ms / r.ort_ms, 2) << " | "
              << sci(r.form_rel_diff) << " | " << sci(r.max_abs_diff) << " |";
    if (int8)
      std::cout << " " << fixed(r.int8_ms, 2) << " | " << fixed(r.int8_ms / r.ort_ms, 2) << " | "
                << sci(r.int8_max_abs_diff) << " |";
    if (igb_int8)
      std::cout << " " << fixed(r.igb_int8_ms, 2) << " | "
                << fixed(r.igb_int8_ms > 0 ? r.form_ms / r.igb_int8_ms : 0, 2) << " | "
                << r.igb_int8_layers << " | " << sci(r.igb_int8_rel_diff) << " | "
                << fixed(r.ort_cpu_int8_ms, 2) << " | "
                << fixed(r.ort_cpu_int8_ms > 0 ? r.ort_ms / r.ort_cpu_int8_ms : 0, 2) << " | "
                << sci(r.ort_cpu_int8_rel_diff) << " |";
    std::cout << "\n";
    nlohmann::json row = {{"model", r.model},
                          {"batch", r.batch},
                          {"eager_ms", r.torch_ms},
                          {"inference_form_ms", r.form_ms},
                          {"form_eager_ratio", r.form_ms / r.torch_ms},
                          {"onnxruntime_ms", r.ort_ms},
                          {"form_ort_ratio", r.form_ms / r.ort_ms},
                          {"form_rel_diff", r.form_rel_diff},
                          {"ort_max_abs_diff", r.max_abs_diff}};
    if (int8) {
      row["onnxruntime_int8_ms"] = r.int8_ms;
      row["int8_fp32_ratio"] = r.int8_ms / r.ort_ms;
      row["int8_max_abs_diff"] = r.int8_max_abs_diff;
    }
    if (igb_int8) {
      row["igb_int8_ms"] = r.igb_int8_ms;
      row["form_igb_int8_ratio"] = r.igb_int8_ms > 0 ? r.form_ms / r.igb_int8_ms : 0;
      row["igb_int8_layers"] = r.igb_int8_layers;
      row["igb_int8_rel_diff"] = r.igb_int8_rel_diff;
      row["onnxruntime_cpu_int8_ms"] = r.ort_cpu_int8_ms;
      row["onnxruntime_cpu_int8_rel_diff"] = r.ort_cpu_int8_rel_diff;
    }
    j["rows"].push_back(row);
  }
  std::cout << j.dump() << std::endl;
  return 0;
}
