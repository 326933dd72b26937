#pragma once

#include <cstdint>

namespace igb {

/// A small, portable, seedable generator (SplitMix64). Unlike the standard distributions its
/// sequence is the same on every compiler, so synthetic data and augmentation are reproducible.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  /// Seeds from several values, e.g. (run seed, epoch, sample index).
  static Rng from(uint64_t a, uint64_t b = 0, uint64_t c = 0) {
    Rng r(a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull ^
          (c + 0x85157AF5ull) * 0x94D049BB133111EBull);
    r.next();
    return r;
  }

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  /// Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Uniform integer in [lo, hi] inclusive.
  int64_t integer(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool coin(double p = 0.5) { return uniform() < p; }

 private:
  uint64_t state_;
};

}  // namespace igb
