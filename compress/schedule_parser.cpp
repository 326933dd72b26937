#include "compress/scheduler.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <functional>
#include <set>

#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/yaml_reader.h"

namespace igb::compress {

class CompressionScheduler::Parser {
 public:
  Parser(CompressionScheduler& scheduler, const WeightNarrowing& narrowing)
      : s_(scheduler), narrowing_(narrowing) {}
  /// Reads a schedule: the YAML, its top-level keys and version, each section's instances (their
  /// names added to `instances`), then the policies, then warns of instances no policy uses.
  void parse(const std::string& text, const std::string& file);

 private:
  void parse_pruners(const YAML::Node& root, std::set<std::string>& instances);
  void parse_regularizers(const YAML::Node& root, std::set<std::string>& instances);
  void parse_lr_schedulers(const YAML::Node& root, std::set<std::string>& instances);
  void parse_extensions(const YAML::Node& root, std::set<std::string>& instances);
  /// Reads the quantizer (at most one; its name added to `instances`).
  void parse_quantizers(const YAML::Node& root, std::set<std::string>& instances);
  /// Appends every policy to policies_; returns the instance names they use.
  std::set<std::string> parse_policies(const YAML::Node& root);
  Policy parse_policy(const YAML::Node& node);
  /// The policy's instance_name names an instance of its kind (`body` is its mapping, for
  /// file:line).
  void check_policy_instance(const Policy& policy, const YamlReader& body) const;
  /// Cross-check of a pruner and its policy: AGP needs a range of epochs.
  void check_policy_timing(const Policy& policy) const;
  /// Adds the parameters the policy's pruner or regularizer names to named_params_.
  void note_named_params(const Policy& policy);

  CompressionScheduler& s_;
  WeightNarrowing narrowing_;
};

std::unique_ptr<CompressionScheduler> CompressionScheduler::from_file(
    const std::string& path, torch::nn::Module& model, double base_lr, Logger* logger,
    const WeightNarrowing& narrowing) {
  if (!std::filesystem::exists(path)) throw InputError("schedule " + path + " does not exist");
  return from_text(read_text_file(path), path, model, base_lr, logger, narrowing);
}

std::unique_ptr<CompressionScheduler> CompressionScheduler::from_text(
    const std::string& text, const std::string& file, torch::nn::Module& model, double base_lr,
    Logger* logger, const WeightNarrowing& narrowing) {
  register_builtin_compression();
  std::unique_ptr<CompressionScheduler> s(new CompressionScheduler(model, base_lr, logger));
  Parser(*s, narrowing).parse(text, file);
  s->setup_quantizer();
  return s;
}

namespace {

const std::vector<std::string> kTopLevel = {
    "version", "pruners", "regularizers", "quantizers", "extensions", "lr_schedulers", "policies"};

// Parses the YAML and checks the top-level keys and the version (absent: version 1, with a
// warning, as Distiller never reads it).
YAML::Node load_schedule_root(const std::string& text, const std::string& file, Logger* logger) {
  const YAML::Node root = parse_yaml(text, file);
  if (!root.IsMap())
    throw InputError(file + ": a schedule is a mapping with version, pruners, …, policies");
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
    policy.fold_batchnorm = a.get<bool>("fold_batchnorm", false);
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

void CompressionScheduler::Parser::parse(const std::string& text, const std::string& file) {
  s_.text_ = text;
  s_.file_ = file;
  std::set<std::string> instances, used;
  try {
    const YAML::Node root = load_schedule_root(text, file, s_.logger_);
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
  if (s_.logger_ && !s_.params_.stripped().empty()) {
    std::vector<std::string> renamed;
    for (const auto& [given, resolved] : s_.params_.stripped())
      renamed.push_back(given + " -> " + resolved);
    const size_t more = renamed.size() > kWarningsShown + 1 ? renamed.size() - kWarningsShown : 0;
    renamed.resize(renamed.size() - more);
    s_.logger_->info(file +
                     ": parameter names read without their 'module' path segments "
                     "(DataParallel wrappers): " +
                     join(renamed) + (more ? " and " + std::to_string(more) + " more" : ""));
  }
  std::vector<std::string> unused;
  for (const auto& n : instances)
    if (!used.count(n)) unused.push_back(file + ": '" + n + "' is defined but no policy uses it");
  s_.warn_summarised(unused, "instances are defined but no policy uses them");
  // LR policies act after all others within a hook (Distiller's CompressionScheduler;
  // docs/schedules.md).
  std::stable_partition(s_.policies_.begin(), s_.policies_.end(),
                        [](const Policy& p) { return p.kind != Policy::Kind::kLrScheduler; });
}

void CompressionScheduler::Parser::parse_pruners(const YAML::Node& root,
                                                 std::set<std::string>& instances) {
  for_each_instance(
      root, s_.file_, "pruners", instances,
      [&](const std::string& name, const std::string& cls, YamlReader& r, const std::string& w) {
        if (!pruner_registry().contains(cls))
          throw unknown_class(w, cls, pruner_registry().names(), "pruner");
        s_.pruners_[name] = pruner_registry().get(cls)(name, r, s_.params_);
      });
}

void CompressionScheduler::Parser::parse_regularizers(const YAML::Node& root,
                                                      std::set<std::string>& instances) {
  for_each_instance(
      root, s_.file_, "regularizers", instances,
      [&](const std::string& name, const std::string& cls, YamlReader& r, const std::string& w) {
        if (!regularizer_registry().contains(cls))
          throw unknown_class(w, cls, regularizer_registry().names(), "regularizer");
        s_.regularizers_[name] = regularizer_registry().get(cls)(name, r, s_.params_);
      });
}

void CompressionScheduler::Parser::parse_lr_schedulers(const YAML::Node& root,
                                                       std::set<std::string>& instances) {
  for_each_instance(
      root, s_.file_, "lr_schedulers", instances,
      [&](const std::string& name, const std::string& cls, YamlReader& r, const std::string& w) {
        if (!lr_scheduler_registry().contains(cls))
          throw unknown_class(w, cls, lr_scheduler_registry().names(), "LR scheduler");
        s_.lr_schedulers_[name] = lr_scheduler_registry().get(cls)(r);
        s_.lr_defined_.push_back(name);
      });
}

void CompressionScheduler::Parser::parse_extensions(const YAML::Node& root,
                                                    std::set<std::string>& instances) {
  for_each_instance(
      root, s_.file_, "extensions", instances,
      [&](const std::string& name, const std::string& cls, YamlReader& r, const std::string& w) {
        if (!extension_registry().contains(cls))
          throw unknown_class(w, cls, extension_registry().names(), "extension");
        s_.extensions_[name] = extension_registry().get(cls)(name, r);
      });
}

void CompressionScheduler::Parser::parse_quantizers(const YAML::Node& root,
                                                    std::set<std::string>& instances) {
  YAML::Node q = root["quantizers"];
  if (q && q.IsMap() && q.size() > 1)
    throw InputError(yaml_where(s_.file_, q) +
                     ": a schedule has at most one quantizer, this one has " +
                     std::to_string(q.size()));
  for_each_instance(
      root, s_.file_, "quantizers", instances,
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
        s_.quantizer_ = quantizer_registry().get(cls).make(name, r, s_.params_, narrowing_);
      });
}

std::set<std::string> CompressionScheduler::Parser::parse_policies(const YAML::Node& root) {
  YAML::Node pol = root["policies"];
  if (!pol || !pol.IsSequence() || pol.size() == 0)
    throw InputError(s_.file_ + ": the schedule has no 'policies' list, so it would do nothing");
  std::set<std::string> used;
  for (const auto& p : pol) {
    s_.policies_.push_back(parse_policy(p));
    used.insert(s_.policies_.back().instance);
  }
  return used;
}

Policy CompressionScheduler::Parser::parse_policy(const YAML::Node& p) {
  Policy policy;
  policy.where = yaml_where(s_.file_, p);
  if (!p.IsMap()) throw InputError(policy.where + ": a policy is a mapping");
  YamlReader r(p, s_.file_, "policy");
  const YAML::Node body = read_policy_kind(r, policy);
  YamlReader b(body, s_.file_, "policy " + section_kind(policy.kind));
  policy.instance = b.get<std::string>("instance_name");
  const YAML::Node args = b.node("args");
  b.finish();
  check_policy_instance(policy, b);
  read_policy_args(args, s_.file_, policy);
  read_policy_timing(r, policy);
  r.finish();
  check_policy_timing(policy);
  note_named_params(policy);
  return policy;
}

void CompressionScheduler::Parser::check_policy_instance(const Policy& policy,
                                                         const YamlReader& body) const {
  std::vector<std::string> defined;
  switch (policy.kind) {
    case Policy::Kind::kPruner:
      defined = instance_names(s_.pruners_);
      break;
    case Policy::Kind::kRegularizer:
      defined = instance_names(s_.regularizers_);
      break;
    case Policy::Kind::kLrScheduler:
      defined = instance_names(s_.lr_schedulers_);
      break;
    case Policy::Kind::kExtension:
      defined = instance_names(s_.extensions_);
      break;
    case Policy::Kind::kQuantizer:
      if (s_.quantizer_) defined = {s_.quantizer_->name()};
      break;
  }
  if (std::find(defined.begin(), defined.end(), policy.instance) == defined.end())
    throw InputError(body.where("instance_name") + ": no " + section_kind(policy.kind) +
                     " named '" + policy.instance +
                     "'; defined: " + (defined.empty() ? std::string("none") : join(defined)));
}

void CompressionScheduler::Parser::check_policy_timing(const Policy& policy) const {
  if (policy.kind == Policy::Kind::kPruner &&
      s_.pruners_.at(policy.instance)->needs_range_timing() && !policy.timing.is_range())
    throw InputError(
        policy.where + ": pruner " + policy.instance +
        " follows the AGP schedule and needs starting_epoch/ending_epoch/frequency, not epochs");
}

void CompressionScheduler::Parser::note_named_params(const Policy& policy) {
  auto add_named = [&](const std::vector<std::string>& names) {
    for (const auto& n : names)
      if (std::find(s_.named_params_.begin(), s_.named_params_.end(), n) == s_.named_params_.end())
        s_.named_params_.push_back(n);
  };
  if (policy.kind == Policy::Kind::kPruner) add_named(s_.pruners_.at(policy.instance)->targets());
  if (policy.kind == Policy::Kind::kRegularizer)
    add_named(s_.regularizers_.at(policy.instance)->targets());
}

}  // namespace igb::compress
