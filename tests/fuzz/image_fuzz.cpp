// Fuzzes the image reader (read_image: PNG, JPEG, BMP, ... through OpenCV). InputError is the
// expected answer to a bad file; anything else is a finding.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "data/image.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = igb::fuzz::write_input("image.png", data, size);
  try {
    igb::data::read_image(path);
  } catch (const igb::InputError&) {
  }
  return 0;
}
