#include "models/trainer.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>

#include "compress/scheduler.h"
#include "core/distributed.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/optim_lr.h"
#include "core/progress.h"
#include "core/table.h"
#include "core/tensorboard.h"
#include "core/torch_compat.h"
#include "core/train_mode_guard.h"
#include "data/loader.h"

namespace igb::models {

namespace fs = std::filesystem;

namespace {

// Autocast for the scope of a forward pass: bfloat16 on CPU, float16 on CUDA; restores the
// previous state and, leaving the outermost autocast scope, clears the cache of weights cast to
// the lower precision (they change at every step).
class AutocastScope {
 public:
  AutocastScope(bool enabled, c10::DeviceType device) : active_(enabled), device_(device) {
    if (!active_) return;
    was_enabled_ = compat::autocast_enabled(device_);
    was_dtype_ = compat::autocast_dtype(device_);
    compat::set_autocast_dtype(device_,
                               device_ == c10::DeviceType::CUDA ? at::kHalf : at::kBFloat16);
    compat::set_autocast_enabled(device_, true);
    at::autocast::increment_nesting();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;
  ~AutocastScope() {
    if (!active_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    compat::set_autocast_enabled(device_, was_enabled_);
    compat::set_autocast_dtype(device_, was_dtype_);
  }

 private:
  bool active_;
  c10::DeviceType device_;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kFloat;
};

// Puts every 4-D parameter (conv weights) in channels-last (NHWC) memory, in place: the module
// and every handle to the parameter stay as they are.
void to_channels_last(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters())
    if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
}

/// A number stored in a checkpoint's JSON; null (JSON has no NaN: a value that was not finite)
/// reads as NaN.
double number_or_nan(const nlohmann::json& v) {
  return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

double metric(const Metrics& metrics, const std::string& name) {
  for (const auto& kv : metrics)
    if (kv.first == name) return kv.second;
  return std::nan("");
}

Trainer::Trainer(const TrainConfig& config, RunContext& ctx, TrainingTask& task,
                 compress::TrainingHooks& hooks, RunInfo info)
    : config_(config), ctx_(ctx), task_(task), hooks_(hooks), info_(std::move(info)) {
  model_ = task_.model();
  model_->to(ctx_.device);
  // oneDNN's bfloat16 convolutions run on channels-last tensors without reordering them to and
  // from its blocked layout at every call, forward and backward: with the weights and the inputs
  // in that layout, an --amp step on CPU is about 7% (ResNet-20) to 25% (FSRCNN) faster
  // (bench/amp_speed.cpp). Float32 training keeps the default layout.
  channels_last_ = config_.amp && ctx_.device.is_cpu();
  if (channels_last_) to_channels_last(*model_);
  optimizer_ = make_optimizer(config_, model_->parameters(), hooks_.param_groups());
  // float16 needs the loss scaled so small gradients do not flush to zero; bfloat16 has float32's
  // exponent range and does not.
  if (config_.amp && (ctx_.device.is_cuda() || config_.force_loss_scaler)) {
    LossScalerOptions o;
    o.growth_interval = config_.loss_scale_growth_interval;
    scaler_ = std::make_unique<LossScaler>(o);
  }
  hooks_.set_validation_metric(task_.primary_metric(), task_.higher_is_better());
}

void Trainer::resume_from(const Checkpoint& ckpt) {
  ckpt.load_model(*model_);
  if (!ckpt.load_optimizer(*optimizer_))
    ctx_.logger->warn("checkpoint " + ckpt.path().string() +
                      " holds no optimizer state; starting it afresh");
  torch::serialize::InputArchive sched;
  if (ckpt.scheduler_archive(sched)) hooks_.load_state(sched);
  if (task_.has_state()) {
    torch::serialize::InputArchive task_state;
    if (ckpt.task_archive(task_state))
      task_.load_state(task_state);
    else
      ctx_.logger->warn("checkpoint " + ckpt.path().string() +
                        " holds no training-task state (a critic); starting it afresh");
  }
  ckpt.restore_rng();
  const auto& m = ckpt.meta();
  start_epoch_ = m.epoch + 1;
  best_epoch_ = m.best_epoch;
  best_value_ = m.best_metric;
  if (m.extra.contains("best_metrics"))
    for (const auto& kv : m.extra["best_metrics"].items())
      // A metric that was not finite is stored as null (JSON has no NaN).
      best_metrics_.emplace_back(kv.key(), number_or_nan(kv.value()));
  train_seconds_ = m.extra.value("train_seconds", 0.0);
  best_nonzero_ = m.extra.value("best_nonzero_weights", int64_t{-1});
  // A checkpoint of a run without loss scaling leaves the scaler at its initial state.
  if (scaler_ && m.extra.contains("loss_scaler"))
    scaler_->load_state(m.extra["loss_scaler"], "checkpoint " + ckpt.path().string());
  if (start_epoch_ >= config_.epochs)
    throw InputError("checkpoint " + ckpt.path().string() + " has already trained " +
                     std::to_string(start_epoch_) +
                     " epochs; --epochs is the total, so raise it above " +
                     std::to_string(start_epoch_) + " to continue");
  resumed_from_ = ckpt.path().string();
  resumed_epoch_ = m.epoch;
  resumed_metrics_ = m.extra.value("metrics", nlohmann::json::object());
  resumed_row_ = m.extra.value("epoch_row", nlohmann::json());
  recipes_ = m.thinning_recipes;
}

data::LoaderOptions Trainer::loader_options() const {
  data::LoaderOptions lo;
  lo.batch_size = config_.batch_size;
  lo.workers = config_.workers;
  lo.seed = config_.seed;
  if (ctx_.dist) {
    lo.rank = ctx_.dist->rank();
    lo.world_size = ctx_.dist->world_size();
  }
  return lo;
}

int64_t Trainer::batches_of(const data::BatchLoader& loader) const {
  const int64_t batches = loader.batches();
  if (batches == 0)
    throw InputError(
        "the training set has " + std::to_string(task_.train_set().size()) +
        " examples, fewer than one batch of " + std::to_string(config_.batch_size) +
        (ctx_.dist ? " on each of " + std::to_string(ctx_.dist->world_size()) + " processes" : ""));
  return batches;
}

void Trainer::check_first_batch() {
  // The batch content depends only on (seed, epoch), so building it here on this thread changes
  // nothing for the epoch that follows; the model runs in eval mode without gradients, so its
  // state (BatchNorm statistics included) is untouched, and no RNG is drawn.
  data::LoaderOptions lo = loader_options();
  lo.workers = 0;
  data::BatchLoader loader(task_.train_set(), lo);
  loader.set_max_batches(config_.max_batches);
  batches_of(loader);
  loader.start_epoch(start_epoch_);
  data::Example batch;
  if (!loader.next(batch)) return;
  torch::NoGradGuard no_grad;
  TrainModeGuard eval(*model_, /*train=*/false);
  at::Tensor output;
  {
    AutocastScope autocast(config_.amp, ctx_.device.type());
    output = task_.forward(*model_, batch.input.to(ctx_.device));
  }
  task_.loss(output.to(at::kFloat), batch.target.to(ctx_.device));
}

double Trainer::train_epoch(int64_t epoch) {
  // Built per epoch so the loader never outlives a dataset swapped by a thinning step.
  data::BatchLoader loader(task_.train_set(), loader_options());
  loader.set_max_batches(config_.max_batches);
  const int64_t batches = batches_of(loader);

  Progress progress(*ctx_.logger, ctx_.terminal, config_.log_every);
  // The hook refers to `progress`: it must not outlive this call, even when a batch throws.
  struct ConsoleHook {
    Logger& logger;
    ~ConsoleHook() { logger.set_console_hook(nullptr); }
  } console_hook{*ctx_.logger};
  ctx_.logger->set_console_hook([&progress] { progress.clear(); });
  progress.begin_epoch(epoch, config_.epochs, batches);

  model_->train();
  if ((config_.lr_decay != "none" || config_.lr_warmup > 0) && !hooks_.controls_lr())
    set_lr(*optimizer_, decayed_lr(config_, epoch));
  hooks_.on_epoch_begin(epoch, *optimizer_);
  loader.start_epoch(epoch);
  data::Example batch;
  double loss_sum = 0;
  for (int64_t b = 0; loader.next(batch); ++b) {
    const double l = train_minibatch(compress::MinibatchInfo{epoch, b, batches}, batch);
    loss_sum += l;
    progress.batch_done(b, l, batch.input.size(0));
  }
  progress.end_epoch();
  // The epoch's loss over all ranks (each validates the same model: weights and buffers agree).
  if (ctx_.dist)
    loss_sum = ctx_.dist->sum({loss_sum})[0] / static_cast<double>(ctx_.dist->world_size());
  return loss_sum / static_cast<double>(batches);
}

double Trainer::train_minibatch(const compress::MinibatchInfo& info, const data::Example& batch) {
  hooks_.on_minibatch_begin(info, *optimizer_);
  auto input = batch.input.to(ctx_.device), target = batch.target.to(ctx_.device);
  if (channels_last_ && input.dim() == 4) input = input.contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor output;
  {
    AutocastScope autocast(config_.amp, ctx_.device.type());
    output = task_.forward(*model_, input);
  }
  task_.after_forward(info, input, output, target);
  // The loss, the schedule's terms and backward run in float32, outside autocast.
  auto loss = task_.loss(output.to(at::kFloat), target);
  auto total = hooks_.before_backward_pass(info, loss, *optimizer_);
  optimizer_->zero_grad();
  if (scaler_) {
    scaler_->scale(total).backward();
    // Averaged while still scaled: an inf or NaN of any rank reaches every rank's gradients, so
    // all of them skip the step and back off the scale together.
    if (ctx_.dist) ctx_.dist->average(gradients_for_reduction(model_->parameters()));
    // The schedule sees true gradients; a step with inf or NaN in them is skipped.
    scaler_->unscale(*optimizer_);
  } else {
    total.backward();
    if (ctx_.dist) ctx_.dist->average(gradients_for_reduction(model_->parameters()));
  }
  hooks_.before_parameter_optimization(info, *optimizer_);
  if (scaler_) {
    scaler_->step(*optimizer_);
    scaler_->update();
  } else {
    optimizer_->step();
  }
  hooks_.on_minibatch_end(info, *optimizer_);
  // BatchNorm running statistics and a quantizer's activation ranges follow each rank's own data:
  // rank 0's replace them after every step (as DistributedDataParallel's broadcast_buffers).
  if (ctx_.dist) ctx_.dist->broadcast(model_buffers());
  double l = loss.item<double>();
  if (!std::isfinite(l))
    throw std::runtime_error("training diverged: loss is " + std::to_string(l) + " at epoch " +
                             std::to_string(info.epoch) + ", batch " + std::to_string(info.batch) +
                             " (lower --lr)");
  return l;
}

nlohmann::json Trainer::make_summary(const Metrics& last) const {
  nlohmann::json s = task_.summary(last, best_metrics_.empty() ? last : best_metrics_);
  s["optform"] = info_.optform;
  s["model"] = config_.model;
  s["epochs"] = config_.epochs;
  s["best_epoch"] = best_epoch_;
  s["params"] = count_parameters(*model_);
  s["train_seconds"] = std::round(train_seconds_ * 10) / 10;
  // Each thinning of the run: when, MACs and parameters before and after, and the metrics of the
  // epoch before and of the thinning epoch.
  nlohmann::json thinning = nlohmann::json::array();
  for (const auto& r : recipes_)
    if (r.contains("epoch")) {
      nlohmann::json t = {{"epoch", r["epoch"]}, {"kind", r["kind"]}};
      for (const char* k : {"macs_before", "macs_after", "params_before", "params_after",
                            "previous_metrics", "metrics"})
        if (r.contains(k)) t[k] = r[k];
      thinning.push_back(t);
    }
  if (!thinning.empty()) s["thinning"] = thinning;
  return s;
}

void Trainer::save(const fs::path& path, const EpochRecord& record) {
  CheckpointMeta meta;
  meta.optform = info_.optform;
  meta.model = config_.model;
  meta.model_options = model_->options_json();
  // RunInfo{..., {}} holds null: the checkpoint's config is always an object.
  meta.config = info_.config_json.is_null() ? nlohmann::json::object() : info_.config_json;
  meta.epoch = record.epoch;
  meta.best_metric_name = task_.primary_metric();
  meta.best_metric = best_value_;
  meta.best_epoch = best_epoch_;
  meta.schedule_text = hooks_.schedule_text();
  meta.thinning_recipes = recipes_;
  meta.quantization = hooks_.quantization();
  nlohmann::json last_j = nlohmann::json::object(), best_j = nlohmann::json::object();
  for (const auto& kv : record.metrics) last_j[kv.first] = kv.second;
  for (const auto& kv : best_metrics_) best_j[kv.first] = kv.second;
  meta.extra = {{"metrics", last_j},
                {"best_metrics", best_j},
                {"best_nonzero_weights", best_nonzero_},
                {"train_seconds", train_seconds_}};
  if (scaler_) meta.extra["loss_scaler"] = scaler_->state();
  nlohmann::json scalars = nlohmann::json::array();
  for (const auto& sc : record.scalars)
    scalars.push_back({{"column", sc.column}, {"tag", sc.tag}, {"value", sc.value}});
  // The metrics' order too (the "metrics" object is sorted by name), for the columns of a row
  // written from the checkpoint into a new metrics.csv.
  nlohmann::json order = nlohmann::json::array();
  for (const auto& kv : record.metrics) order.push_back(kv.first);
  meta.extra["epoch_row"] = {{"lr", record.lr},
                             {"train_loss", record.train_loss},
                             {"seconds", record.seconds},
                             {"scalars", scalars},
                             {"metric_order", order}};
  CheckpointParts parts;
  parts.model = model_.get();
  parts.optimizer = optimizer_.get();
  if (hooks_.has_state())
    parts.scheduler = [this](torch::serialize::OutputArchive& a) { hooks_.save_state(a); };
  if (task_.has_state())
    parts.task = [this](torch::serialize::OutputArchive& a) { task_.save_state(a); };
  save_checkpoint(path, meta, parts);
}

void Trainer::open_run_directory(const fs::path& out) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw InputError("cannot create the run directory " + out.string() + ": " + ec.message());
  // Held until the process ends: a second writer (an igb-bench resuming while an orphaned run
  // still trains, two commands given one --out) is refused before it touches a file.
  run_dir_lock_ = FolderLock::try_lock(out);
  if (!run_dir_lock_)
    throw InputError("the run directory " + out.string() +
                     " is being written by another process (a training still running); stop it "
                     "or choose another --out");
  // A fresh run allowed over an old one (--overwrite) starts its logs afresh: no row or event of
  // the old run is mixed into the new one's.
  if (resumed_from_.empty() && config_.overwrite)
    for (const auto& entry : fs::directory_iterator(out)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_regular_file() &&
          (name == "metrics.csv" || name == "train.log" || name == "summary.json" ||
           name == "best.ckpt" || name == "checkpoint.ckpt" ||
           name.find("tfevents") != std::string::npos))
        fs::remove(entry.path());
    }
  ctx_.logger->open_file(out / "train.log");
  write_text_atomically(out / "config.yaml", info_.config_yaml);
}

void Trainer::log_run_start(const fs::path& out) {
  ctx_.logger->info("training " + config_.model + " for epochs " + std::to_string(start_epoch_) +
                    "-" + std::to_string(config_.epochs - 1) + " on " +
                    std::to_string(torch::get_num_threads()) + " threads (" + ctx_.device.str() +
                    "), run directory " + out.string());
  if (!resumed_from_.empty()) ctx_.logger->info("resumed from " + resumed_from_);
  for (const auto& line : notes_) ctx_.logger->info(line);
  if (config_.amp)
    ctx_.logger->info(std::string("mixed precision: ") +
                      (ctx_.device.is_cuda() ? "float16" : "bfloat16") +
                      " autocast, float32 weights" +
                      (scaler_ ? ", dynamic loss scale " + fixed(scaler_->scale_value(), 0) : ""));
  if (!hooks_.schedule_text().empty() && (!ctx_.dist || ctx_.dist->is_main()))
    write_text_atomically(out / "schedule.yaml", hooks_.schedule_text());
  if (ctx_.dist)
    ctx_.logger->info("data-parallel over " + std::to_string(ctx_.dist->world_size()) +
                      " processes: batch " + std::to_string(config_.batch_size) + " each, " +
                      std::to_string(config_.batch_size * ctx_.dist->world_size()) +
                      " a step in all; gradients averaged, rank 0 writes");
  if (hooks_.controls_lr() && (config_.lr_decay != "none" || config_.lr_warmup > 0))
    ctx_.logger->info("the schedule's lr_schedulers set the learning rate; --lr-decay " +
                      config_.lr_decay +
                      (config_.lr_warmup > 0
                           ? " and --lr-warmup " + std::to_string(config_.lr_warmup) + " are off"
                           : " is off"));
}

Trainer::EpochRecord Trainer::train_and_validate(int64_t epoch) {
  auto t0 = std::chrono::steady_clock::now();
  EpochRecord r;
  r.epoch = epoch;
  r.train_loss = train_epoch(epoch);
  r.lr = get_lr(*optimizer_);
  r.metrics = validate();
  end_epoch(r);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  train_seconds_ += r.seconds;
  return r;
}

Metrics Trainer::validate() {
  model_->eval();
  torch::NoGradGuard no_grad;
  return task_.validate();
}

void Trainer::end_epoch(EpochRecord& r) {
  std::map<std::string, double> metric_map(r.metrics.begin(), r.metrics.end());
  metric_map["train_loss"] = r.train_loss;
  hooks_.on_epoch_end(r.epoch, metric_map, *optimizer_);
  for (auto& recipe : hooks_.take_thinning_recipes()) {
    // A thinning acts at the first minibatch of its epoch: `metrics` are of the thin model after
    // that epoch's training, `previous_metrics` of the pruned model just before it was thinned
    // (which the thin model computes exactly).
    for (const auto& kv : r.metrics) recipe["metrics"][kv.first] = kv.second;
    for (const auto& kv : previous_metrics_) recipe["previous_metrics"][kv.first] = kv.second;
    recipes_.push_back(std::move(recipe));
  }
  previous_metrics_ = r.metrics;
}

int64_t nonzero_weights(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& m : model.named_modules()) {
    const auto buffers = m.value()->named_buffers(/*recurse=*/false);
    for (const auto& p : m.value()->named_parameters(/*recurse=*/false)) {
      if (p.value().dim() != 2 && p.value().dim() != 4) continue;
      const auto* master = buffers.find("float_" + p.key());
      n += (master ? *master : p.value()).count_nonzero().item<int64_t>();
    }
  }
  return n;
}

namespace {

// -1, 0 or 1 as `a` is worse than, as good as or better than `b`; a non-finite value is worse
// than any finite one.
int compare_metric(double a, double b, bool higher_is_better) {
  if (!std::isfinite(a) || !std::isfinite(b)) return std::isfinite(a) - std::isfinite(b);
  if (a == b) return 0;
  return (a > b) == higher_is_better ? 1 : -1;
}

}  // namespace

bool Trainer::update_best(const EpochRecord& r) {
  // Distiller's ranking: fewest non-zero weights first, then the primary metric, then the
  // secondary one, then the later epoch (so ties go to the newest).
  const int64_t nonzero = nonzero_weights(*model_);
  const double value = metric(r.metrics, task_.primary_metric());
  bool improved = best_epoch_ < 0;
  if (!improved) {
    int order = best_nonzero_ < 0 ? 0 : (nonzero < best_nonzero_) - (nonzero > best_nonzero_);
    if (order == 0) order = compare_metric(value, best_value_, task_.higher_is_better());
    const std::string second = task_.secondary_metric();
    if (order == 0 && !second.empty())
      order = compare_metric(metric(r.metrics, second), metric(best_metrics_, second),
                             task_.higher_is_better());
    improved = order >= 0;
  }
  if (improved) {
    best_epoch_ = r.epoch;
    best_value_ = value;
    best_metrics_ = r.metrics;
    best_nonzero_ = nonzero;
  }
  return improved;
}

void Trainer::log_epoch(const EpochRecord& r) {
  std::string sparsity_text;
  for (const auto& sc : r.scalars)
    if (sc.column == "sparsity") sparsity_text = "  sparsity " + fixed(100 * sc.value, 2) + "%";
  ctx_.logger->info("==> epoch " + std::to_string(r.epoch) + "/" +
                    std::to_string(config_.epochs - 1) + "  loss " + fixed(r.train_loss, 6) + "  " +
                    task_.describe(r.metrics) + sparsity_text + "  lr " + std::to_string(r.lr) +
                    "  " + fixed(r.seconds, 1) + "s" + (r.improved ? "  (best)" : ""));
}

void Trainer::write_metrics(const EpochRecord& r, const fs::path& out,
                            std::unique_ptr<CsvAppender>& csv, EventWriter& events) {
  if (!csv) {
    std::vector<std::string> cols{"epoch", "lr", "train_loss"};
    for (const auto& kv : r.metrics) cols.push_back(kv.first);
    for (const auto& sc : r.scalars) cols.push_back(sc.column);
    cols.push_back("time_s");
    csv = std::make_unique<CsvAppender>((out / "metrics.csv").string(), cols);
  }
  std::vector<std::pair<std::string, std::string>> row{{"epoch", std::to_string(r.epoch)},
                                                       {"lr", std::to_string(r.lr)},
                                                       {"train_loss", fixed(r.train_loss, 6)}};
  for (const auto& kv : r.metrics) row.emplace_back(kv.first, fixed(kv.second, 4));
  for (const auto& sc : r.scalars) row.emplace_back(sc.column, fixed(sc.value, 6));
  row.emplace_back("time_s", fixed(r.seconds, 2));
  csv->append(row);

  events.add_scalar("train/loss", r.train_loss, r.epoch);
  events.add_scalar("lr", r.lr, r.epoch);
  for (const auto& kv : r.metrics) events.add_scalar("val/" + kv.first, kv.second, r.epoch);
  for (const auto& sc : r.scalars) events.add_scalar(sc.tag, sc.value, r.epoch);
  events.flush();
}

void Trainer::complete_metrics_row(const fs::path& out, std::unique_ptr<CsvAppender>& csv,
                                   EventWriter& events) {
  // Only into the resumed checkpoint's own folder; a run stopped right after its first checkpoint
  // has no metrics.csv yet, and its row is written with the header now.
  std::error_code ec;
  if (!resumed_row_.is_object() || !fs::equivalent(out, fs::path(resumed_from_).parent_path(), ec))
    return;
  // Stopped between checkpoint.ckpt and its copy as best.ckpt: the copy is made now.
  if (best_epoch_ == resumed_epoch_ && fs::path(resumed_from_).filename() == "checkpoint.ckpt") {
    bool stale = !fs::exists(out / "best.ckpt");
    if (!stale) {
      try {
        stale = Checkpoint::load(out / "best.ckpt").meta().epoch != resumed_epoch_;
      } catch (const InputError&) {
        stale = true;
      }
    }
    if (stale) {
      write_atomically(out / "best.ckpt", [&](const fs::path& tmp) {
        fs::copy_file(resumed_from_, tmp, fs::copy_options::overwrite_existing);
      });
      ctx_.logger->info("best.ckpt was not the best epoch " + std::to_string(resumed_epoch_) +
                        ", whose checkpoint was written before the run stopped; copied from it");
    }
  }
  // The epoch of the file's last row (-1: none).
  int64_t last = -1;
  std::ifstream in(out / "metrics.csv");  // none: no row yet
  std::string line;
  for (bool header = true; std::getline(in, line); header = false) {
    if (header || line.empty()) continue;
    char* end = nullptr;
    const long long e = std::strtoll(line.c_str(), &end, 10);
    if (end != line.c_str() && *end == ',') last = e;
  }
  if (last >= resumed_epoch_) return;
  EpochRecord r;
  r.epoch = resumed_epoch_;
  r.lr = number_or_nan(resumed_row_.value("lr", nlohmann::json()));
  r.train_loss = number_or_nan(resumed_row_.value("train_loss", nlohmann::json()));
  r.seconds = number_or_nan(resumed_row_.value("seconds", nlohmann::json()));
  for (const auto& kv : resumed_metrics_.items())
    r.metrics.emplace_back(kv.key(), number_or_nan(kv.value()));
  // In the order the run validated them (checkpoints that record it), not by name.
  const auto order = resumed_row_.value("metric_order", nlohmann::json::array());
  if (order.is_array() && order.size() == r.metrics.size()) {
    Metrics ordered;
    for (const auto& name : order)
      if (name.is_string()) ordered.emplace_back(name.get<std::string>(), metric(r.metrics, name));
    if (ordered.size() == r.metrics.size()) r.metrics = std::move(ordered);
  }
  for (const auto& sc : resumed_row_.value("scalars", nlohmann::json::array()))
    r.scalars.push_back({sc.value("column", ""), sc.value("tag", ""),
                         number_or_nan(sc.value("value", nlohmann::json()))});
  write_metrics(r, out, csv, events);
  ctx_.logger->info("metrics.csv had no row for epoch " + std::to_string(r.epoch) +
                    ", whose checkpoint was written before the run stopped; written from the "
                    "checkpoint");
}

void Trainer::write_checkpoints(const EpochRecord& r, const fs::path& out) {
  save(out / "checkpoint.ckpt", r);
  if (r.improved) {
    write_atomically(out / "best.ckpt", [&](const fs::path& tmp) {
      fs::copy_file(out / "checkpoint.ckpt", tmp, fs::copy_options::overwrite_existing);
    });
  }
}

nlohmann::json Trainer::write_summary(const EpochRecord& r, const fs::path& out) {
  nlohmann::json summary = make_summary(r.metrics);
  for (const auto& sc : r.scalars)
    if (sc.column == "sparsity") summary["sparsity"] = sc.value;
  write_text_atomically(out / "summary.json", summary.dump(2) + "\n");
  return summary;
}

std::vector<at::Tensor> Trainer::model_buffers() const {
  // A quantizer's float master weights (float_*) are left out: every rank updates them alike
  // from the averaged gradients.
  std::vector<at::Tensor> buffers;
  for (const auto& b : model_->named_buffers()) {
    const auto& name = b.key();
    const auto dot = name.rfind('.');
    if (name.compare(dot == std::string::npos ? 0 : dot + 1, 6, "float_") == 0) continue;
    buffers.push_back(b.value());
  }
  return buffers;
}

nlohmann::json Trainer::run() {
  const fs::path out = ctx_.out_dir;
  // Everything that can fail on the options, the data, the model and the first batch has run by
  // now, or runs here: a run that fails leaves an existing run directory as it was and creates
  // none.
  check_first_batch();
  if (ctx_.check_only) return nlohmann::json::object();
  // In a data-parallel job every rank starts from rank 0's weights (the shared seed and a
  // resumed checkpoint make them equal already) and only rank 0 writes.
  const bool writes = !ctx_.dist || ctx_.dist->is_main();
  if (ctx_.dist) {
    ctx_.dist->broadcast(model_->parameters());
    ctx_.dist->broadcast(model_buffers());
    task_.set_distributed(*ctx_.dist);
    hooks_.set_distributed(*ctx_.dist);
  }
  std::unique_ptr<EventWriter> events;
  if (writes) {
    open_run_directory(out);
    events = std::make_unique<EventWriter>(out);
  }
  log_run_start(out);

  std::unique_ptr<CsvAppender> csv;
  if (writes) complete_metrics_row(out, csv, *events);
  nlohmann::json summary;
  for (int64_t epoch = start_epoch_; epoch < config_.epochs; ++epoch) {
    EpochRecord record = train_and_validate(epoch);
    record.improved = update_best(record);
    record.scalars = hooks_.epoch_scalars();
    for (const auto& [name, value] : task_.train_scalars())
      record.scalars.push_back({name, "train/" + name, value});
    log_epoch(record);
    if (!writes) {
      summary = make_summary(record.metrics);
      continue;
    }
    // The metrics row of an epoch follows its checkpoint, which holds the row too: a run stopped
    // between the two resumes after that epoch, writes the row then (complete_metrics_row) and
    // never a second one.
    write_checkpoints(record, out);
    write_metrics(record, out, csv, *events);
    summary = write_summary(record, out);
  }
  if (ctx_.dist && ctx_.dist->average_calls() > 0)
    ctx_.logger->info(
        "gradient all-reduce over " + std::to_string(ctx_.dist->world_size()) + " processes: " +
        fixed(1000 * ctx_.dist->average_seconds() / static_cast<double>(ctx_.dist->average_calls()),
              2) +
        " ms a step");
  run_dir_lock_.reset();
  return summary;
}

}  // namespace igb::models
