#pragma once

#include <array>
#include <cstdint>

namespace igb {

/// A small, portable, seedable generator (SplitMix64). Unlike the standard distributions its
/// sequence is the same on every compiler, so synthetic data and augmentation are reproducible.
/// That holds only while the draws happen in one order: C++ leaves the order in which a call's
/// arguments (or the operands of +) are evaluated to the compiler, so never make two draws in
/// one call or one sum; draw into named values first, or use the helpers below.
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

  /// Three draws on [lo, hi) as components {v0, v1, v2}, v2 drawn first (the order the synthetic
  /// generators have always drawn colours in).
  std::array<double, 3> uniform3(double lo, double hi) {
    std::array<double, 3> v{};
    for (int i = 2; i >= 0; --i) v[static_cast<size_t>(i)] = uniform(lo, hi);
    return v;
  }
  /// The sum of three draws on [0, 1), made in order: a cheap bell-shaped value on [0, 3).
  double sum_of_three() {
    const double a = uniform();
    const double b = uniform();
    return a + b + uniform();
  }

 private:
  uint64_t state_;
};

}  // namespace igb
