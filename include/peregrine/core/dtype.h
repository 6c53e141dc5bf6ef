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
//
// N:M semi-structured sparse formats (Mishra et al. 2021, "Accelerating Sparse Deep Neural
// Networks"; NVIDIA's 2:4 sparsity): in every group of M consecutive values of a row at most N
// are nonzero, and only N values per group are stored ("kept"; a group with fewer nonzeros keeps
// zeros in its remaining slots, the first zero columns of the group). Names "<kept>_s<N><M>":
// f16_s24, bf16_s24, q8_0_s24, q4_0_s24 (2:4) and f16_s48, bf16_s48, q8_0_s48, q4_0_s48 (4:8).
// A row of `cols` values (cols a multiple of M) holds K = cols·N/M kept values and is stored as
//   {kept values: K values in the kept dtype (F16 / BF16: 2 B each; Q8_0 / Q4_0: K/32 ggml
//    blocks over the kept values in column order, so K must be a multiple of 32);
//    mask: ceil(cols/8) bytes, bit c % 8 of byte c / 8 set when column c is kept (exactly N set
//    bits per group, padding bits past cols zero)}
// = 1 bit per column: 2 bits per kept value for 2:4 and 4:8. Value j of the row is the k-th kept
// value when it is the k-th set bit of the mask, else 0. GGUF stores them under type ids outside
// ggml's range (formats/gguf/gguf.cpp): 1000 f16_s24, 1001 bf16_s24, 1002 q8_0_s24, 1003 q4_0_s24,
// 1004 f16_s48, 1005 bf16_s48, 1006 q8_0_s48, 1007 q4_0_s48.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace peregrine {

enum class DType : std::uint8_t {
  kF32, kF16, kBF16, kQ8_0, kQ4_0, kI8, kF8E4M3, kF8E5M2, kInt,
  kQ4_1, kQ5_0, kQ5_1, kIQ4_NL, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K, kIQ4_XS,
  kF16_S24, kBF16_S24, kQ8_0_S24, kQ4_0_S24, kF16_S48, kBF16_S48, kQ8_0_S48, kQ4_0_S48,
  kNF4
};

/// An N:M sparse dtype's parameters (layout above): n kept of every m values, stored in `kept`
/// (kF16, kBF16, kQ8_0 or kQ4_0).
struct SparseNmFormat {
  int n = 0;
  int m = 0;
  DType kept = DType::kF32;
};
/// The N:M parameters of `t`, or nullopt when `t` is not one of the N:M sparse dtypes.
std::optional<SparseNmFormat> sparse_nm_format(DType t);

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

/// Bytes of one DType::kNF4 row of n values (QLoRA's NF4 with double-quantized block absmaxes,
/// quant/nf4.h, the row being the quantized tensor): f32 mean of the blocks' absmaxes, one f32
/// scale per group of 256 blocks, one 8-bit absmax code per block of 64, n / 2 bytes of 4-bit
/// codes. nullopt unless n is a positive multiple of 64.
std::optional<std::size_t> nf4_row_bytes(std::uint64_t n);

/// Values per block (32 for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL; 256 for the K-quants and
/// IQ4_XS; else 1).
std::size_t dtype_block_size(DType t);
/// Bytes per block for the block formats (F32 4, F16/BF16 2, Q8_0 34, Q4_0 18, ... as listed
/// above) and bytes per value after the row scale for I8/F8 (1); 0 for kInt (its row size
/// depends on QuantParams) and for the N:M sparse dtypes (their row size: dtype_row_bytes).
std::size_t dtype_block_bytes(DType t);
/// Canonical lower-case name: "f32", "f16", "bf16", "q8_0", "q4_0", "i8", "f8_e4m3",
/// "f8_e5m2", "int", "q4_1", "q5_0", "q5_1", "iq4_nl", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k",
/// "iq4_xs" (ggml's type names in lower case), "f16_s24", "bf16_s24", "q8_0_s24", "q4_0_s24",
/// "f16_s48", "bf16_s48", "q8_0_s48", "q4_0_s48", "nf4" (quant/nf4.h's row format; a run-time
/// type: `--dtype nf4` at load, not stored in files).
std::string_view dtype_name(DType t);
/// Parses a canonical name (case-insensitive); nullopt if unknown.
std::optional<DType> dtype_from_name(std::string_view name);
/// Bytes for a row of `n` values, or nullopt if `n` is not a multiple of the block size; for
/// kInt always nullopt (use row_bytes with its QuantParams); for the N:M sparse dtypes the
/// layout above, nullopt unless n is a multiple of m and (Q8_0 / Q4_0 kept) n·N/M of 32.
std::optional<std::size_t> dtype_row_bytes(DType t, std::uint64_t n);
/// Bytes for a row of `n` values of any dtype; for kInt per the layout above with `p` (nullopt
/// when !p.valid()), otherwise dtype_row_bytes(t, n).
std::optional<std::size_t> row_bytes(DType t, const QuantParams& p, std::uint64_t n);

}  // namespace peregrine
