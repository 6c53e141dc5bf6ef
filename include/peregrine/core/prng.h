// Seeded pseudo-random numbers for synthetic weights and test data (not cryptographic).
//
// Spec: Blackman & Vigna, "Scrambled Linear Pseudorandom Number Generators" (2018): xoshiro256+
// for floating-point output, seeded from SplitMix64 as the authors recommend. The sequence
// depends only on the seed (no library RNG, no floating-point contraction), so the same seed
// gives the same bytes on every machine and build.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace peregrine {

/// SplitMix64 (Steele, Lea & Flood 2014): advances `state` by the golden-ratio increment and
/// returns its mixed value. Used to seed xoshiro and to derive independent sub-seeds.
std::uint64_t splitmix64(std::uint64_t& state);

/// FNV-1a 64-bit hash of `s` (names a stream: e.g. the per-tensor seed of a weight).
std::uint64_t fnv1a64(std::string_view s);

/// xoshiro256+ generator: period 2^256 - 1, 64 bits per call.
class Xoshiro256Plus {
 public:
  /// State = four SplitMix64 outputs starting from `seed` (never all zero).
  explicit Xoshiro256Plus(std::uint64_t seed);
  std::uint64_t next();
  /// Fills `out` with values uniform on [-a, a) in steps of a * 2^-23 (24-bit resolution; the
  /// high bits of each draw, as the authors advise for xoshiro256+). Two values per draw.
  void fill_uniform(std::span<float> out, float a);

 private:
  std::uint64_t s_[4];
};

}  // namespace peregrine
