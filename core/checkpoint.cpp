#include "core/checkpoint.h"

#include "core/error.h"
#include "core/fs.h"
#include "core/text.h"

namespace igb {

namespace {
constexpr int64_t kFormatVersion = 1;
const char* kMetaKey = "igb_meta";

std::string shape_str(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? "x" : "") + std::to_string(t.size(i));
  return s + "]";
}
}  // namespace

nlohmann::json CheckpointMeta::to_json() const {
  nlohmann::json best =
      std::isnan(best_metric) ? nlohmann::json(nullptr) : nlohmann::json(best_metric);
  return {{"format", kFormatVersion},
          {"optform", optform},
          {"model", model},
          {"model_options", model_options},
          {"thinning_recipes", thinning_recipes},
          {"config", config},
          {"epoch", epoch},
          {"best_metric_name", best_metric_name},
          {"best_metric", best},
          {"best_epoch", best_epoch},
          {"schedule_text", schedule_text},
          {"extra", extra}};
}

CheckpointMeta CheckpointMeta::from_json(const nlohmann::json& j) {
  CheckpointMeta m;
  m.optform = j.at("optform").get<std::string>();
  m.model = j.at("model").get<std::string>();
  m.model_options = j.at("model_options");
  m.thinning_recipes = j.value("thinning_recipes", nlohmann::json::array());
  m.config = j.value("config", nlohmann::json::object());
  m.epoch = j.at("epoch").get<int64_t>();
  m.best_metric_name = j.value("best_metric_name", "");
  m.best_metric = j.at("best_metric").is_null() ? std::numeric_limits<double>::quiet_NaN()
                                                : j.at("best_metric").get<double>();
  m.best_epoch = j.value("best_epoch", int64_t{-1});
  m.schedule_text = j.value("schedule_text", "");
  m.extra = j.value("extra", nlohmann::json::object());
  return m;
}

std::vector<std::pair<std::string, torch::Tensor>> named_state(const torch::nn::Module& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : model.named_parameters(true)) out.emplace_back(p.key(), p.value());
  for (const auto& b : model.named_buffers(true)) out.emplace_back(b.key(), b.value());
  return out;
}

void save_checkpoint(const std::filesystem::path& path, const CheckpointMeta& meta,
                     const CheckpointParts& parts) {
  torch::serialize::OutputArchive archive;
  archive.write(kMetaKey, c10::IValue(meta.to_json().dump()));
  if (parts.model) {
    // Flat names, stored as a list so dotted names need no escaping in the archive.
    torch::serialize::OutputArchive model_archive;
    std::vector<std::string> names;
    int64_t i = 0;
    for (const auto& kv : named_state(*parts.model)) {
      names.push_back(kv.first);
      model_archive.write("t" + std::to_string(i++), kv.second.detach().cpu());
    }
    model_archive.write("names", c10::IValue(nlohmann::json(names).dump()));
    archive.write("model", model_archive);
  }
  if (parts.optimizer) {
    torch::serialize::OutputArchive opt_archive;
    parts.optimizer->save(opt_archive);
    archive.write("optimizer", opt_archive);
  }
  if (parts.scheduler) {
    torch::serialize::OutputArchive sched_archive;
    parts.scheduler(sched_archive);
    archive.write("scheduler", sched_archive);
  }
  archive.write("rng_cpu", at::detail::getDefaultCPUGenerator().get_state());
  write_atomically(path, [&](const std::filesystem::path& tmp) { archive.save_to(tmp.string()); });
}

Checkpoint Checkpoint::load(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path))
    throw InputError("checkpoint " + path.string() + " does not exist");
  if (std::filesystem::is_directory(path))
    throw InputError("checkpoint " + path.string() + " is a directory, not a .ckpt file");
  Checkpoint c;
  c.path_ = path;
  c.archive_ = std::make_shared<torch::serialize::InputArchive>();
  try {
    c.archive_->load_from(path.string());
  } catch (const c10::Error& e) {
    throw InputError("checkpoint " + path.string() + " is corrupt or truncated (" +
                     first_line(e.what_without_backtrace()) + ")");
  }
  c10::IValue meta;
  if (!c.archive_->try_read(kMetaKey, meta) || !meta.isString())
    throw InputError("checkpoint " + path.string() +
                     " is not an igb checkpoint (no igb_meta record)");
  try {
    auto j = nlohmann::json::parse(meta.toStringRef());
    if (j.value("format", int64_t{0}) > kFormatVersion)
      throw InputError("checkpoint " + path.string() + " has format " +
                       std::to_string(j.value("format", 0)) + ", newer than this build reads");
    c.meta_ = CheckpointMeta::from_json(j);
  } catch (const nlohmann::json::exception& e) {
    throw InputError("checkpoint " + path.string() + " has a malformed igb_meta record (" +
                     e.what() + ")");
  }
  return c;
}

void Checkpoint::load_model(torch::nn::Module& model) const {
  torch::serialize::InputArchive model_archive;
  if (!archive_->try_read("model", model_archive))
    throw InputError("checkpoint " + path_.string() + " holds no model state");
  c10::IValue names_value;
  model_archive.read("names", names_value);
  auto names = nlohmann::json::parse(names_value.toStringRef()).get<std::vector<std::string>>();
  std::map<std::string, int64_t> index;
  for (size_t i = 0; i < names.size(); ++i) index[names[i]] = static_cast<int64_t>(i);

  torch::NoGradGuard no_grad;
  auto state = named_state(model);
  for (const auto& kv : state) {
    auto it = index.find(kv.first);
    if (it == index.end())
      throw InputError("checkpoint " + path_.string() + " has no tensor '" + kv.first +
                       "' that the model needs");
    torch::Tensor saved;
    model_archive.read("t" + std::to_string(it->second), saved);
    if (!saved.sizes().equals(kv.second.sizes()))
      throw InputError("checkpoint " + path_.string() + ": tensor '" + kv.first + "' has shape " +
                       shape_str(saved) + " but the model expects " + shape_str(kv.second));
    kv.second.copy_(saved);
  }
  if (state.size() != names.size()) {
    for (const auto& n : names) {
      bool found = false;
      for (const auto& kv : state) found = found || kv.first == n;
      if (!found)
        throw InputError("checkpoint " + path_.string() + " has tensor '" + n +
                         "' that the model does not");
    }
  }
}

bool Checkpoint::load_optimizer(torch::optim::Optimizer& optimizer) const {
  torch::serialize::InputArchive opt_archive;
  if (!archive_->try_read("optimizer", opt_archive)) return false;
  try {
    optimizer.load(opt_archive);
  } catch (const c10::Error& e) {
    throw InputError("checkpoint " + path_.string() + ": optimizer state does not match (" +
                     first_line(e.what_without_backtrace()) + ")");
  }
  return true;
}

bool Checkpoint::scheduler_archive(torch::serialize::InputArchive& out) const {
  return archive_->try_read("scheduler", out);
}

void Checkpoint::restore_rng() const {
  torch::Tensor state;
  if (archive_->try_read("rng_cpu", state)) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    gen.set_state(state);
  }
}

}  // namespace igb
