#include "compress/scheduler.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "compress/activation_pruners.h"
#include "compress/bn_fold_ranking.h"
#include "core/distributed.h"
#include "core/error.h"
#include "core/logger.h"
#include "core/optim_lr.h"
#include "core/tensor_util.h"

namespace igb::compress {

void register_builtin_compression() {
  register_builtin_pruners();
  register_builtin_regularizers();
  register_builtin_lr_schedulers();
  register_builtin_extensions();
  register_builtin_quantizers();
}

CompressionScheduler::CompressionScheduler(torch::nn::Module& model, double base_lr, Logger* logger)
    : model_(model), params_(model), base_lr_(base_lr), logger_(logger) {}

void CompressionScheduler::set_tracer(std::vector<int64_t> input_shape,
                                      graph::SummaryGraph::Forward forward) {
  input_shape_ = std::move(input_shape);
  forward_ = std::move(forward);
}

nlohmann::json CompressionScheduler::take_thinning_recipes() {
  auto out = std::move(pending_recipes_);
  pending_recipes_ = nlohmann::json::array();
  return out;
}

void CompressionScheduler::refresh_channel_groups() {
  if (!forward_ || !groups_stale_) return;
  groups_stale_ = false;
  auto groups =
      build_channel_groups(model_, graph::SummaryGraph::build(model_, input_shape_, forward_));
  params_.set_channel_groups(groups);
  // Say once which layers a filter pruner's choice extends to.
  for (const auto& [name, pruner] : pruners_)
    for (const auto& w : pruner->filter_targets()) {
      if (!groups->has(w) || groups_logged_.count(w)) continue;
      groups_logged_.insert(w);
      auto partners = groups->partners(w);
      if (!partners.empty() && logger_)
        logger_->info(file_ + ": pruner " + name + ": the filters of " + w +
                      " are tied by residual adds or concats to " + join(partners) +
                      "; those layers are added to its group and lose the same channels");
    }
}

void CompressionScheduler::set_policy_masks(const Policy& p, int64_t epoch) {
  if (!p.fold_batchnorm) {
    pruners_.at(p.instance)->set_masks(params_, masks_, epoch, p.timing);
    return;
  }
  if (!bn_pairs_) {
    if (!forward_)
      throw InputError(p.where +
                       ": fold_batchnorm needs the model traced to find its Conv2d → "
                       "BatchNorm pairs, and this scheduler has no tracer");
    bn_pairs_ =
        conv_batchnorm_pairs(model_, graph::SummaryGraph::build(model_, input_shape_, forward_));
    if (logger_)
      logger_->info(file_ + ": pruner " + p.instance + " ranks " +
                    std::to_string(bn_pairs_->size()) +
                    " convolution weights folded with their BatchNorms (fold_batchnorm)");
  }
  ModelParams folded = bn_folded_params(params_, *bn_pairs_);
  pruners_.at(p.instance)->set_masks(folded, masks_, epoch, p.timing);
}

void CompressionScheduler::run_extension(Extension& extension, int64_t epoch,
                                         torch::optim::Optimizer& optimizer) {
  const ExtensionContext ctx{model_, input_shape_, forward_, optimizer,
                             masks_, logger_,      file_,    thinning_width_};
  auto outcome = extension.apply(ctx, epoch);
  if (outcome.reshaped) {
    dense_copies_.clear();
    groups_stale_ = true;
    refresh_channel_groups();  // pruners acting later in the epoch see the thin model
  }
  if (!outcome.recipe.is_null()) pending_recipes_.push_back(std::move(outcome.recipe));
}

std::string CompressionScheduler::section_kind(Policy::Kind k) {
  switch (k) {
    case Policy::Kind::kPruner:
      return "pruner";
    case Policy::Kind::kRegularizer:
      return "regularizer";
    case Policy::Kind::kLrScheduler:
      return "lr_scheduler";
    case Policy::Kind::kExtension:
      return "extension";
    case Policy::Kind::kQuantizer:
      return "quantizer";
  }
  return "?";
}

void CompressionScheduler::warn_summarised(const std::vector<std::string>& lines,
                                           const std::string& rest) const {
  if (!logger_) return;
  const size_t shown = lines.size() > kWarningsShown + 1 ? kWarningsShown : lines.size();
  for (size_t i = 0; i < shown; ++i) logger_->warn(lines[i]);
  if (shown < lines.size())
    logger_->warn(file_ + ": … and " + std::to_string(lines.size() - shown) + " more " + rest);
}

void CompressionScheduler::set_epochs(int64_t epochs) {
  std::vector<std::string> late, long_running;
  for (const auto& p : policies_) {
    const std::string name = "the " + section_kind(p.kind) + " policy of '" + p.instance + "'";
    const int64_t first = p.timing.is_range()
                              ? p.timing.start
                              : *std::min_element(p.timing.epochs.begin(), p.timing.epochs.end());
    if (first >= epochs)
      late.push_back(p.where + ": " + name + " starts at epoch " + std::to_string(first) +
                     ", after the run's last epoch " + std::to_string(epochs - 1) + " (--epochs " +
                     std::to_string(epochs) + "); it never acts");
    else if (p.timing.last() >= epochs)
      long_running.push_back(p.where + ": " + name + " acts until epoch " +
                             std::to_string(p.timing.last()) + ", past the run's last epoch " +
                             std::to_string(epochs - 1) + " (--epochs " + std::to_string(epochs) +
                             "); it is cut short");
  }
  for (const auto& p : policies_)
    if (p.kind == Policy::Kind::kQuantizer && p.timing.last() < epochs - 1 && logger_)
      logger_->warn(p.where + ": the quantizer policy of '" + p.instance + "' ends at epoch " +
                    std::to_string(p.timing.last()) + ", before the run's last epoch " +
                    std::to_string(epochs - 1) +
                    "; the model stays quantized, so it keeps being quantized to the end");
  warn_summarised(late, "policies start after the run's last epoch");
  warn_summarised(long_running, "policies run past the run's last epoch");
}

void CompressionScheduler::setup_quantizer() {
  if (!quantizer_) return;
  const Policy* policy = nullptr;
  for (const auto& p : policies_)
    if (p.kind == Policy::Kind::kQuantizer) {
      if (policy)
        throw InputError(p.where + ": quantizer " + quantizer_->name() + " has a second policy (" +
                         policy->where + "); it takes one");
      policy = &p;
    }
  if (logger_)
    for (const auto& w : quantizer_->warnings()) logger_->warn(w);
  if (logger_ && quantizer_->narrowed_weight_bits() > 0)
    logger_->info("quantizer " + quantizer_->name() + ": weights narrowed to " +
                  std::to_string(quantizer_->narrowed_weight_bits()) +
                  " bits, integers within 63 (--int8-weights 7)");
  if (!policy) return;  // Distiller prepares the model only through a policy
  // Distiller prepares the model when the policy is built, whatever its epochs, and a policy
  // starting later would train with float weights but quantized activations.
  if (policy->timing.first() != 0)
    throw InputError(policy->where + ": the quantizer policy of '" + quantizer_->name() +
                     "' starts at epoch " + std::to_string(policy->timing.first()) +
                     "; Distiller quantizes the model from the start (when the schedule is "
                     "loaded), so it must start at epoch 0");
  for (const auto& p : policies_) {
    if (p.kind == Policy::Kind::kExtension)
      throw InputError(p.where + ": extension " + p.instance + " (" +
                       extensions_.at(p.instance)->class_name() + ") thins the model, which " +
                       "cannot be combined with quantizer " + quantizer_->name() +
                       " (thin before quantizing)");
    if (p.kind == Policy::Kind::kPruner &&
        dynamic_cast<const ActivationRankedFilterPruner*>(pruners_.at(p.instance).get()))
      throw InputError(p.where + ": pruner " + p.instance +
                       " ranks activations; a schedule cannot both rank activations and "
                       "quantize them");
    if (p.kind == Policy::Kind::kPruner && p.use_double_copies)
      throw InputError(p.where + ": use_double_copies cannot be combined with quantizer " +
                       quantizer_->name() + " (both keep a second copy of the weights)");
  }
  quantizer_->prepare_model(model_, logger_);
}

void CompressionScheduler::set_distributed(Distributed& dist) {
  // Statistics are per-batch means and every rank trains as many batches: the mean of the ranks'
  // means is the statistic of one process that saw all their batches.
  for (auto& [name, pruner] : pruners_)
    if (auto* ranked = dynamic_cast<ActivationRankedFilterPruner*>(pruner.get()))
      ranked->set_reducer([&dist](const at::Tensor& local) {
        const auto v = local.to(at::kDouble).contiguous();
        auto sums =
            dist.sum(std::vector<double>(v.data_ptr<double>(), v.data_ptr<double>() + v.numel()));
        return (at::tensor(sums, at::kDouble) / static_cast<double>(dist.world_size()))
            .to(local.scalar_type());
      });
}

std::vector<ParamGroup> CompressionScheduler::param_groups() const {
  return quantizer_ && quantizer_prepared() ? quantizer_->param_groups()
                                            : std::vector<ParamGroup>{};
}

nlohmann::json CompressionScheduler::quantization() const {
  if (!quantizer_prepared()) return nullptr;
  auto j = quantizer_->hyperparams();
  j["bits"] = quantizer_->bits_json();
  return j;
}

bool CompressionScheduler::quantizer_prepared() const {
  return quantizer_ && !quantizer_->targets().empty();
}

bool CompressionScheduler::controls_lr() const {
  return std::any_of(policies_.begin(), policies_.end(),
                     [](const Policy& p) { return p.kind == Policy::Kind::kLrScheduler; });
}

void CompressionScheduler::set_validation_metric(const std::string& primary,
                                                 bool higher_is_better) {
  primary_metric_ = primary;
  higher_is_better_ = higher_is_better;
  for (const auto& p : policies_)
    if (p.kind == Policy::Kind::kLrScheduler) {
      const auto& s = *lr_schedulers_.at(p.instance);
      if (s.watches_metric() && s.metric_mode() == "max" && !higher_is_better)
        throw InputError(p.where + ": LR scheduler " + p.instance +
                         " has mode max, which watches the primary metric, but " + primary +
                         " is better when lower; use mode: min");
    }
}

double CompressionScheduler::watched_metric(const Policy& p, const LrScheduler& s,
                                            const std::map<std::string, double>& metrics) const {
  if (primary_metric_.empty())
    throw std::logic_error("ReduceLROnPlateau needs set_validation_metric() on the scheduler");
  std::string name;
  if (s.metric_mode() == "max") {
    name = primary_metric_;
  } else if (metrics.count("loss")) {
    name = "loss";
  } else if (!higher_is_better_) {
    name = primary_metric_;
  } else {
    std::vector<std::string> reported;
    for (const auto& kv : metrics)
      if (kv.first != "train_loss") reported.push_back(kv.first);
    throw InputError(p.where + ": LR scheduler " + p.instance +
                     " has mode min, which watches the validation loss 'loss', but this run "
                     "reports none (its metrics: " +
                     join(reported) + "); use mode: max to watch " + primary_metric_);
  }
  auto it = metrics.find(name);
  if (it == metrics.end())
    throw std::logic_error("the epoch's metrics hold no '" + name + "' for ReduceLROnPlateau");
  return it->second;
}

void CompressionScheduler::step_lr_schedulers(int64_t epoch,
                                              const std::map<std::string, double>& metrics,
                                              torch::optim::Optimizer& optimizer) {
  for (const auto& p : policies_) {
    if (p.kind != Policy::Kind::kLrScheduler || !p.timing.active(epoch)) continue;
    auto& scheduler = *lr_schedulers_.at(p.instance);
    LrStep step{epoch, base_lr_, igb::get_lr(optimizer), std::nan("")};
    if (scheduler.watches_metric()) step.metric = watched_metric(p, scheduler, metrics);
    const double lr = scheduler.step(step);
    auto* plateau = dynamic_cast<const ReduceLROnPlateau*>(&scheduler);
    if (plateau && plateau->options().verbose() && lr != step.current_lr && logger_) {
      std::ostringstream line;
      line << file_ << ": " << p.instance << " (ReduceLROnPlateau): after epoch " << epoch
           << " the learning rate is reduced from " << step.current_lr << " to " << lr;
      logger_->info(line.str());
    }
    igb::set_lr(optimizer, lr);
    lr_set_ = lr;
  }
}

bool CompressionScheduler::pruning_at(int64_t epoch) const {
  return std::any_of(policies_.begin(), policies_.end(), [epoch](const Policy& p) {
    return p.kind == Policy::Kind::kPruner && p.timing.active(epoch);
  });
}

void CompressionScheduler::apply_masks() {
  torch::NoGradGuard no_grad;
  for (const auto& [name, mask] : masks_) params_.at(name).mul_(mask);
}

void CompressionScheduler::on_epoch_begin(int64_t epoch, torch::optim::Optimizer& optimizer) {
  epoch_ = epoch;
  extensions_done_.clear();
  if (epoch == 0 && !reapply_lr_) {
    // PyTorch's schedulers set their rate at epoch 0 when Distiller builds them, in the order the
    // file defines them (only a milestone at 0 makes it differ from --lr).
    for (const auto& name : lr_defined_)
      if (auto* closed = dynamic_cast<ClosedFormLrScheduler*>(lr_schedulers_.at(name).get()))
        igb::set_lr(optimizer, *(lr_set_ = closed->lr(base_lr_, 0)));
  }
  if (reapply_lr_ && lr_set_) igb::set_lr(optimizer, *lr_set_);
  reapply_lr_ = false;
  refresh_channel_groups();
  for (size_t i = 0; i < policies_.size(); ++i) {
    const auto& p = policies_[i];
    if (p.kind != Policy::Kind::kPruner || !p.timing.active(epoch)) continue;
    skip_pending_.erase(i);
    if (started_.insert(i).second) {
      modes_ = {p.mask_on_forward_only, p.use_double_copies, p.mask_gradients};
      if (p.skip_first_minibatch) {
        skip_pending_.insert(i);
        continue;
      }
    }
    set_policy_masks(p, epoch);
  }
  // What the first minibatch would mask anyway, now, so the epoch starts from masked weights;
  // dense copies keep their dense weights until the forward pass.
  if (!modes_.double_copies && (!modes_.forward_only || pruning_at(epoch))) apply_masks();
}

void CompressionScheduler::on_minibatch_begin(const MinibatchInfo& info,
                                              torch::optim::Optimizer& optimizer) {
  const int64_t global = info.epoch * info.batches_per_epoch + info.batch;
  bool pruning = false;
  for (size_t i = 0; i < policies_.size(); ++i) {
    const auto& p = policies_[i];
    if (p.kind != Policy::Kind::kPruner || !p.timing.active(info.epoch)) continue;
    pruning = true;
    bool set = info.batch > 0 && p.mini_batch_pruning_frequency > 0 &&
               global % p.mini_batch_pruning_frequency == 0;
    if (info.batch > 0 && skip_pending_.erase(i)) set = true;
    if (set) set_policy_masks(p, info.epoch);
  }
  // Only an epoch with a pruning policy masks before the forward pass.
  if (pruning) {
    torch::NoGradGuard no_grad;
    for (const auto& [name, mask] : masks_) {
      if (modes_.double_copies) dense_copies_[name] = params_.at(name).clone();
      params_.at(name).mul_(mask);
    }
  }
  // Thinning at the epoch's first minibatch, on the masked weights, so the epoch trains the thin
  // model.
  for (size_t i = 0; i < policies_.size(); ++i) {
    const auto& p = policies_[i];
    if (p.kind == Policy::Kind::kExtension && p.timing.active(info.epoch) &&
        extensions_done_.insert(i).second)
      run_extension(*extensions_.at(p.instance), info.epoch, optimizer);
  }
}

at::Tensor CompressionScheduler::before_backward_pass(const MinibatchInfo& info,
                                                      const at::Tensor& loss,
                                                      torch::optim::Optimizer&) {
  at::Tensor total = loss;
  for (const auto& p : policies_)
    if (p.kind == Policy::Kind::kRegularizer && p.timing.active(info.epoch))
      total = total + regularizers_.at(p.instance)->loss(params_);
  return total;
}

void CompressionScheduler::before_parameter_optimization(const MinibatchInfo&,
                                                         torch::optim::Optimizer&) {
  // The quantizer first: the gradient at Wq is carried to the float master, which gradient masks
  // and dense copies then act on.
  if (quantizer_) quantizer_->before_step();
  torch::NoGradGuard no_grad;
  if (modes_.mask_gradients)
    for (const auto& [name, mask] : masks_) {
      auto& param = params_.at(name);
      if (param.grad().defined()) param.mutable_grad().mul_(mask);
    }
  // Double copies: the optimizer updates the dense weights with the gradient of the masked ones.
  for (const auto& [name, dense] : dense_copies_) params_.at(name).copy_(dense);
  dense_copies_.clear();
}

void CompressionScheduler::on_minibatch_end(const MinibatchInfo& info, torch::optim::Optimizer&) {
  torch::NoGradGuard no_grad;
  if (!modes_.forward_only) apply_masks();
  // Distiller's QuantizationPolicy.on_minibatch_end: re-quantize after the step and the masks.
  if (quantizer_) quantizer_->after_step();
  for (const auto& p : policies_) {
    if (!p.timing.active(info.epoch)) continue;
    if (p.kind == Policy::Kind::kPruner && p.discard_masks_at_minibatch_end) masks_.clear();
    if (p.kind != Policy::Kind::kRegularizer || !regularizers_.at(p.instance)->has_threshold())
      continue;
    MaskTable fresh;
    regularizers_.at(p.instance)->threshold(params_, fresh);
    // The mask stays only from the last minibatch of the policy's last epoch; before that it
    // zeroes once and training decides.
    if (p.keep_mask && info.batch + 1 == info.batches_per_epoch && info.epoch == p.timing.last()) {
      for (auto& [n, m] : fresh) masks_[n] = masks_.count(n) ? masks_[n] * m : m;
      if (logger_)
        logger_->info(file_ + ": regularizer " + p.instance + " keeps its threshold masks");
    }
    for (auto& [n, m] : fresh) params_.at(n).mul_(m);
  }
}

void CompressionScheduler::on_epoch_end(int64_t epoch, const std::map<std::string, double>& metrics,
                                        torch::optim::Optimizer& optimizer) {
  step_lr_schedulers(epoch, metrics, optimizer);
  for (const auto& p : policies_) {
    if (p.kind != Policy::Kind::kPruner || epoch != p.timing.final_epoch()) continue;
    // The policy ends: gradients are no longer masked, and with keep_mask the masks become
    // permanent, whatever the masking modes were.
    modes_.mask_gradients = false;
    if (p.keep_mask) {
      modes_.forward_only = modes_.double_copies = false;
      apply_masks();
    }
  }
}

std::vector<EpochScalar> CompressionScheduler::epoch_scalars() const {
  std::vector<EpochScalar> out;
  double zeros = 0, total = 0;
  auto& params = const_cast<ModelParams&>(params_);
  for (const auto& w : params.weight_names()) {
    const auto& t = params.at(w);
    zeros += static_cast<double>(count_zeros(t));
    total += static_cast<double>(t.numel());
  }
  out.push_back({"sparsity", "sparsity/weights/total", total > 0 ? zeros / total : 0});
  for (const auto& n : named_params_)
    out.push_back({"sparsity/" + n, "sparsity/weights/" + n, sparsity(params.at(n))});
  if (quantizer_)
    for (auto& s : quantizer_->epoch_scalars()) out.push_back(std::move(s));
  return out;
}

void CompressionScheduler::save_state(torch::serialize::OutputArchive& archive) const {
  std::vector<std::string> names;
  int64_t i = 0;
  for (const auto& [name, mask] : masks_) {
    names.push_back(name);
    archive.write("mask" + std::to_string(i++), mask);
  }
  nlohmann::json lr = {{"lr", lr_set_ ? nlohmann::json(*lr_set_) : nlohmann::json(nullptr)},
                       {"schedulers", nlohmann::json::object()}};
  for (const auto& [name, scheduler] : lr_schedulers_)
    if (auto state = scheduler->state(); !state.is_null()) lr["schedulers"][name] = state;
  archive.write("mask_names", c10::IValue(nlohmann::json(names).dump()));
  const nlohmann::json modes = {
      {"modes", {modes_.forward_only, modes_.double_copies, modes_.mask_gradients}},
      {"started", started_},
      {"skip_pending", skip_pending_}};
  archive.write("policy_state", c10::IValue(modes.dump()));
  archive.write("lr_state", c10::IValue(lr.dump()));
  archive.write("schedule_text", c10::IValue(text_));
  if (quantizer_) quantizer_->save_state(archive);
}

void CompressionScheduler::load_state(torch::serialize::InputArchive& archive) {
  c10::IValue names_v, lr_v;
  if (!archive.try_read("mask_names", names_v)) return;
  if (quantizer_) quantizer_->load_state(archive);
  auto names = nlohmann::json::parse(names_v.toStringRef()).get<std::vector<std::string>>();
  masks_.clear();
  for (size_t i = 0; i < names.size(); ++i) {
    if (!params_.contains(names[i]))
      throw InputError("checkpoint holds a mask for '" + names[i] +
                       "', which the model does not have");
    at::Tensor m;
    archive.read("mask" + std::to_string(i), m);
    if (!m.sizes().equals(params_.at(names[i]).sizes()))
      throw InputError("checkpoint mask for '" + names[i] +
                       "' does not match the parameter's shape");
    masks_[names[i]] = m;
  }
  c10::IValue modes_v;
  if (archive.try_read("policy_state", modes_v)) {
    const auto j = nlohmann::json::parse(modes_v.toStringRef());
    const auto modes = j.at("modes").get<std::vector<bool>>();
    modes_ = {modes.at(0), modes.at(1), modes.at(2)};
    started_ = j.at("started").get<std::set<size_t>>();
    skip_pending_ = j.at("skip_pending").get<std::set<size_t>>();
  }
  // (Checkpoints written before "lr_state" hold the rate in their optimizer state only.)
  if (archive.try_read("lr_state", lr_v)) {
    const auto lr = nlohmann::json::parse(lr_v.toStringRef());
    for (const auto& [name, state] : lr.at("schedulers").items()) {
      if (!lr_schedulers_.count(name))
        throw InputError("checkpoint holds the state of LR scheduler '" + name +
                         "', which the schedule does not define");
      lr_schedulers_.at(name)->load_state(state);
    }
    if (!lr.at("lr").is_null()) lr_set_ = lr.at("lr").get<double>();
    reapply_lr_ = true;
  }
}

}  // namespace igb::compress
