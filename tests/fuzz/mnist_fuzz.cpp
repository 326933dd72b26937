// Fuzzes the MNIST IDX reader. The input is a 2-byte little-endian length L, then L bytes of the
// images file and the rest as the labels file. InputError is the expected answer to a bad pair;
// anything else is a finding.
#include <cstddef>
#include <cstdint>

#include <algorithm>

#include "core/error.h"
#include "data/classify_data.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t split = std::min<size_t>(data[0] | (size_t{data[1]} << 8), size - 2);
  const auto images = igb::fuzz::write_input("train-images-idx3-ubyte", data + 2, split);
  const auto labels =
      igb::fuzz::write_input("train-labels-idx1-ubyte", data + 2 + split, size - 2 - split);
  try {
    igb::data::read_mnist(images, labels);
  } catch (const igb::InputError&) {
  }
  return 0;
}
