#include "peregrine/core/prng.h"

#include <bit>

namespace peregrine {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::uint64_t fnv1a64(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

Xoshiro256Plus::Xoshiro256Plus(std::uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

std::uint64_t Xoshiro256Plus::next() {
  const std::uint64_t result = s_[0] + s_[3];
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = std::rotl(s_[3], 45);
  return result;
}

void Xoshiro256Plus::fill_uniform(std::span<float> out, float a) {
  const float step = a * 0x1p-23f;  // signed 24-bit integer in [-2^23, 2^23) times step
  auto to_float = [step](std::uint64_t bits24) {
    return static_cast<float>(static_cast<std::int32_t>(bits24) - (1 << 23)) * step;
  };
  std::size_t i = 0;
  for (; i + 1 < out.size(); i += 2) {
    const std::uint64_t r = next();
    out[i] = to_float(r >> 40);
    out[i + 1] = to_float((r >> 16) & 0xffffff);
  }
  if (i < out.size()) out[i] = to_float(next() >> 40);
}

}  // namespace peregrine
