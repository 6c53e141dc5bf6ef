#include "formats/packed_words.h"

#include <cstring>

namespace peregrine {

std::int64_t packed_word_count(std::int64_t n, int bits) { return (n * bits + 31) / 32; }

// The platforms Peregrine builds for are little-endian (x86-64, AArch64), like the files.
std::uint32_t load_u32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store_u32(std::uint8_t* p, std::uint32_t v) { std::memcpy(p, &v, sizeof v); }

unsigned read_packed_code(const std::uint8_t* base, std::size_t stride, std::int64_t i, int bits) {
  const std::uint64_t bit = static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(bits);
  const std::size_t word = static_cast<std::size_t>(bit / 32);
  const unsigned shift = static_cast<unsigned>(bit % 32);
  std::uint64_t v = load_u32(base + word * stride) >> shift;
  if (shift + static_cast<unsigned>(bits) > 32) v |= static_cast<std::uint64_t>(load_u32(base + (word + 1) * stride)) << (32 - shift);
  return static_cast<unsigned>(v & ((1u << bits) - 1));
}

void write_packed_code(std::uint8_t* base, std::size_t stride, std::int64_t i, int bits, unsigned code) {
  const std::uint64_t bit = static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(bits);
  const std::size_t word = static_cast<std::size_t>(bit / 32);
  const unsigned shift = static_cast<unsigned>(bit % 32);
  std::uint8_t* w = base + word * stride;
  store_u32(w, load_u32(w) | static_cast<std::uint32_t>(static_cast<std::uint64_t>(code) << shift));
  if (shift + static_cast<unsigned>(bits) > 32) {
    std::uint8_t* next = base + (word + 1) * stride;
    store_u32(next, load_u32(next) | static_cast<std::uint32_t>(code >> (32 - shift)));
  }
}

}  // namespace peregrine
