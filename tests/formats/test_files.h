// Test-only helpers: whole-file byte I/O and half-precision encodings.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "test_paths.h"

namespace peregrine::test {

using Bytes = std::vector<std::uint8_t>;

/// A fresh temporary directory, removed with its contents when the object goes away.
struct TempDir {
  TempDir() : path(make_temp_dir()) {}
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path + "/" + name; }
  std::string path;
};

inline Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

inline void write_text(const std::string& path, const std::string& s) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << s;
}

/// Appends the little-endian bytes of a trivially-copyable value.
template <typename T>
void append(Bytes& b, const T& v) {
  const std::size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(b.data() + at, &v, sizeof(T));
}

/// Overwrites sizeof(T) bytes at `offset`.
template <typename T>
void poke(Bytes& b, std::size_t offset, const T& v) {
  std::memcpy(b.data() + offset, &v, sizeof(T));
}

inline std::uint32_t f32_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// bf16 = top half of the f32 bits, rounded to nearest even (finite inputs).
inline std::uint16_t to_bf16(float f) {
  const std::uint32_t u = f32_bits(f);
  return static_cast<std::uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/// IEEE half, truncating the mantissa; only for the small normal values tests use.
inline std::uint16_t to_f16(float f) {
  const std::uint32_t u = f32_bits(f);
  const std::uint32_t sign = (u >> 16) & 0x8000;
  const int exp = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
  if (exp <= 0) return static_cast<std::uint16_t>(sign);  // flush tiny values to zero
  return static_cast<std::uint16_t>(sign | (static_cast<std::uint32_t>(exp) << 10) | ((u >> 13) & 0x3ff));
}

/// Raw bytes of a float vector.
inline Bytes f32_bytes(const std::vector<float>& v) {
  Bytes b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace peregrine::test
