#include "compress/quantizer.h"

#include <mutex>
#include <regex>

#include "core/error.h"

namespace igb::compress {

QuantBits Quantizer::bits_for(const std::string& module) const {
  for (const auto& [pattern, bits] : options_.overrides) {
    std::regex re;
    try {
      re = std::regex(pattern);
    } catch (const std::regex_error& e) {
      throw InputError("quantizer " + name_ + ": override '" + pattern +
                       "' is not a valid regular expression (" + e.what() + ")");
    }
    if (std::regex_match(module, re)) return bits;
  }
  return options_.bits;
}

Registry<QuantizerSpec>& quantizer_registry() {
  static Registry<QuantizerSpec> r("quantizer class");
  return r;
}

void register_builtin_quantizers() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = quantizer_registry();
    const std::string refused =
        "; recognised in schedules, quantization-aware training is not available in this build";
    r.add("DorefaQuantizer", {}, "DoReFa-Net weights and activations (Zhou et al. 2016)" + refused);
    r.add("PACTQuantizer", {}, "PACT, learned activation clipping (Choi et al. 2018)" + refused);
    r.add("WRPNQuantizer", {},
          "WRPN, wide reduced-precision networks (Mishra et al. 2017)" + refused);
    r.add("QuantAwareTrainRangeLinearQuantizer", {},
          "range-based linear quantization-aware training" + refused);
    r.freeze();
  });
}

}  // namespace igb::compress
