// Fuzzes the CIFAR-10 binary batch reader. InputError is the expected answer to a bad file;
// anything else is a finding.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "data/classify_data.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = igb::fuzz::write_input("data_batch_1.bin", data, size);
  try {
    igb::data::read_cifar10_batches({path});
  } catch (const igb::InputError&) {
  }
  return 0;
}
