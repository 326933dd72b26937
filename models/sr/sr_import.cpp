#include "models/sr/sr_import.h"

#include "core/error.h"
#include "models/import/imported.h"
#include "models/sr/sr_model.h"

namespace igb::models::sr {

namespace {

class ImportedSr final : public Imported<SrModelImpl> {
 public:
  using Imported::Imported;
  nlohmann::json options_json() const override { return options_; }
};

/// [N, C, s·S, s·S] for an input [1, C, S, S], s = 2, 3 or 4.
bool is_upscaled(const at::Tensor& out, const std::vector<int64_t>& input) {
  const int64_t side = input[2];
  return out.dim() == 4 && out.size(1) == input[1] && out.size(2) % side == 0 &&
         out.size(2) == out.size(3) && out.size(2) / side >= 2 && out.size(2) / side <= 4;
}

int64_t resolve_scale(const at::Tensor& out, const std::vector<int64_t>& input, int64_t given,
                      const std::string& file) {
  if (!is_upscaled(out, input))
    throw InputError(file +
                     ": family sr needs an output of the input's channels, 2-4 times "
                     "its height and width");
  const int64_t s = out.size(2) / input[2];
  if (given != 0 && given != s)
    throw InputError(file + ": the model upscales x" + std::to_string(s) + ", not x" +
                     std::to_string(given));
  return s;
}

}  // namespace

ImportHook sr_import_hook(const std::string& family) {
  ImportHook h;
  h.family = family;
  h.arg = "scale";
  h.arg_max = 16;
  h.input_size = 32;
  h.recognises = is_upscaled;
  h.resolve = resolve_scale;
  h.wrap = [](std::shared_ptr<ImportedBody> body, const ImportedArgs& args) -> Model {
    return std::make_shared<ImportedSr>(std::move(body), args, args.value, args.channels);
  };
  return h;
}

}  // namespace igb::models::sr
