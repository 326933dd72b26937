#include "models/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <thread>

#include "compress/scheduler.h"
#include "core/checkpoint.h"
#include "core/distributed.h"
#include "core/error.h"
#include "core/logger.h"
#include "core/subprocess.h"
#include "models/loss_scaler.h"
#include "models/model_from_checkpoint.h"
#include "models/sr/sr_evaluator.h"
#include "models/sr/sr_solver.h"
#include "tests/support.h"

namespace igb::models {

namespace fs = std::filesystem;

namespace {

// Records every hook call as "name:epoch:batch".
class RecordingHooks : public compress::TrainingHooks {
 public:
  std::vector<std::string> calls;
  void on_epoch_begin(int64_t e, torch::optim::Optimizer&) override { add("epoch_begin", e, -1); }
  void on_minibatch_begin(const compress::MinibatchInfo& i, torch::optim::Optimizer&) override {
    add("mb_begin", i.epoch, i.batch);
  }
  at::Tensor before_backward_pass(const compress::MinibatchInfo& i, const at::Tensor& loss,
                                  torch::optim::Optimizer&) override {
    add("before_backward", i.epoch, i.batch);
    // A regulariser-like term must reach backward: its gradient is checked below.
    extra_ = true;
    return loss;
  }
  void before_parameter_optimization(const compress::MinibatchInfo& i,
                                     torch::optim::Optimizer& opt) override {
    bool has_grad = false;
    for (auto& g : opt.param_groups())
      for (auto& p : g.params())
        has_grad = has_grad || (p.grad().defined() && p.grad().abs().sum().item<double>() > 0);
    add(has_grad ? "before_step(grad)" : "before_step(nograd)", i.epoch, i.batch);
  }
  void on_minibatch_end(const compress::MinibatchInfo& i, torch::optim::Optimizer&) override {
    add("mb_end", i.epoch, i.batch);
  }
  void on_epoch_end(int64_t e, const std::map<std::string, double>& metrics,
                    torch::optim::Optimizer&) override {
    add(metrics.count("psnr") ? "epoch_end(psnr)" : "epoch_end", e, -1);
  }
  void set_validation_metric(const std::string& primary, bool higher_is_better) override {
    calls.push_back("validation_metric:" + primary + (higher_is_better ? ":higher" : ":lower"));
  }

 private:
  void add(const std::string& n, int64_t e, int64_t b) {
    calls.push_back(n + ":" + std::to_string(e) + (b >= 0 ? ":" + std::to_string(b) : ""));
  }
  bool extra_ = false;
};

class TinySrTask : public TrainingTask {
 public:
  TinySrTask() {
    register_builtin_models();
    torch::manual_seed(0);
    model_ = create_model("espcn", {{"scale", 2}});
    data::SrDataOptions o;
    o.scale = 2;
    o.patch_size = 16;
    o.patches_per_image = 2;
    o.synthetic_train_images = 4;
    o.synthetic_val_images = 1;
    o.synthetic_size = 32;
    data_ = data::load_sr_data("synthetic", o);
  }
  Model model() override { return model_; }
  const data::Dataset& train_set() const override { return *data_.train; }
  at::Tensor loss(const at::Tensor& out, const at::Tensor& target) override {
    return torch::mse_loss(out, target);
  }
  Metrics validate() override {
    const sr::SrEvaluator evaluator(data_.val, 2, true, torch::kCPU, "synthetic");
    return {{"psnr", metric(evaluate_model(evaluator, *model_).metrics, "psnr")}};
  }
  std::string primary_metric() const override { return "psnr"; }
  std::string describe(const Metrics& m) const override {
    return "psnr " + std::to_string(metric(m, "psnr"));
  }
  nlohmann::json summary(const Metrics& last, const Metrics&) const override {
    return {{"psnr", metric(last, "psnr")}};
  }

 private:
  Model model_;
  data::SrData data_;
};

}  // namespace

TEST(Trainer, CallsTheSixHooksInOrder) {
  test::TempDir tmp;
  TinySrTask task;
  RecordingHooks hooks;
  Logger logger;
  logger.set_quiet(true);
  RunContext ctx;
  ctx.logger = &logger;
  ctx.out_dir = tmp / "hooks";
  TrainConfig cfg;
  cfg.model = "espcn";
  cfg.epochs = 2;
  cfg.batch_size = 4;
  cfg.workers = 0;
  Trainer trainer(cfg, ctx, task, hooks, RunInfo{"sr", "optform: sr\n", {}});
  trainer.run();
  // The primary metric is named once, before the first epoch (ReduceLROnPlateau watches it).
  std::vector<std::string> expected = {"validation_metric:psnr:higher"};
  for (int e = 0; e < 2; ++e) {
    expected.push_back("epoch_begin:" + std::to_string(e));
    for (int b = 0; b < 2; ++b) {
      auto s = ":" + std::to_string(e) + ":" + std::to_string(b);
      for (const char* n : {"mb_begin", "before_backward", "before_step(grad)", "mb_end"})
        expected.push_back(n + s);
    }
    expected.push_back("epoch_end(psnr):" + std::to_string(e));
  }
  EXPECT_EQ(hooks.calls, expected);
  for (const char* f :
       {"train.log", "metrics.csv", "config.yaml", "checkpoint.ckpt", "best.ckpt", "summary.json"})
    EXPECT_TRUE(fs::exists(ctx.out_dir / f)) << f;
}

// best.ckpt follows Distiller's SparsityAccuracyTracker: fewest non-zero weights first, then the
// primary metric, then the later epoch. From epoch 1 on, half of a conv weight is held at zero;
// the PSNR per epoch is 30, 20, 25, 25 — the dense epoch 0 has the best PSNR but is not the best.
TEST(Trainer, BestEpochIsTheSparsestThenTheBestMetricThenTheLatest) {
  class ScriptedTask : public TinySrTask {
   public:
    Metrics validate() override {
      const double psnr[] = {30, 20, 25, 25};
      return {{"psnr", psnr[calls_++]}, {"ssim", 0.5}};
    }
    int calls_ = 0;
  };
  class HalfZero : public compress::TrainingHooks {
   public:
    explicit HalfZero(Model m) : model_(std::move(m)) {}
    void on_epoch_begin(int64_t e, torch::optim::Optimizer&) override {
      epoch_ = e;
      apply();
    }
    void on_minibatch_end(const compress::MinibatchInfo&, torch::optim::Optimizer&) override {
      apply();
    }

   private:
    void apply() {
      if (epoch_ < 1) return;
      torch::NoGradGuard no_grad;
      for (auto& p : model_->parameters())
        if (p.dim() == 4) {
          p.flatten().narrow(0, 0, p.numel() / 2).zero_();
          return;
        }
    }
    Model model_;
    int64_t epoch_ = 0;
  };
  test::TempDir tmp;
  ScriptedTask task;
  HalfZero hooks(task.model());
  Logger logger;
  logger.set_quiet(true);
  RunContext ctx;
  ctx.logger = &logger;
  ctx.out_dir = tmp / "best";
  TrainConfig cfg;
  cfg.model = "espcn";
  cfg.epochs = 4;
  cfg.batch_size = 4;
  cfg.workers = 0;
  const auto summary = Trainer(cfg, ctx, task, hooks, RunInfo{"sr", "optform: sr\n", {}}).run();
  EXPECT_EQ(summary["best_epoch"], 3);
  const auto best = Checkpoint::load(ctx.out_dir / "best.ckpt");
  EXPECT_EQ(best.meta().epoch, 3);
  EXPECT_EQ(best.meta().best_metric, 25);
  // The dense weights of epoch 0 less the zeroed half.
  int64_t all = 0, zeroed = 0;
  for (auto& p : task.model()->parameters())
    if (p.dim() == 2 || p.dim() == 4) all += p.numel();
  for (auto& p : task.model()->parameters())
    if (p.dim() == 4) {
      zeroed = p.numel() / 2;
      break;
    }
  EXPECT_LE(best.meta().extra["best_nonzero_weights"].get<int64_t>(), all - zeroed);
}

// A 2-bit symmetric weight grid rounds many small weights to zero, more or fewer at each step: the
// ranking counts the float master copies instead, so those zeros do not make an epoch "sparser".
TEST(Trainer, NonzeroWeightsCountTheFloatMasterOfAQuantizedWeight) {
  register_builtin_models();
  torch::manual_seed(0);
  auto m = create_model("fsrcnn", {{"scale", 2}, {"d", 8}, {"s", 4}, {"m", 1}});
  int64_t all = 0;
  for (const auto& p : m->parameters())
    if (p.dim() == 2 || p.dim() == 4) all += p.numel();
  EXPECT_EQ(nonzero_weights(*m), all);
  auto s = compress::CompressionScheduler::from_text(
      "version: 1\nquantizers:\n  q:\n    class: QuantAwareTrainRangeLinearQuantizer\n"
      "    bits_activations: null\n    bits_weights: 2\n    mode: SYMMETRIC\n"
      "    per_channel_wts: True\npolicies:\n  - quantizer:\n      instance_name: q\n"
      "    starting_epoch: 0\n    ending_epoch: 10\n    frequency: 1\n",
      "q.yaml", *m, 0.01, nullptr);
  int64_t quantized_nonzero = 0;
  for (const auto& p : m->parameters())
    if (p.dim() == 2 || p.dim() == 4) quantized_nonzero += p.count_nonzero().item<int64_t>();
  EXPECT_LT(quantized_nonzero, all - 100);  // the grid {-1, 0, 1}·S zeroes many weights
  EXPECT_EQ(nonzero_weights(*m), all);
}

// A run whose validation metric is not finite (a diverged model) stores it as null, and a resume
// of that run reads it back instead of failing on the null.
TEST(Trainer, ResumesARunWhoseBestMetricIsNotFinite) {
  class NanTask : public TinySrTask {
   public:
    Metrics validate() override { return {{"psnr", std::numeric_limits<double>::quiet_NaN()}}; }
  };
  test::TempDir tmp;
  NanTask task;
  compress::TrainingHooks hooks;
  Logger logger;
  logger.set_quiet(true);
  RunContext ctx;
  ctx.logger = &logger;
  ctx.out_dir = tmp / "nan";
  TrainConfig cfg;
  cfg.model = "espcn";
  cfg.epochs = 1;
  cfg.batch_size = 4;
  cfg.workers = 0;
  Trainer(cfg, ctx, task, hooks, RunInfo{"sr", "optform: sr\n", {}}).run();
  auto first = Checkpoint::load(ctx.out_dir / "checkpoint.ckpt");
  EXPECT_TRUE(first.meta().extra["best_metrics"]["psnr"].is_null());
  cfg.epochs = 2;
  cfg.resume = (ctx.out_dir / "checkpoint.ckpt").string();
  Trainer(cfg, ctx, task, hooks, RunInfo{"sr", "optform: sr\n", {}}).run();
  EXPECT_EQ(Checkpoint::load(ctx.out_dir / "checkpoint.ckpt").meta().epoch, 1);
}

TEST(Trainer, ResumeGivesTheSameWeightsAsAStraightRun) {
  test::TempDir tmp;
  Logger logger;
  logger.set_quiet(true);
  sr::SrConfig cfg;
  cfg.train.model = "fsrcnn";
  cfg.train.batch_size = 4;
  cfg.train.max_batches = 3;
  cfg.train.workers = 1;
  cfg.train.seed = 5;
  cfg.upscale = 3;
  cfg.patch_size = 24;
  cfg.model_args = {{"d", 8}, {"s", 4}, {"m", 1}};
  register_builtin_models();
  torch::set_num_threads(1);

  RunContext straight;
  straight.logger = &logger;
  straight.out_dir = tmp / "straight";
  cfg.train.epochs = 4;
  sr::train_sr(cfg, straight, RunInfo{"sr", "", {}});

  RunContext split;
  split.logger = &logger;
  split.out_dir = tmp / "split";
  cfg.train.epochs = 2;
  sr::train_sr(cfg, split, RunInfo{"sr", "", {}});
  EXPECT_EQ(Checkpoint::load(split.out_dir / "checkpoint.ckpt").meta().epoch, 1);
  cfg.train.epochs = 4;
  cfg.train.resume = (split.out_dir / "checkpoint.ckpt").string();
  sr::train_sr(cfg, split, RunInfo{"sr", "", {}});

  auto a = Checkpoint::load(straight.out_dir / "checkpoint.ckpt");
  auto b = Checkpoint::load(split.out_dir / "checkpoint.ckpt");
  EXPECT_EQ(a.meta().epoch, 3);
  EXPECT_EQ(b.meta().epoch, 3);
  auto ma = model_from_checkpoint(a), mb = model_from_checkpoint(b);
  auto pa = ma->named_parameters(), pb = mb->named_parameters();
  for (const auto& kv : pa) EXPECT_TRUE(torch::equal(kv.value(), pb[kv.key()])) << kv.key();
  // And training really moved the weights.
  torch::manual_seed(5);
  auto fresh = create_model("fsrcnn", a.meta().model_options);
  EXPECT_FALSE(
      torch::equal(fresh->named_parameters()["first_part.0.weight"], pa["first_part.0.weight"]));
  // metrics.csv of the split run has one row per epoch, 0 to 3.
  std::ifstream csv(split.out_dir / "metrics.csv");
  std::string line;
  int rows = -1;
  while (std::getline(csv, line)) ++rows;
  EXPECT_EQ(rows, 4);
}

TEST(Trainer, ResumeMidScheduleEndsWithTheSameMasksAndWeights) {
  test::TempDir tmp;
  Logger logger;
  logger.set_quiet(true);
  register_builtin_models();
  torch::set_num_threads(1);
  auto schedule = tmp / "igb_resume_agp.yaml";
  std::ofstream(schedule)
      << "version: 1\npruners:\n  p:\n    class: AutomatedGradualPruner\n"
         "    initial_sparsity: 0.1\n    final_sparsity: 0.7\n"
         "    weights: [mid_part.0.0.weight, mid_part.1.weight]\n"
         "lr_schedulers:\n  lr:\n    class: StepLR\n    step_size: 1\n    gamma: 0.5\n"
         "policies:\n  - pruner: {instance_name: p}\n    starting_epoch: 0\n    ending_epoch: 4\n"
         "  - lr_scheduler: {instance_name: lr}\n    starting_epoch: 0\n    ending_epoch: 4\n";
  sr::SrConfig cfg;
  cfg.train.model = "fsrcnn";
  cfg.train.batch_size = 4;
  cfg.train.max_batches = 3;
  cfg.train.workers = 0;
  cfg.train.seed = 7;
  cfg.train.optimizer = "sgd";
  cfg.train.lr = 0.01;
  cfg.train.compress = schedule.string();
  cfg.patch_size = 24;
  cfg.model_args = {{"d", 8}, {"s", 4}, {"m", 1}};

  RunContext straight{&logger, tmp / "sched_straight"};
  cfg.train.epochs = 4;
  auto s1 = sr::train_sr(cfg, straight, RunInfo{"sr", "", {}});
  RunContext split{&logger, tmp / "sched_split"};
  cfg.train.epochs = 2;
  sr::train_sr(cfg, split, RunInfo{"sr", "", {}});
  cfg.train.epochs = 4;
  cfg.train.compress.clear();  // the checkpoint's own schedule is used
  cfg.train.resume = (split.out_dir / "checkpoint.ckpt").string();
  auto s2 = sr::train_sr(cfg, split, RunInfo{"sr", "", {}});

  auto a = Checkpoint::load(straight.out_dir / "checkpoint.ckpt");
  auto b = Checkpoint::load(split.out_dir / "checkpoint.ckpt");
  EXPECT_FALSE(b.meta().schedule_text.empty());
  auto ma = model_from_checkpoint(a), mb = model_from_checkpoint(b);
  auto pa = ma->named_parameters(), pb = mb->named_parameters();
  for (const auto& kv : pa) EXPECT_TRUE(torch::equal(kv.value(), pb[kv.key()])) << kv.key();
  // The last AGP epoch reached 70% in both named weights (within one element).
  for (const char* n : {"mid_part.0.0.weight", "mid_part.1.weight"}) {
    const auto& w = pa[n];
    EXPECT_NEAR(w.eq(0).sum().item<double>(), std::floor(0.7 * w.numel()), 1.0) << n;
  }
  EXPECT_DOUBLE_EQ(s1["sparsity"].get<double>(), s2["sparsity"].get<double>());
  EXPECT_TRUE(fs::exists(split.out_dir / "schedule.yaml"));
  std::ifstream csv(split.out_dir / "metrics.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_NE(header.find("sparsity/mid_part.1.weight"), std::string::npos) << header;
}

namespace {

// One step of `scaler` on w·x summed: backward of the scaled loss, then `poison` (inf or NaN, or
// nothing when 0) written into the first gradient element, then unscale, step and update.
// Returns whether the optimizer stepped.
bool scaler_step(LossScaler& scaler, torch::optim::Optimizer& opt, const at::Tensor& w,
                 const at::Tensor& x, double poison = 0) {
  opt.zero_grad();
  scaler.scale((w * x).sum()).backward();
  if (poison != 0) {
    torch::NoGradGuard no_grad;
    w.mutable_grad()[0] = poison;
  }
  scaler.unscale(opt);
  const bool stepped = scaler.step(opt);
  scaler.update();
  return stepped;
}

}  // namespace

// The scale over a scripted sequence of steps (growth interval 3, as in torch.cuda.amp's
// GradScaler.update): 2^16, grows ×2 after 3 clean steps, halves and restarts its count on inf or
// NaN.
TEST(LossScaler, GrowsAfterTheIntervalAndBacksOffOnNonFiniteGradients) {
  LossScalerOptions o;
  o.growth_interval = 3;
  LossScaler scaler(o);
  EXPECT_EQ(scaler.scale_value(), 65536.0);
  auto w = torch::ones({2}, torch::requires_grad());
  auto x = torch::tensor({2.0f, -4.0f});
  torch::optim::SGD opt({w}, torch::optim::SGDOptions(0.0));
  const double inf = std::numeric_limits<double>::infinity(),
               nan = std::numeric_limits<double>::quiet_NaN();
  // step: poison, then (scale, growth tracker) after it.
  struct Step {
    double poison, scale;
    int64_t tracker;
  };
  const Step steps[] = {
      {0, 65536, 1},   {0, 65536, 2},   {0, 131072, 0},  // third clean step: 65536·2
      {inf, 65536, 0},                                   // inf: 131072·0.5, count restarts
      {0, 65536, 1},   {nan, 32768, 0},                  // NaN: 65536·0.5
      {0, 32768, 1},   {0, 32768, 2},   {0, 65536, 0},   // 32768·2
      {-inf, 32768, 0}};
  for (size_t i = 0; i < std::size(steps); ++i) {
    const bool clean = steps[i].poison == 0;
    EXPECT_EQ(scaler_step(scaler, opt, w, x, steps[i].poison), clean) << "step " << i;
    EXPECT_EQ(scaler.scale_value(), steps[i].scale) << "step " << i;
    EXPECT_EQ(scaler.growth_tracker(), steps[i].tracker) << "step " << i;
    // Unscaled, the gradient is x exactly (the scales are powers of two).
    if (clean) {
      EXPECT_TRUE(torch::equal(w.grad(), x)) << "step " << i;
    }
  }
}

TEST(LossScaler, ASkippedStepLeavesTheWeightsUnchanged) {
  LossScaler scaler;
  auto w = torch::ones({2}, torch::requires_grad());
  auto x = torch::tensor({2.0f, -4.0f});
  torch::optim::SGD opt({w}, torch::optim::SGDOptions(0.5));
  EXPECT_FALSE(scaler_step(scaler, opt, w, x, std::numeric_limits<double>::infinity()));
  EXPECT_TRUE(torch::equal(w, torch::ones({2})));
  EXPECT_EQ(scaler.scale_value(), 32768.0);
  EXPECT_FALSE(scaler_step(scaler, opt, w, x, std::numeric_limits<double>::quiet_NaN()));
  EXPECT_TRUE(torch::equal(w, torch::ones({2})));
  EXPECT_EQ(scaler.scale_value(), 16384.0);
  // A clean step is plain SGD on the unscaled gradient: 1 - 0.5·2 = 0, 1 - 0.5·(-4) = 3.
  EXPECT_TRUE(scaler_step(scaler, opt, w, x));
  EXPECT_TRUE(torch::equal(w, torch::tensor({0.0f, 3.0f})));
  // Unscaling twice in one step would divide the gradients twice.
  opt.zero_grad();
  scaler.scale((w * x).sum()).backward();
  scaler.unscale(opt);
  EXPECT_THROW(scaler.unscale(opt), std::logic_error);
}

TEST(LossScaler, StateRoundTrips) {
  LossScalerOptions o;
  o.growth_interval = 3;
  LossScaler a(o);
  auto w = torch::ones({2}, torch::requires_grad());
  auto x = torch::tensor({2.0f, -4.0f});
  torch::optim::SGD opt({w}, torch::optim::SGDOptions(0.0));
  scaler_step(a, opt, w, x, std::numeric_limits<double>::infinity());  // 32768, 0
  scaler_step(a, opt, w, x);                                           // 32768, 1
  scaler_step(a, opt, w, x);                                           // 32768, 2
  const auto state = a.state();
  EXPECT_EQ(state, nlohmann::json({{"scale", 32768.0}, {"growth_tracker", 2}}));
  LossScaler b(o);
  b.load_state(nlohmann::json::parse(state.dump()), "test");
  EXPECT_EQ(b.scale_value(), 32768.0);
  EXPECT_EQ(b.growth_tracker(), 2);
  // One more clean step completes the interval: 32768·2.
  scaler_step(b, opt, w, x);
  EXPECT_EQ(b.scale_value(), 65536.0);
  EXPECT_EQ(b.growth_tracker(), 0);
  EXPECT_THROW(b.load_state({{"scale", -1.0}, {"growth_tracker", 0}}, "test"), InputError);
  EXPECT_THROW(b.load_state({{"scale", 2.0}}, "test"), InputError);
}

namespace {

// Trains TinySrTask's espcn for `epochs` with `cfg` and `hooks`; returns the trained model.
Model train_tiny(TrainConfig cfg, const fs::path& out, compress::TrainingHooks& hooks,
                 int64_t epochs, const std::string& resume = "") {
  TinySrTask task;
  Logger logger;
  logger.set_quiet(true);
  RunContext ctx;
  ctx.logger = &logger;
  ctx.out_dir = out;
  cfg.model = "espcn";
  cfg.epochs = epochs;
  cfg.batch_size = 4;
  cfg.workers = 0;
  torch::set_num_threads(1);
  Trainer trainer(cfg, ctx, task, hooks, RunInfo{"sr", "optform: sr\n", {}});
  if (!resume.empty()) trainer.resume_from(Checkpoint::load(resume));
  trainer.run();
  return task.model();
}

}  // namespace

// --lr-warmup: epoch e < N at lr·(e + 1)/N, then the decay's own rate for the epoch (cosine from
// lr at epoch 0 to lr/100 at the last).
TEST(Trainer, WarmupRampsTheLearningRateBeforeTheDecay) {
  TrainConfig c;
  c.lr = 1e-3;
  c.epochs = 11;
  c.lr_decay = "cosine";
  c.lr_warmup = 2;
  EXPECT_DOUBLE_EQ(decayed_lr(c, 0), 0.5e-3);
  EXPECT_DOUBLE_EQ(decayed_lr(c, 1), 1e-3);
  EXPECT_NEAR(decayed_lr(c, 2), 1e-5 + 0.5 * (1e-3 - 1e-5) * (1 + std::cos(M_PI * 0.2)), 1e-15);
  EXPECT_NEAR(decayed_lr(c, 10), 1e-5, 1e-15);
  c.lr_warmup = 0;
  EXPECT_DOUBLE_EQ(decayed_lr(c, 0), 1e-3);
  // Without a decay the trainer still sets the warm-up's rates: metrics.csv's lr column.
  test::TempDir tmp;
  compress::TrainingHooks hooks;
  TrainConfig cfg;
  cfg.lr = 1e-3;
  cfg.lr_warmup = 3;
  train_tiny(cfg, tmp / "warmup", hooks, 4);
  std::ifstream csv(tmp / "warmup" / "metrics.csv");
  std::string line;
  std::getline(csv, line);
  ASSERT_EQ(line.rfind("epoch,lr,", 0), 0u) << line;
  std::vector<std::string> lrs;
  while (std::getline(csv, line)) {
    const auto a = line.find(',') + 1;
    lrs.push_back(line.substr(a, line.find(',', a) - a));
  }
  EXPECT_EQ(lrs, (std::vector<std::string>{"0.000333", "0.000667", "0.001000", "0.001000"}));
}

// --amp on CPU: bfloat16 autocast changes the training (the weights differ from float32's) but the
// weights stay float32 and the loss finite; the loss scaler forced on CPU scales by powers of two,
// which bfloat16 and float32 represent exactly, so it trains bit for bit as without it — the
// gradients reach the step unscaled.
TEST(Trainer, AmpOnCpuTrainsInBfloat16WithFloat32Weights) {
  test::TempDir tmp;
  compress::TrainingHooks hooks;
  TrainConfig cfg;
  auto fp32 = train_tiny(cfg, tmp / "fp32", hooks, 2);
  cfg.amp = true;
  auto amp = train_tiny(cfg, tmp / "amp", hooks, 2);
  cfg.force_loss_scaler = true;
  auto scaled = train_tiny(cfg, tmp / "scaled", hooks, 2);
  auto p32 = fp32->named_parameters(), pa = amp->named_parameters(),
       ps = scaled->named_parameters();
  bool differs = false;
  for (const auto& kv : pa) {
    EXPECT_EQ(kv.value().scalar_type(), at::kFloat) << kv.key();
    EXPECT_TRUE(torch::isfinite(kv.value()).all().item<bool>()) << kv.key();
    EXPECT_TRUE(torch::equal(kv.value(), ps[kv.key()])) << kv.key();
    differs = differs || !torch::equal(kv.value(), p32[kv.key()]);
  }
  EXPECT_TRUE(differs);
  const auto a = Checkpoint::load(tmp / "amp" / "checkpoint.ckpt");
  EXPECT_TRUE(std::isfinite(a.meta().extra["metrics"]["psnr"].get<double>()));
  EXPECT_FALSE(a.meta().extra.contains("loss_scaler"));
  // 2 epochs of 2 minibatches, all clean: the scale is still 2^16 and has counted 4 steps.
  EXPECT_EQ(Checkpoint::load(tmp / "scaled" / "checkpoint.ckpt").meta().extra["loss_scaler"],
            nlohmann::json({{"scale", 65536.0}, {"growth_tracker", 4}}));
}

// --amp on CPU keeps the conv weights (and the inputs) in channels-last memory, where oneDNN's
// bfloat16 convolutions need no layout reorders; float32 training leaves the layout alone. Only the
// layout differs: the checkpoint loads into a freshly built model with the same values.
TEST(Trainer, AmpOnCpuKeepsConvWeightsChannelsLast) {
  test::TempDir tmp;
  compress::TrainingHooks hooks;
  TrainConfig cfg;
  auto fp32 = train_tiny(cfg, tmp / "fp32", hooks, 1);
  for (const auto& kv : fp32->named_parameters())
    EXPECT_TRUE(kv.value().is_contiguous()) << kv.key();
  cfg.amp = true;
  auto amp = train_tiny(cfg, tmp / "amp", hooks, 1);
  int64_t nhwc_only = 0;
  for (const auto& kv : amp->named_parameters()) {
    if (kv.value().dim() != 4) continue;
    EXPECT_TRUE(kv.value().is_contiguous(at::MemoryFormat::ChannelsLast)) << kv.key();
    nhwc_only += !kv.value().is_contiguous();
  }
  EXPECT_GT(nhwc_only, 0);
  auto loaded = model_from_checkpoint(Checkpoint::load(tmp / "amp" / "checkpoint.ckpt"));
  auto saved = amp->named_parameters();
  for (const auto& kv : loaded->named_parameters())
    EXPECT_TRUE(torch::equal(kv.value(), saved[kv.key()])) << kv.key();
}

// A data-parallel job with the loss scaler: rank 1 alone gets an infinite loss at epoch 0,
// batch 1. The gradients are averaged while scaled, so the inf reaches rank 0 too: both skip
// that step and halve the scale, and the ranks end with equal weights. Only rank 0 writes.
TEST(Trainer, DataParallelRanksAgreeToSkipANonFiniteStep) {
  class InfOnRank : public compress::TrainingHooks {
   public:
    explicit InfOnRank(bool poison) : poison_(poison) {}
    at::Tensor before_backward_pass(const compress::MinibatchInfo& i, const at::Tensor& loss,
                                    torch::optim::Optimizer&) override {
      const bool now = poison_ && i.epoch == 0 && i.batch == 1;
      return now ? loss * std::numeric_limits<double>::infinity() : loss;
    }

   private:
    bool poison_;
  };
  test::TempDir tmp;
  const int64_t port = free_local_port();
  std::vector<std::map<std::string, at::Tensor>> weights(2);
  std::vector<double> scales(2, 0);
  std::vector<std::string> errors(2);
  const auto rank = [&](int64_t r) {
    try {
      DistEnv env;
      env.rank = env.local_rank = r;
      env.world_size = env.local_world_size = 2;
      env.master_port = port;
      Distributed dist(env, std::chrono::seconds(30));
      TinySrTask task;
      InfOnRank hooks(r == 1);
      Logger logger;
      logger.set_quiet(true);
      RunContext ctx;
      ctx.logger = &logger;
      ctx.out_dir = tmp / ("rank" + std::to_string(r));
      ctx.dist = &dist;
      TrainConfig cfg;
      cfg.model = "espcn";
      cfg.epochs = 2;
      cfg.batch_size = 2;  // 2 ranks: 4 a step, as the single-process tests
      cfg.workers = 0;
      cfg.amp = true;
      cfg.force_loss_scaler = true;
      Trainer trainer(cfg, ctx, task, hooks, RunInfo{"sr", "optform: sr\n", {}});
      trainer.run();
      scales[r] = trainer.loss_scaler()->scale_value();
      for (const auto& kv : task.model()->named_parameters())
        weights[r][kv.key()] = kv.value().clone();
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  };
  torch::set_num_threads(1);
  std::thread rank0(rank, 0), rank1(rank, 1);
  rank0.join();
  rank1.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  // Step 0 clean, step 1 inf on rank 1: 2^16 · 0.5 on both ranks; steps 2 and 3 clean.
  EXPECT_EQ(scales[0], 32768.0);
  EXPECT_EQ(scales[1], 32768.0);
  ASSERT_FALSE(weights[0].empty());
  for (const auto& [name, value] : weights[0])
    EXPECT_TRUE(torch::equal(value, weights[1][name])) << name;
  EXPECT_TRUE(std::filesystem::exists(tmp / "rank0" / "checkpoint.ckpt"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "rank1"));
}

// The trainer skips the step whose gradients are not finite (the loss times infinity at epoch 0,
// batch 1) and halves the scale; the schedule sees unscaled gradients.
TEST(Trainer, LossScalerSkipsTheStepOfANonFiniteGradient) {
  class InfOnce : public compress::TrainingHooks {
   public:
    explicit InfOnce(Model m) : model_(std::move(m)) {}
    void on_minibatch_begin(const compress::MinibatchInfo&, torch::optim::Optimizer&) override {
      before_.clear();
      for (auto& p : model_->parameters()) before_.push_back(p.clone());
    }
    at::Tensor before_backward_pass(const compress::MinibatchInfo& i, const at::Tensor& loss,
                                    torch::optim::Optimizer&) override {
      poisoned_ = i.epoch == 0 && i.batch == 1;
      return poisoned_ ? loss * std::numeric_limits<double>::infinity() : loss;
    }
    void before_parameter_optimization(const compress::MinibatchInfo&,
                                       torch::optim::Optimizer& opt) override {
      // Unscaled gradients of a mean-squared error on [0, 1] images are far below 2^16.
      for (auto& p : opt.param_groups()[0].params())
        if (!poisoned_ && p.grad().abs().max().item<double>() > 100) scaled_grads = true;
    }
    void on_minibatch_end(const compress::MinibatchInfo& i, torch::optim::Optimizer&) override {
      auto params = model_->parameters();
      bool same = true;
      for (size_t k = 0; k < params.size(); ++k) same = same && torch::equal(params[k], before_[k]);
      unchanged.push_back(same);
    }
    std::vector<bool> unchanged;
    bool scaled_grads = false;

   private:
    Model model_;
    std::vector<at::Tensor> before_;
    bool poisoned_ = false;
  };
  test::TempDir tmp;
  TinySrTask task;
  InfOnce hooks(task.model());
  Logger logger;
  logger.set_quiet(true);
  RunContext ctx;
  ctx.logger = &logger;
  ctx.out_dir = tmp / "inf";
  TrainConfig cfg;
  cfg.model = "espcn";
  cfg.epochs = 2;
  cfg.batch_size = 4;
  cfg.workers = 0;
  cfg.amp = true;
  cfg.force_loss_scaler = true;
  Trainer trainer(cfg, ctx, task, hooks, RunInfo{"sr", "optform: sr\n", {}});
  trainer.run();
  EXPECT_EQ(hooks.unchanged, std::vector<bool>({false, true, false, false}));
  EXPECT_FALSE(hooks.scaled_grads);
  // Step 0 clean (count 1), step 1 inf (2^16·0.5 = 32768, count 0), steps 2 and 3 clean (count 2).
  ASSERT_NE(trainer.loss_scaler(), nullptr);
  EXPECT_EQ(trainer.loss_scaler()->scale_value(), 32768.0);
  EXPECT_EQ(trainer.loss_scaler()->growth_tracker(), 2);
}

// The scale and its count of clean steps live in the checkpoint and carry on after a resume.
TEST(Trainer, LossScalerStateIsRestoredOnResume) {
  test::TempDir tmp;
  compress::TrainingHooks hooks;
  TrainConfig cfg;
  cfg.amp = true;
  cfg.force_loss_scaler = true;
  cfg.loss_scale_growth_interval = 3;
  train_tiny(cfg, tmp / "run", hooks, 2);
  // 4 clean steps: the third grows 2^16 to 131072, the fourth counts 1.
  const auto ckpt = tmp / "run" / "checkpoint.ckpt";
  EXPECT_EQ(Checkpoint::load(ckpt).meta().extra["loss_scaler"],
            nlohmann::json({{"scale", 131072.0}, {"growth_tracker", 1}}));
  // Epoch 2's 2 steps complete the interval from the restored count (1 + 2 = 3): 131072·2. A
  // fresh scaler would end at 65536 with a count of 2.
  train_tiny(cfg, tmp / "run", hooks, 3, ckpt.string());
  EXPECT_EQ(Checkpoint::load(ckpt).meta().extra["loss_scaler"],
            nlohmann::json({{"scale", 262144.0}, {"growth_tracker", 0}}));
}

// --amp composes with a pruning schedule: AGP reaches its final sparsity and the masks hold the
// pruned weights at zero through bfloat16 training, with and without the loss scaler.
TEST(Trainer, AmpComposesWithAPruningSchedule) {
  test::TempDir tmp;
  Logger logger;
  logger.set_quiet(true);
  register_builtin_models();
  torch::set_num_threads(1);
  auto schedule = tmp / "igb_amp_agp.yaml";
  std::ofstream(schedule)
      << "version: 1\npruners:\n  p:\n    class: AutomatedGradualPruner\n"
         "    initial_sparsity: 0.1\n    final_sparsity: 0.7\n"
         "    weights: [mid_part.0.0.weight, mid_part.1.weight]\n"
         "policies:\n  - pruner: {instance_name: p}\n    starting_epoch: 0\n    ending_epoch: 2\n";
  for (bool scaler : {false, true}) {
    sr::SrConfig cfg;
    cfg.train.model = "fsrcnn";
    cfg.train.batch_size = 4;
    cfg.train.max_batches = 3;
    cfg.train.workers = 0;
    cfg.train.seed = 7;
    cfg.train.epochs = 2;
    cfg.train.compress = schedule.string();
    cfg.train.amp = true;
    cfg.train.force_loss_scaler = scaler;
    cfg.patch_size = 24;
    cfg.model_args = {{"d", 8}, {"s", 4}, {"m", 1}};
    RunContext ctx{&logger, tmp / (scaler ? "scaled" : "amp")};
    sr::train_sr(cfg, ctx, RunInfo{"sr", "", {}});
    auto ckpt = Checkpoint::load(ctx.out_dir / "checkpoint.ckpt");
    EXPECT_TRUE(std::isfinite(ckpt.meta().extra["metrics"]["psnr"].get<double>())) << scaler;
    auto model = model_from_checkpoint(ckpt);
    auto params = model->named_parameters();
    // AGP's last epoch (ending_epoch - 1) reaches 70% in both weights (within one element).
    for (const char* n : {"mid_part.0.0.weight", "mid_part.1.weight"}) {
      const auto& w = params[n];
      EXPECT_NEAR(w.eq(0).sum().item<double>(), std::floor(0.7 * w.numel()), 1.0) << n;
    }
  }
}

}  // namespace igb::models
