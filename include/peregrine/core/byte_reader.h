// Bounds-checked little-endian reader over an untrusted byte span (file headers).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>

#include "peregrine/core/status.h"

namespace peregrine {

/// Sequential reader that never reads past the end: every read returns an error instead.
/// All multi-byte values are little-endian (the host is assumed little-endian, as GGUF,
/// safetensors and llama2.c files are).
class ByteReader {
 public:
  ByteReader(std::span<const std::uint8_t> bytes, std::string what)
      : bytes_(bytes), what_(std::move(what)) {}

  std::size_t offset() const { return pos_; }
  std::size_t remaining() const { return bytes_.size() - pos_; }

  /// Reads one trivially-copyable value. Error kCorruptFile if fewer than sizeof(T) bytes remain.
  template <typename T>
  Expected<T> read() {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T)) return truncated(sizeof(T));
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  /// Reads `n` raw bytes as a string. Error kCorruptFile if past the end.
  Expected<std::string> read_string(std::uint64_t n) {
    if (n > remaining()) return truncated(n);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }

 private:
  Status truncated(std::uint64_t wanted) const {
    return corrupt_file(what_ + " is truncated: needed " + std::to_string(wanted) +
                        " bytes at offset " + std::to_string(pos_) + ", " +
                        std::to_string(remaining()) + " left");
  }
  std::span<const std::uint8_t> bytes_;
  std::string what_;
  std::size_t pos_ = 0;
};

}  // namespace peregrine
