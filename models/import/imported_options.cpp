#include "models/import/imported_options.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/fs.h"
#include "models/import/imported.h"

namespace igb::models {

namespace {

/// A model of no family the trainers take: the tools' fallback ("family" model).
class ImportedModel final : public Imported<ModelImpl> {
 public:
  ImportedModel(std::shared_ptr<ImportedBody> body, const ImportedArgs& args,
                std::vector<int64_t> input)
      : Imported(std::move(body), args), input_(std::move(input)) {}
  std::vector<int64_t> input_shape() const override { return input_; }
  nlohmann::json options_json() const override { return options_; }

 private:
  std::vector<int64_t> input_;
};

/// The values of model arg "family": auto, each hook's family, model.
std::vector<std::string> family_choices(const std::vector<ImportHook>& hooks) {
  std::vector<std::string> out{"auto"};
  for (const auto& h : hooks) out.push_back(h.family);
  out.push_back("model");
  return out;
}

std::string file_crc32c(const std::string& file) {
  const std::string bytes = read_text_file(file);
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc32c(bytes.data(), bytes.size()));
  return hex;
}

}  // namespace

std::string imported_kind(const std::string& name) {
  for (const char* kind : {"torchscript", "onnx"}) {
    const std::string prefix = std::string(kind) + ":";
    if (name.rfind(prefix, 0) == 0) return kind;
  }
  return "";
}

nlohmann::json ImportedOptions::to_json(const std::vector<ImportHook>& hooks) const {
  nlohmann::json j{{"file", file},
                   {"crc32c", crc32c},
                   {"family", family},
                   {"input_size", input_size},
                   {"channels", channels}};
  for (size_t i = 0; i < hooks.size(); ++i)
    if (family == hooks[i].family) j[hooks[i].arg] = hook_args[i];
  return j;
}

ImportedOptions read_imported_options(const std::string& kind, const nlohmann::json& json,
                                      const std::vector<ImportHook>& hooks,
                                      const ImportedOptions& defaults) {
  ImportedOptions o = defaults;
  nlohmann::json own = json;
  o.hook_extras.clear();
  for (const auto& h : hooks)
    o.hook_extras.push_back(h.take_args ? h.take_args(own) : nlohmann::json::object());
  OptionReader r(kind, own);
  // 0 means "the file says" where the defaults say so.
  const int64_t lowest = defaults.input_size == 0 ? 0 : 1;
  o.file = r.get<std::string>("file", "");
  o.crc32c = r.get<std::string>("crc32c", "");
  o.family = r.get<std::string>("family", o.family);
  o.input_size = r.get<int64_t>("input_size", o.input_size);
  r.check_range("input_size", o.input_size, lowest, 8192);
  o.channels = r.get<int64_t>("channels", o.channels);
  r.check_range("channels", o.channels, lowest, 4096);
  o.hook_args.clear();
  for (const auto& h : hooks) {
    o.hook_args.push_back(r.get<int64_t>(h.arg, 0));
    r.check_range(h.arg, o.hook_args.back(), 0, h.arg_max);
  }
  r.finish();
  if (o.file.empty())
    throw InputError("model " + kind + ": give the file as --model " + kind + ":PATH");
  const auto families = family_choices(hooks);
  if (std::find(families.begin(), families.end(), o.family) == families.end())
    throw InputError("model " + kind + ": option 'family' is '" + o.family +
                     "'; valid: " + join(families));
  o.file = std::filesystem::absolute(o.file).lexically_normal().string();
  return o;
}

void check_file_crc(ImportedOptions& o) {
  const std::string crc = file_crc32c(o.file);
  if (!o.crc32c.empty() && o.crc32c != crc)
    throw InputError(o.file + " changed since the model was saved with it (CRC-32C " + crc +
                     ", recorded " + o.crc32c + ")");
  o.crc32c = crc;
}

size_t hook_index(const std::vector<ImportHook>& hooks, const std::string& name) {
  size_t i = 0;
  while (i < hooks.size() && hooks[i].family != name) ++i;
  return i;
}

void resolve_family(ImportedOptions& o, const std::vector<ImportHook>& hooks, const at::Tensor& out,
                    const std::vector<int64_t>& input) {
  if (o.family == "auto") {
    o.family = "model";
    for (const auto& h : hooks)
      if (h.recognises(out, input)) {
        o.family = h.family;
        break;
      }
  }
  const size_t i = hook_index(hooks, o.family);
  if (i < hooks.size()) o.hook_args[i] = hooks[i].resolve(out, input, o.hook_args[i], o.file);
}

Model wrap_imported(const ImportedOptions& o, const std::vector<ImportHook>& hooks,
                    std::shared_ptr<ImportedBody> body, const std::vector<int64_t>& input) {
  ImportedArgs args;
  args.file = o.file;
  args.options = o.to_json(hooks);
  args.channels = o.channels;
  args.input_size = o.input_size;
  const size_t h = hook_index(hooks, o.family);
  for (size_t i = 0; i < o.hook_extras.size() && i < hooks.size(); ++i)
    if (i != h && !o.hook_extras[i].empty())
      throw InputError(o.file + ": model arg '" + o.hook_extras[i].begin().key() + "' is family " +
                       hooks[i].family + "'s; this model's family is " + o.family);
  if (h < hooks.size()) {
    args.value = o.hook_args[h];
    Model model = hooks[h].wrap(std::move(body), args);
    if (h < o.hook_extras.size() && !o.hook_extras[h].empty() && hooks[h].apply_args)
      hooks[h].apply_args(model, o.hook_extras[h]);
    return model;
  }
  return std::make_shared<ImportedModel>(std::move(body), args, input);
}

}  // namespace igb::models
