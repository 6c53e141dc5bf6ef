// Element types of weight tensors, with the GGUF (ggml) block layouts.
//
// Spec: GGUF / ggml (ggml-common.h). Block formats store `block_size` consecutive values of a
// row in `block_bytes` bytes: Q8_0 = {f16 d; int8 q[32]} (34 B), Q4_0 = {f16 d; uint8 qs[16]}
// (18 B; low nibbles are values 0..15, high nibbles 16..31, x = d * (nibble - 8)).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace peregrine {

enum class DType : std::uint8_t { kF32, kF16, kBF16, kQ8_0, kQ4_0 };

/// Values per block (1 for scalar types, 32 for Q8_0/Q4_0).
std::size_t dtype_block_size(DType t);
/// Bytes per block (4, 2, 2, 34, 18).
std::size_t dtype_block_bytes(DType t);
/// Canonical lower-case name: "f32", "f16", "bf16", "q8_0", "q4_0".
std::string_view dtype_name(DType t);
/// Parses a canonical name (case-insensitive); nullopt if unknown.
std::optional<DType> dtype_from_name(std::string_view name);
/// Bytes for a row of `n` values, or nullopt if `n` is not a multiple of the block size.
std::optional<std::size_t> dtype_row_bytes(DType t, std::uint64_t n);

}  // namespace peregrine
