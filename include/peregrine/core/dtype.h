// Element types of weight tensors and KV-cache rows, with their byte layouts.
//
// GGUF block formats (spec: GGUF / ggml, ggml-common.h) store `block_size` consecutive values of a
// row in `block_bytes` bytes: Q8_0 = {f16 d; int8 q[32]} (34 B), Q4_0 = {f16 d; uint8 qs[16]}
// (18 B; low nibbles are values 0..15, high nibbles 16..31, x = d * (nibble - 8)).
//
// The other ggml block formats (layouts in quant/ggml_blocks.h, from ggml-common.h): blocks of
// 32 values for Q4_1 (20 B), Q5_0 (22 B), Q5_1 (24 B) and IQ4_NL (18 B); super-blocks of 256
// values (the "K-quants" and IQ4_XS) for Q2_K (84 B), Q3_K (110 B), Q4_K (144 B), Q5_K (176 B),
// Q6_K (210 B) and IQ4_XS (136 B).
//
// Row-scaled formats (one f32 scale at the start of every row, then one byte per value):
//   I8      = {f32 s; int8 q[n]}, x = s * q (KV cache int8 with per-token scales);
//   F8_E4M3 = {f32 s; uint8 f[n]}, x = s * e4m3(f) (OCP FP8 E4M3, finite max 448; Micikevicius et
//             al. 2022, "FP8 Formats for Deep Learning"); F8_E5M2 likewise (IEEE-like, max 57344).
//   Per-tensor scales are stored as the same scale in every row.
//
// Group-wise integer format INT (GPTQ / AWQ / RTN results at run time; parameters in QuantParams):
// a row of n values is split into G = ceil(n / group_size) groups (the last one may be partial)
// and stored as {f16 scale[G]; uint8 zero[G] (asymmetric only); codes} where the codes are
// n unsigned `bits`-bit integers packed LSB-first into a little-endian bit stream of
// ceil(n * bits / 8) bytes (value i occupies stream bits [i*bits, (i+1)*bits); for 4 bits:
// byte i/2, low nibble for even i). Value i of group g decodes to x = scale[g] * (q_i - zero_g),
// zero_g = zero[g] (asymmetric) or 2^(bits-1) (symmetric). No alignment: rows may start at any
// byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace peregrine {

enum class DType : std::uint8_t {
  kF32, kF16, kBF16, kQ8_0, kQ4_0, kI8, kF8E4M3, kF8E5M2, kInt,
  kQ4_1, kQ5_0, kQ5_1, kIQ4_NL, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K, kIQ4_XS
};

/// Whether `t` is one of ggml's block formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, the
/// K-quants, IQ4_XS): blocks of 32 or 256 values, each with its own scales.
bool is_ggml_block_dtype(DType t);

/// Parameters of the group-wise INT format (DType::kInt) and of how its matmul treats the
/// activations. Ignored for every other dtype.
struct QuantParams {
  int bits = 0;                   // 2, 3, 4 or 8
  std::int64_t group_size = 0;    // values per group (the row length for per-channel), >= 1
  bool asymmetric = false;        // zero points stored (else zero = 2^(bits-1))
  int act_bits = 16;              // 16: f32 activations (W{bits}A16); 8: per-token dynamic int8
                                  // activations with int32 accumulation (W8A8 / W4A8)
  float outlier_threshold = 0.0f; // act_bits 8 only: > 0 computes the input features where some
                                  // token has |x| >= threshold in f32 (LLM.int8(), Dettmers et
                                  // al. 2022); 0 disables
  /// Whether the fields are valid for a kInt tensor: bits in {2,3,4,8}, group_size >= 1,
  /// act_bits in {8, 16}, outlier_threshold >= 0 and only with act_bits 8.
  bool valid() const;
  bool operator==(const QuantParams&) const = default;
};

/// Bytes of the f32 scale that starts every row of a row-scaled format (I8, F8_E4M3, F8_E5M2).
inline constexpr std::size_t kRowScaleBytes = 4;

/// Values per block (32 for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL; 256 for the K-quants and
/// IQ4_XS; else 1).
std::size_t dtype_block_size(DType t);
/// Bytes per block for the block formats (F32 4, F16/BF16 2, Q8_0 34, Q4_0 18, ... as listed
/// above) and bytes per value after the row scale for I8/F8 (1); 0 for kInt (its row size
/// depends on QuantParams).
std::size_t dtype_block_bytes(DType t);
/// Canonical lower-case name: "f32", "f16", "bf16", "q8_0", "q4_0", "i8", "f8_e4m3",
/// "f8_e5m2", "int", "q4_1", "q5_0", "q5_1", "iq4_nl", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k",
/// "iq4_xs" (ggml's type names in lower case).
std::string_view dtype_name(DType t);
/// Parses a canonical name (case-insensitive); nullopt if unknown.
std::optional<DType> dtype_from_name(std::string_view name);
/// Bytes for a row of `n` values, or nullopt if `n` is not a multiple of the block size; for
/// kInt always nullopt (use row_bytes with its QuantParams).
std::optional<std::size_t> dtype_row_bytes(DType t, std::uint64_t n);
/// Bytes for a row of `n` values of any dtype; for kInt per the layout above with `p` (nullopt
/// when !p.valid()), otherwise dtype_row_bytes(t, n).
std::optional<std::size_t> row_bytes(DType t, const QuantParams& p, std::uint64_t n);

}  // namespace peregrine
