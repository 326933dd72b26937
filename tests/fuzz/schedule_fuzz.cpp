// Fuzzes the compression schedule parser (CompressionScheduler::from_text) against FSRCNN.
// InputError is the expected answer to a bad schedule; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "compress/scheduler.h"
#include "core/error.h"
#include "models/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const igb::models::Model model = [] {
    igb::models::register_builtin_models();
    torch::manual_seed(0);
    return igb::models::create_model("fsrcnn", {});
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    igb::compress::CompressionScheduler::from_text(text, "fuzz.yaml", *model, 0.1, nullptr);
  } catch (const igb::InputError&) {
  }
  return 0;
}
