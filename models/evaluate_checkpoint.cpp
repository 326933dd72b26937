#include "models/evaluate_checkpoint.h"

#include <chrono>
#include <filesystem>
#include <iostream>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/table.h"
#include "core/tensor_util.h"
#include "core/train_mode_guard.h"
#include "data/datasets.h"
#include "models/model_from_checkpoint.h"
#include "models/report_sets.h"
#include "models/trainer.h"

namespace igb::models {

namespace fs = std::filesystem;

namespace {

std::string cell(const Metrics& m, const EvalLayout::Column& c, int min_digits = 0) {
  return fixed(metric(m, c.key), std::max(c.digits, min_digits));
}

/// The tabulated metrics of `m` as JSON, under `prefix` ("bicubic_").
nlohmann::json metrics_json(const Metrics& m, const std::string& prefix = "") {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, value] : m) j[prefix + key] = value;
  return j;
}

/// Per-image results: a row per image and the mean, with the baseline beside; then the gain.
void print_items(const Evaluation& ev, const EvalLayout& layout, const TestRequest& request) {
  Table table;
  table.columns = {"Image"};
  for (const auto& c : layout.columns) table.columns.push_back(c.title);
  for (const auto& c : layout.columns) table.columns.push_back(layout.baseline + " " + c.title);
  auto row = [&](const std::string& name, const Metrics& m, const Metrics& b) {
    std::vector<std::string> r = {name};
    for (const auto& c : layout.columns) r.push_back(cell(m, c));
    for (const auto& c : layout.columns) r.push_back(cell(b, c));
    table.rows.push_back(r);
  };
  for (const auto& item : ev.items) row(item.name, item.metrics, item.baseline);
  row("mean", ev.metrics, ev.baseline);
  std::cout << table.to_text();
  const auto& primary = layout.columns.front();
  std::cout << primary.title.substr(0, primary.title.find(' ')) << " gain over "
            << layout.baseline_phrase << ": "
            << fixed(metric(ev.metrics, primary.key) - metric(ev.baseline, primary.key),
                     primary.digits)
            << " " << layout.unit << " (" << layout.note
            << (request.self_ensemble ? layout.separator + "x8 self-ensemble" : "") << ")\n";
}

/// Whole-set results: one row for the checkpoint, then its metrics on one line.
void print_totals(const Evaluation& ev, const EvalLayout& layout, const TestRequest& request,
                  int64_t epoch) {
  Table table;
  table.columns = {"Checkpoint", "Epoch", "Images"};
  std::vector<std::string> r = {request.checkpoint, std::to_string(epoch),
                                std::to_string(ev.count)};
  for (const auto& c : layout.columns) {
    table.columns.push_back(c.title);
    r.push_back(cell(ev.metrics, c));
  }
  table.rows.push_back(r);
  std::cout << table.to_text() << "==> ";
  for (size_t i = 0; i < layout.columns.size(); ++i) {
    const auto& c = layout.columns[i];
    std::cout << (i ? "    " : "") << c.title.substr(0, c.title.find(' ')) << ": "
              << fixed(metric(ev.metrics, c.key), 3);
  }
  std::cout << std::endl;
}

/// A comparison of the checkpoint's own results with another form of the model on the same data:
/// the two rows and their difference, each metric with at least `min_digits` decimals.
void print_comparison(const std::string& title, const std::string& own_label, const Evaluation& own,
                      const std::string& other_label, const Evaluation& other,
                      const EvalLayout& layout, int extra_digits) {
  Table t;
  t.columns = {"Model"};
  for (const auto& c : layout.columns) t.columns.push_back(c.title);
  std::vector<std::string> a = {own_label}, b = {other_label}, d = {"difference"};
  for (const auto& c : layout.columns) {
    a.push_back(cell(own.metrics, c, extra_digits));
    b.push_back(cell(other.metrics, c, extra_digits));
    d.push_back(
        fixed(metric(other.metrics, c.key) - metric(own.metrics, c.key), c.digits + extra_digits));
  }
  t.rows = {a, b, d};
  std::cout << title << "\n" << t.to_text();
}

/// The shown metrics of `ev` as JSON ({"psnr": ..., "ssim": ...}).
nlohmann::json shown_json(const Evaluation& ev, const EvalLayout& layout) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& c : layout.columns) j[c.key] = metric(ev.metrics, c.key);
  return j;
}

/// test_summary.json's per-image rows: each image's metrics and its baseline's.
nlohmann::json per_image_json(const Evaluation& ev, const EvalLayout& layout) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& item : ev.items) {
    nlohmann::json j = {{"image", item.name}};
    j.update(metrics_json(item.metrics));
    j.update(metrics_json(item.baseline, baseline_key(layout) + "_"));
    items.push_back(j);
  }
  return items;
}

nlohmann::json summary_of(const std::string& family, const TestRequest& request,
                          const Checkpoint& ckpt, const Evaluator& evaluator, const Evaluation& ev,
                          double seconds) {
  const auto& layout = evaluator.layout();
  nlohmann::json s = {{"optform", family},
                      {"checkpoint", request.checkpoint},
                      {"model", ckpt.meta().model},
                      {"epoch", ckpt.meta().epoch}};
  s.update(evaluator.summary_fields());
  s["images"] = ev.count;
  s.update(metrics_json(ev.metrics));
  if (!layout.baseline.empty()) {
    s.update(metrics_json(ev.baseline, baseline_key(layout) + "_"));
    s["self_ensemble"] = request.self_ensemble;
  }
  if (!ev.items.empty()) s["per_image"] = per_image_json(ev, layout);
  s["seconds"] = seconds;
  return s;
}

/// The data a checkpoint is tested on without --data: the dataset its run trained on when that
/// is one of the family's named datasets (photos, digits), else synthetic (a folder may be gone).
std::string default_test_data(const std::string& family, const nlohmann::json& run_config) {
  if (run_config.is_object() && run_config.contains("data") && run_config["data"].is_string()) {
    const auto name = run_config["data"].get<std::string>();
    const auto names = data::dataset_names(family);
    if (std::find(names.begin(), names.end(), name) != names.end()) return name;
  }
  return "synthetic";
}

/// "Photos (--data photos): 10 evaluation images of photos (x3)" above a table of a family
/// with report sets.
void print_heading(const std::string& data, const Evaluator& evaluator) {
  const auto& layout = evaluator.layout();
  if (layout.report_sets.empty()) return;
  std::string title = data;
  for (const auto& set : layout.report_sets)
    if (set.key == data) title = set.title;
  const std::string what = evaluator.description();
  std::cout << title << " (--data " << data << ")" << (what.empty() ? "" : ": " + what) << "\n";
}

/// The report sets besides the data tested on: a table each, and their keys for
/// test_summary.json ("photos_psnr", "photos_bicubic_psnr", "photos_per_image").
nlohmann::json evaluate_report_sets(const std::string& family, const TestRequest& request,
                                    const EvalData& data, const EvaluatorFactory& make,
                                    ModelImpl& model, const Forward& forward, RunContext& ctx) {
  nlohmann::json out = nlohmann::json::object();
  const auto names = report_set_names(family, data.data, request.also_eval,
                                      [&](const std::string& line) { ctx.logger->info(line); });
  for (const auto& name : names) {
    EvalData d = data;
    d.data = name;
    d.batches = 0;
    d.options = nlohmann::json::object();  // not the tested data's folders
    const auto evaluator = make(model, d, ctx.device);
    const auto ev = evaluator->evaluate(forward);
    const auto& layout = evaluator->layout();
    std::cout << "\n";
    print_heading(name, *evaluator);
    print_items(ev, layout, request);
    out.update(report_set_keys(name, ev, layout));
    out[name + "_per_image"] = per_image_json(ev, layout);
  }
  return out;
}

/// --int8: the comparison of the integer model with the fake-quantized one it runs, printed, and
/// test_summary.json's "int8".
nlohmann::json int8_json(const Evaluation& fake, const Evaluation& int8, const EvalLayout& layout,
                         const std::string& what, const std::string& fake_label) {
  print_comparison("INT8 execution: " + what, fake_label, fake, "INT8", int8, layout, 3);
  const auto& primary = layout.columns.front().key;
  nlohmann::json j = {{"runtime", what}};
  j.update(shown_json(int8, layout));
  j[primary + "_difference"] = metric(int8.metrics, primary) - metric(fake.metrics, primary);
  return j;
}

/// --int8-weights 7 narrowing a schedule's 8-bit weights: the schedule's own post-training
/// quantization of a fresh copy of the checkpoint's model, on the statistics the narrowed one
/// used, scored on the same data next to it; returns "int8_weights" (what the narrower grid gives
/// up).
nlohmann::json narrowed_weights_json(const TestRequest& request, const Checkpoint& ckpt,
                                     const Evaluator& evaluator, const Evaluation& narrowed,
                                     const nlohmann::json& info, const fs::path& out,
                                     RunContext& ctx) {
  Model own = model_from_checkpoint(ckpt);
  own->to(ctx.device);
  TrainModeGuard eval(*own, /*train=*/false);
  compress::QuantizeEvalRequest schedule_bits = request.quantize_eval;
  schedule_bits.weight_bits = 0;
  if (info.contains("stats_written")) schedule_bits.stats_file = info["stats_written"];
  nlohmann::json own_info;
  auto q = compress::quantize_for_eval(
      schedule_bits, *own, own->input_shape(), [&](const at::Tensor& x) { return own->forward(x); },
      [&](const compress::PostTrainLinearQuantizer::Forward& f, int64_t n) {
        evaluator.for_each_input(n, [&](const at::Tensor& x) { f(x); });
      },
      out, *ctx.logger, &own_info);
  const auto ev = evaluator.evaluate([&](const at::Tensor& x) { return q->forward(x); });
  const int64_t bits = info["int8_weights_narrowed"].get<int64_t>();
  const std::string label = std::to_string(bits) + "-bit weights";
  print_comparison("Weights on " + std::to_string(bits) + " bits (--int8-weights " +
                       std::to_string(bits) + "), next to the schedule's 8",
                   "8-bit weights", ev, label, narrowed, evaluator.layout(), 0);
  const auto& primary = evaluator.layout().columns.front().key;
  nlohmann::json j = {{"bits", bits}, {"schedule_weights", shown_json(ev, evaluator.layout())}};
  j[primary + "_given_up"] = metric(ev.metrics, primary) - metric(narrowed.metrics, primary);
  return j;
}

/// --quantize-eval: the post-training quantized model, calibrated on the evaluator's first
/// batches, scored on the same data; returns test_summary.json's "quantize_eval".
nlohmann::json evaluate_quantized(const TestRequest& request, const Checkpoint& ckpt,
                                  ModelImpl& model, const Evaluator& evaluator,
                                  const Evaluation& fp32, const fs::path& out, RunContext& ctx) {
  const auto& layout = evaluator.layout();
  nlohmann::json info;
  auto q = compress::quantize_for_eval(
      request.quantize_eval, model, model.input_shape(),
      [&](const at::Tensor& x) { return model.forward(x); },
      [&](const compress::PostTrainLinearQuantizer::Forward& f, int64_t n) {
        evaluator.for_each_input(n, [&](const at::Tensor& x) { f(x); });
      },
      out, *ctx.logger, &info);
  const Forward fake_quantized = [&](const at::Tensor& x) { return q->forward(x); };
  const auto qev = evaluator.evaluate(fake_quantized);
  print_comparison("Post-training quantization (" + request.quantize_eval.schedule + ")", "FP32",
                   fp32, info["label"].get<std::string>(), qev, layout, 0);
  const auto& primary = layout.columns.front().key;
  info["fp32"] = shown_json(fp32, layout);
  info["quantized"] = shown_json(qev, layout);
  info[primary + "_drop"] = metric(fp32.metrics, primary) - metric(qev.metrics, primary);
  if (info.contains("int8_weights_narrowed")) {
    std::cout << "\n";
    info["int8_weights"] = narrowed_weights_json(request, ckpt, evaluator, qev, info, out, ctx);
  }
  if (request.int8) {
    std::string what;
    const auto int8 = request.int8(Model(std::shared_ptr<ModelImpl>(&model, [](ModelImpl*) {})),
                                   fake_quantized, what);
    const auto iev = evaluator.evaluate(int8);
    std::cout << "\n";
    info["int8"] = int8_json(qev, iev, layout, what, "post-training quantized (fake)");
  }
  return info;
}

}  // namespace

nlohmann::json evaluate_checkpoint(const std::string& family, const TestRequest& request,
                                   const EvaluatorFactory& make, RunContext& ctx) {
  if (request.self_ensemble &&
      (request.quantize_eval.enabled() || request.external.enabled() || request.int8))
    throw InputError("--self-ensemble evaluates the checkpoint's own model only: leave out " +
                     std::string(request.external.enabled() ? "--onnx"
                                 : request.int8             ? "--int8"
                                                            : "--quantize-eval"));
  Checkpoint ckpt = load_checkpoint_for(request.checkpoint, family);
  Model model = model_from_checkpoint(ckpt);
  model->to(ctx.device);
  EvalData data = request.data;
  data.run_config = ckpt.meta().config;
  if (data.data.empty()) data.data = default_test_data(family, data.run_config);
  const auto evaluator = make(*model, data, ctx.device);
  const auto& layout = evaluator->layout();
  if (request.self_ensemble && layout.baseline.empty())
    throw InputError("--self-ensemble applies to image restoration (sr, deblur), not to " + family);

  torch::NoGradGuard no_grad;
  TrainModeGuard eval(*model, /*train=*/false);
  std::string runtime = "eager";
  Forward forward = request.inference
                        ? request.inference(model, runtime)
                        : Forward([&model](const at::Tensor& x) { return model->forward(x); });
  if (request.self_ensemble) {
    const Forward own = forward;
    forward = [own](const at::Tensor& x) { return geometric_self_ensemble(own, x); };
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto ev = evaluator->evaluate(forward, request.save_images);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The external model runs before anything is printed, so a shape it refuses is the one line.
  Evaluation eev;
  if (request.external.enabled()) eev = evaluator->evaluate(request.external.forward);
  // So does the integer model, unless it is the post-training quantized one's.
  Evaluation iev;
  std::string int8_what;
  if (request.int8 && !request.quantize_eval.enabled())
    iev = evaluator->evaluate(request.int8(
        model, [&model](const at::Tensor& x) { return model->forward(x); }, int8_what));
  print_heading(data.data, *evaluator);
  if (ev.items.empty())
    print_totals(ev, layout, request, ckpt.meta().epoch);
  else
    print_items(ev, layout, request);

  auto summary = summary_of(family, request, ckpt, *evaluator, ev, seconds);
  summary["tested_on"] = data.data;
  summary["runtime"] = runtime;
  if (!layout.report_sets.empty())
    summary.update(evaluate_report_sets(family, request, data, make, *model, forward, ctx));
  fs::path out =
      request.out.empty() ? fs::path(request.checkpoint).parent_path() : fs::path(request.out);
  if (out.empty()) out = ".";
  if (request.quantize_eval.enabled())
    summary["quantize_eval"] = evaluate_quantized(request, ckpt, *model, *evaluator, ev, out, ctx);
  if (request.int8 && !request.quantize_eval.enabled())
    summary["int8"] = int8_json(ev, iev, layout, int8_what, "fake-quantized (" + runtime + ")");
  if (request.external.enabled()) {
    print_comparison(request.external.label + " (" + request.external.source + ")",
                     "checkpoint (LibTorch)", ev, request.external.label, eev, layout, 3);
    const auto& primary = layout.columns.front().key;
    nlohmann::json onnx = {{"runtime", request.external.label}, {"model", request.external.source}};
    onnx.update(shown_json(eev, layout));
    onnx[primary + "_difference"] = metric(eev.metrics, primary) - metric(ev.metrics, primary);
    summary["onnx"] = onnx;
  }
  write_text_atomically(out / "test_summary.json", summary.dump(2) + "\n");
  ctx.logger->info("wrote " + (out / "test_summary.json").string());
  return summary;
}

}  // namespace igb::models
