#include "compress/scheduler.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "compress/activation_pruners.h"
#include "compress/yaml_reader.h"
#include "core/distributed.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/optim_lr.h"
#include "core/tensor_util.h"

namespace igb::compress {

namespace {

const std::vector<std::string> kTopLevel = {
    "version", "pruners", "regularizers", "quantizers", "extensions", "lr_schedulers", "policies"};

std::string section_kind(Policy::Kind k) {
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

}  // namespace

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
                                      tools::SummaryGraph::Forward forward) {
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
      build_channel_groups(model_, tools::SummaryGraph::build(model_, input_shape_, forward_));
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

void CompressionScheduler::run_extension(Extension& extension, int64_t epoch,
                                         torch::optim::Optimizer& optimizer) {
  const ExtensionContext ctx{model_, input_shape_, forward_, optimizer, masks_, logger_, file_};
  auto outcome = extension.apply(ctx, epoch);
  if (outcome.reshaped) {
    dense_copies_.clear();
    groups_stale_ = true;
    refresh_channel_groups();  // pruners acting later in the epoch see the thin model
  }
  if (!outcome.recipe.is_null()) pending_recipes_.push_back(std::move(outcome.recipe));
}

std::unique_ptr<CompressionScheduler> CompressionScheduler::from_file(const std::string& path,
                                                                      torch::nn::Module& model,
                                                                      double base_lr,
                                                                      Logger* logger) {
  if (!std::filesystem::exists(path)) throw InputError("schedule " + path + " does not exist");
  return from_text(read_text_file(path), path, model, base_lr, logger);
}

std::unique_ptr<CompressionScheduler> CompressionScheduler::from_text(const std::string& text,
                                                                      const std::string& file,
                                                                      torch::nn::Module& model,
                                                                      double base_lr,
                                                                      Logger* logger) {
  register_builtin_compression();
  std::unique_ptr<CompressionScheduler> s(new CompressionScheduler(model, base_lr, logger));
  s->parse(text, file);
  return s;
}

namespace {

// Parses the YAML and checks the top-level keys and the version (absent: version 1, with a
// warning, as Distiller never reads it).
YAML::Node load_schedule_root(const std::string& text, const std::string& file, Logger* logger) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(file + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
  if (!root.IsMap())
    throw InputError(file + ": a schedule is a mapping with version, pruners, …, policies");
  check_duplicate_keys(root, file);
  for (const auto& kv : root) {
    auto key = yaml_scalar(file, kv.first, "a top-level key");
    if (std::find(kTopLevel.begin(), kTopLevel.end(), key) == kTopLevel.end())
      throw InputError(yaml_where(file, kv.first) + ": unknown top-level key '" + key +
                       "'; did you mean " + join(closest_names(key, kTopLevel, 2), " or ") +
                       "? (valid: " + join(kTopLevel) + ")");
  }
  if (!root["version"]) {
    if (logger) logger->warn(file + ": the schedule has no 'version'; it is read as version 1");
    return root;
  }
  const YAML::Node version = root["version"];
  if (!version.IsScalar())
    throw InputError(yaml_where(file, version) +
                     ": version has the wrong type of value: expected 1, got " +
                     yaml_describe(version));
  if (version.Scalar() != "1")
    throw InputError(yaml_where(file, version) + ": version " + version.Scalar() +
                     " is not supported (only 1)");
  return root;
}

/// Builds one instance of a section from its class, its mapping (keys checked after) and the
/// file:line of its `class`.
using MakeInstance = std::function<void(const std::string& name, const std::string& cls,
                                        YamlReader& yaml, const std::string& where)>;

// Calls `make` for each instance of `section`; instance names are unique across sections.
void for_each_instance(const YAML::Node& root, const std::string& file, const char* section,
                       std::set<std::string>& all_names, const MakeInstance& make) {
  YAML::Node n = root[section];
  if (!n || n.IsNull()) return;
  if (!n.IsMap())
    throw InputError(yaml_where(file, n) + ": '" + section +
                     "' must map instance names to {class: …}");
  for (const auto& kv : n) {
    const auto name = yaml_scalar(file, kv.first, std::string("an instance name in ") + section);
    const auto where = yaml_where(file, kv.first);
    if (!all_names.insert(name).second)
      throw InputError(where + ": instance name '" + name + "' is used twice");
    if (!kv.second.IsMap() || !kv.second["class"])
      throw InputError(where + ": " + section + "." + name + " needs a 'class'");
    const auto cls =
        yaml_scalar(file, kv.second["class"], std::string(section) + "." + name + ".class");
    YamlReader r(kv.second, file, std::string(section) + "." + name + " (" + cls + ")");
    r.ignore({"class"});
    make(name, cls, r, yaml_where(file, kv.second["class"]));
    r.finish();
  }
}

InputError unknown_class(const std::string& where, const std::string& cls,
                         const std::vector<std::string>& valid, const char* what) {
  return InputError(where + ": unknown " + std::string(what) + " class '" + cls +
                    "'; valid: " + join(valid));
}

// Which kind of policy `r` is (exactly one of its kind keys) and the mapping under that key.
YAML::Node read_policy_kind(YamlReader& r, Policy& policy) {
  const std::vector<std::pair<std::string, Policy::Kind>> kinds = {
      {"pruner", Policy::Kind::kPruner},
      {"regularizer", Policy::Kind::kRegularizer},
      {"lr_scheduler", Policy::Kind::kLrScheduler},
      {"extension", Policy::Kind::kExtension},
      {"quantizer", Policy::Kind::kQuantizer}};
  int found = 0;
  YAML::Node body;
  for (const auto& [key, kind] : kinds) {
    if (r.has(key)) {
      ++found;
      policy.kind = kind;
      body = r.node(key);
    } else {
      r.ignore({key});
    }
  }
  if (found != 1)
    throw InputError(
        policy.where +
        ": a policy names exactly one of pruner, regularizer, quantizer, lr_scheduler, "
        "extension (this one names " +
        std::to_string(found) + ")");
  return body;
}

// The policy's `args` (Distiller's masking modes for pruners, keep_mask for regularizers).
void read_policy_args(const YAML::Node& args, const std::string& file, Policy& policy) {
  if (!args || args.IsNull()) return;
  YamlReader a(args, file, "policy args of " + policy.instance);
  if (policy.kind == Policy::Kind::kPruner) {
    policy.keep_mask = a.get<bool>("keep_mask", false);
    policy.mini_batch_pruning_frequency = a.get<int64_t>("mini_batch_pruning_frequency", 0);
    policy.mask_on_forward_only = a.get<bool>("mask_on_forward_only", false);
    policy.mask_gradients = a.get<bool>("mask_gradients", false);
    policy.use_double_copies = a.get<bool>("use_double_copies", false);
    policy.discard_masks_at_minibatch_end = a.get<bool>("discard_masks_at_minibatch_end", false);
    policy.skip_first_minibatch = a.get<bool>("skip_first_minibatch", false);
    if (policy.mini_batch_pruning_frequency < 0)
      throw InputError(a.where("mini_batch_pruning_frequency") +
                       ": mini_batch_pruning_frequency must be >= 0");
    // Distiller refuses it too: the weights a gradient mask protects would be re-masked anyway.
    if (policy.mask_gradients && !policy.mask_on_forward_only)
      throw InputError(a.where("mask_gradients") +
                       ": mask_gradients needs mask_on_forward_only: true (without it the masks "
                       "are applied after every step)");
  } else if (policy.kind == Policy::Kind::kRegularizer) {
    policy.keep_mask = a.get<bool>("keep_mask", false);
  }
  a.finish();
}

// The policy's timing: starting_epoch/ending_epoch/frequency, or a list of epochs.
void read_policy_timing(YamlReader& r, Policy& policy) {
  const bool range = r.has("starting_epoch") || r.has("ending_epoch") || r.has("frequency");
  const bool list = r.has("epochs");
  if (range && list)
    throw InputError(
        policy.where +
        ": a policy's timing is either starting_epoch/ending_epoch/frequency or epochs, not both");
  if (list) {
    policy.timing.epochs = r.get<std::vector<int64_t>>("epochs");
    r.ignore({"starting_epoch", "ending_epoch", "frequency"});
    if (policy.timing.epochs.empty())
      throw InputError(r.where("epochs") + ": the policy's epochs list is empty");
    for (auto e : policy.timing.epochs)
      if (e < 0)
        throw InputError(r.where("epochs") + ": epoch " + std::to_string(e) + " is negative");
    return;
  }
  r.ignore({"epochs"});
  if (!range)
    throw InputError(
        policy.where +
        ": the policy has no timing (starting_epoch, ending_epoch, frequency, or epochs)");
  policy.timing.start = r.get<int64_t>("starting_epoch");
  policy.timing.end = r.get<int64_t>("ending_epoch");
  policy.timing.frequency = r.get<int64_t>("frequency", 1);
  if (policy.timing.start < 0)
    throw InputError(r.where("starting_epoch") + ": starting_epoch is negative");
  if (policy.timing.end <= policy.timing.start)
    throw InputError(r.where("ending_epoch") + ": ending_epoch " +
                     std::to_string(policy.timing.end) + " is not after starting_epoch " +
                     std::to_string(policy.timing.start) +
                     " (the range is empty; ending_epoch is exclusive)");
  if (policy.timing.frequency <= 0)
    throw InputError(r.where("frequency") + ": frequency must be positive");
}

template <class Table>
std::vector<std::string> instance_names(const Table& table) {
  std::vector<std::string> out;
  for (const auto& kv : table) out.push_back(kv.first);
  return out;
}

}  // namespace

void CompressionScheduler::parse(const std::string& text, const std::string& file) {
  text_ = text;
  file_ = file;
  std::set<std::string> instances, used;
  try {
    const YAML::Node root = load_schedule_root(text, file, logger_);
    parse_pruners(root, instances);
    parse_regularizers(root, instances);
    parse_lr_schedulers(root, instances);
    parse_extensions(root, instances);
    parse_quantizers(root, instances);
    used = parse_policies(root);
  } catch (const YAML::Exception& e) {
    // Every read above names its key; this is the net under one that does not.
    throw InputError(file + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (logger_ && !params_.stripped().empty()) {
    std::vector<std::string> renamed;
    for (const auto& [given, resolved] : params_.stripped())
      renamed.push_back(given + " -> " + resolved);
    const size_t more = renamed.size() > kWarningsShown + 1 ? renamed.size() - kWarningsShown : 0;
    renamed.resize(renamed.size() - more);
    logger_->info(file +
                  ": parameter names read without their 'module' path segments "
                  "(DataParallel wrappers): " +
                  join(renamed) + (more ? " and " + std::to_string(more) + " more" : ""));
  }
  std::vector<std::string> unused;
  for (const auto& n : instances)
    if (!used.count(n)) unused.push_back(file + ": '" + n + "' is defined but no policy uses it");
  warn_summarised(unused, "instances are defined but no policy uses them");
  // LR policies act after all others within a hook (Distiller's CompressionScheduler;
  // docs/schedules.md).
  std::stable_partition(policies_.begin(), policies_.end(),
                        [](const Policy& p) { return p.kind != Policy::Kind::kLrScheduler; });
  setup_quantizer();
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

void CompressionScheduler::parse_pruners(const YAML::Node& root, std::set<std::string>& instances) {
  for_each_instance(
      root, file_, "pruners", instances,
      [&](const std::string& name, const std::string& cls, YamlReader& r, const std::string& w) {
        if (!pruner_registry().contains(cls))
          throw unknown_class(w, cls, pruner_registry().names(), "pruner");
        pruners_[name] = pruner_registry().get(cls)(name, r, params_);
      });
}

void CompressionScheduler::parse_regularizers(const YAML::Node& root,
                                              std::set<std::string>& instances) {
  for_each_instance(
      root, file_, "regularizers", instances,
      [&](const std::string& name, const std::string& cls, YamlReader& r, const std::string& w) {
        if (!regularizer_registry().contains(cls))
          throw unknown_class(w, cls, regularizer_registry().names(), "regularizer");
        regularizers_[name] = regularizer_registry().get(cls)(name, r, params_);
      });
}

void CompressionScheduler::parse_lr_schedulers(const YAML::Node& root,
                                               std::set<std::string>& instances) {
  for_each_instance(
      root, file_, "lr_schedulers", instances,
      [&](const std::string& name, const std::string& cls, YamlReader& r, const std::string& w) {
        if (!lr_scheduler_registry().contains(cls))
          throw unknown_class(w, cls, lr_scheduler_registry().names(), "LR scheduler");
        lr_schedulers_[name] = lr_scheduler_registry().get(cls)(r);
        lr_defined_.push_back(name);
      });
}

void CompressionScheduler::parse_extensions(const YAML::Node& root,
                                            std::set<std::string>& instances) {
  for_each_instance(
      root, file_, "extensions", instances,
      [&](const std::string& name, const std::string& cls, YamlReader& r, const std::string& w) {
        if (!extension_registry().contains(cls))
          throw unknown_class(w, cls, extension_registry().names(), "extension");
        extensions_[name] = extension_registry().get(cls)(name, r);
      });
}

void CompressionScheduler::parse_quantizers(const YAML::Node& root,
                                            std::set<std::string>& instances) {
  YAML::Node q = root["quantizers"];
  if (q && q.IsMap() && q.size() > 1)
    throw InputError(yaml_where(file_, q) +
                     ": a schedule has at most one quantizer, this one has " +
                     std::to_string(q.size()));
  for_each_instance(
      root, file_, "quantizers", instances,
      [&](const std::string& name, const std::string& cls, YamlReader& r, const std::string& w) {
        if (cls == "PostTrainLinearQuantizer")
          throw InputError(w + ": quantizer " + name +
                           " (PostTrainLinearQuantizer) quantizes a trained model for evaluation: "
                           "give this file to igb-test --quantize-eval, not to a training run");
        if (!quantizer_registry().contains(cls))
          throw unknown_class(w, cls, quantizer_registry().names(), "quantizer");
        if (!quantizer_registry().get(cls).make)
          throw InputError(w + ": quantizer " + name + " (" + cls +
                           "): this class is not available in this build");
        quantizer_ = quantizer_registry().get(cls).make(name, r, params_);
      });
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

std::set<std::string> CompressionScheduler::parse_policies(const YAML::Node& root) {
  YAML::Node pol = root["policies"];
  if (!pol || !pol.IsSequence() || pol.size() == 0)
    throw InputError(file_ + ": the schedule has no 'policies' list, so it would do nothing");
  std::set<std::string> used;
  for (const auto& p : pol) {
    policies_.push_back(parse_policy(p));
    used.insert(policies_.back().instance);
  }
  return used;
}

Policy CompressionScheduler::parse_policy(const YAML::Node& p) {
  Policy policy;
  policy.where = yaml_where(file_, p);
  if (!p.IsMap()) throw InputError(policy.where + ": a policy is a mapping");
  YamlReader r(p, file_, "policy");
  const YAML::Node body = read_policy_kind(r, policy);
  YamlReader b(body, file_, "policy " + section_kind(policy.kind));
  policy.instance = b.get<std::string>("instance_name");
  const YAML::Node args = b.node("args");
  b.finish();
  check_policy_instance(policy, b);
  read_policy_args(args, file_, policy);
  read_policy_timing(r, policy);
  r.finish();
  check_policy_timing(policy);
  note_named_params(policy);
  return policy;
}

void CompressionScheduler::check_policy_instance(const Policy& policy,
                                                 const YamlReader& body) const {
  std::vector<std::string> defined;
  switch (policy.kind) {
    case Policy::Kind::kPruner:
      defined = instance_names(pruners_);
      break;
    case Policy::Kind::kRegularizer:
      defined = instance_names(regularizers_);
      break;
    case Policy::Kind::kLrScheduler:
      defined = instance_names(lr_schedulers_);
      break;
    case Policy::Kind::kExtension:
      defined = instance_names(extensions_);
      break;
    case Policy::Kind::kQuantizer:
      if (quantizer_) defined = {quantizer_->name()};
      break;
  }
  if (std::find(defined.begin(), defined.end(), policy.instance) == defined.end())
    throw InputError(body.where("instance_name") + ": no " + section_kind(policy.kind) +
                     " named '" + policy.instance +
                     "'; defined: " + (defined.empty() ? std::string("none") : join(defined)));
}

void CompressionScheduler::check_policy_timing(const Policy& policy) const {
  if (policy.kind == Policy::Kind::kPruner && pruners_.at(policy.instance)->needs_range_timing() &&
      !policy.timing.is_range())
    throw InputError(
        policy.where + ": pruner " + policy.instance +
        " follows the AGP schedule and needs starting_epoch/ending_epoch/frequency, not epochs");
}

void CompressionScheduler::note_named_params(const Policy& policy) {
  auto add_named = [&](const std::vector<std::string>& names) {
    for (const auto& n : names)
      if (std::find(named_params_.begin(), named_params_.end(), n) == named_params_.end())
        named_params_.push_back(n);
  };
  if (policy.kind == Policy::Kind::kPruner) add_named(pruners_.at(policy.instance)->targets());
  if (policy.kind == Policy::Kind::kRegularizer)
    add_named(regularizers_.at(policy.instance)->targets());
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
    pruners_.at(p.instance)->set_masks(params_, masks_, epoch, p.timing);
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
    if (set) pruners_.at(p.instance)->set_masks(params_, masks_, info.epoch, p.timing);
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
