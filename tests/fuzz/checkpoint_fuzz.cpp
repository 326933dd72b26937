// Fuzzes the checkpoint loader: Checkpoint::load, then restoring a tiny model, its optimizer, the
// scheduler section and the RNG state from whatever loaded. InputError is the expected answer to a
// corrupt file; anything else is a finding. Seeds come from igb_fuzz_make_seeds.
#include <cstddef>
#include <cstdint>

#include "core/checkpoint.h"
#include "core/error.h"
#include "fuzz_support.h"
#include "tiny_net.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = igb::fuzz::write_input("checkpoint.ckpt", data, size);
  try {
    const auto ckpt = igb::Checkpoint::load(path);
    igb::fuzz::TinyNet net;
    ckpt.load_model(net);
    torch::optim::SGD sgd(net.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    ckpt.load_optimizer(sgd);
    torch::serialize::InputArchive scheduler;
    ckpt.scheduler_archive(scheduler);
    ckpt.restore_rng();
  } catch (const igb::InputError&) {
  }
  return 0;
}
