// 4-bit NormalFloat (NF4) weights with double-quantized block scales, as in QLoRA (Dettmers et
// al. 2023, "QLoRA: Efficient Finetuning of Quantized LLMs", §3 and Appendix E) and its reference
// implementation, bitsandbytes (functional.py quantize_4bit / dequantize_4bit with
// quant_type "nf4", compress_statistics=True; create_normal_map, create_dynamic_map).
//
// A tensor is flattened (row-major) and cut into blocks of kNf4BlockSize = 64 weights (the last
// one may be shorter). Each block keeps its absmax c₂ = max|w| and, per weight, the index of the
// nearest of the 16 NF4 values to w / c₂: the 16 quantiles of N(0, 1) scaled to [−1, 1], with an
// exact zero (kNf4Codebook). Codes are packed two per byte, the even element in the high nibble
// (bitsandbytes' layout). Double quantization: the f32 absmaxes, minus their mean, are quantized
// to 8 bits in groups of kNf4AbsmaxGroup = 256 with bitsandbytes' signed dynamic map (an 8-bit
// float: create_dynamic_map(signed=True), 256 values in [−1, 1]) scaled by each group's own
// absmax (f32). Dequantized: w ≈ codebook[code] · (map[q] · group_absmax + mean).
// Storage: 4 bits per weight + 8 bits per 64 weights + 32 bits per 64·256 weights
// = 4.127 bits per weight (plus one f32 mean per tensor).
//
// Peregrine's QLoRA fine-tuning (train/finetune.h) feeds these codes and constants to libtorch,
// which looks them up in every forward; the engine's NF4 run-time weight type (DType::kNF4,
// nf4_encode_row / nf4_decode_row) quantizes each matrix row with the same quantizer.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/status.h"

namespace peregrine {

inline constexpr std::int64_t kNf4BlockSize = 64;     // weights per absmax (QLoRA's blocksize)
inline constexpr std::int64_t kNf4AbsmaxGroup = 256;  // absmaxes per second-level scale

/// The 16 NF4 values in ascending order (bitsandbytes' table, QLoRA Appendix E): index 7 is 0,
/// index 0 is −1, index 15 is 1.
extern const std::array<float, 16> kNf4Codebook;

/// bitsandbytes' signed 8-bit dynamic quantization map, create_dynamic_map(signed=True,
/// max_exponent_bits=7, total_bits=8), ascending: ±10^(i−6) · the midpoints of
/// linspace(0.1, 1, 2^i + 1) for i = 0..6, then 0 and 1 (computed in f64, rounded to f32).
const std::array<float, 256>& nf4_absmax_map();

/// One NF4 tensor.
struct Nf4Tensor {
  std::vector<std::int64_t> shape;          // as the source tensor ({out, in} for a Linear weight)
  std::int64_t numel = 0;                   // product of shape
  std::vector<std::uint8_t> codes;          // ceil(numel / 2) bytes: element 2j in the high nibble, 2j + 1 in the low
  std::vector<std::uint8_t> absmax_codes;   // [n_blocks]: index into nf4_absmax_map() of block b's centered absmax
  std::vector<float> group_absmax;          // [ceil(n_blocks / 256)]: max |absmax − mean| of each group of 256 blocks
  float absmax_mean = 0.0f;                 // mean of the blocks' f32 absmaxes

  std::int64_t n_blocks() const { return (numel + kNf4BlockSize - 1) / kNf4BlockSize; }
  /// Stored bits per weight: (8 · bytes of codes and absmax codes + 32 · (group scales + 1)) / numel.
  double bits_per_weight() const;
};

/// Quantizes `values` (numel = product of `shape` f32 values, row-major) to NF4 with
/// double-quantized absmaxes. A block of zeros gets absmax 0 and decodes to zeros. Errors:
/// kInvalidArgument (values.size() is not the product of shape, an empty tensor, a value that
/// is not finite).
Expected<Nf4Tensor> nf4_quantize(std::span<const float> values, std::vector<std::int64_t> shape);

/// The blocks' absmaxes as the double quantization gives them back: map[q] · group_absmax + mean,
/// [n_blocks] f32.
std::vector<float> nf4_block_absmax(const Nf4Tensor& t);

/// The weights back: codebook[code] · block absmax (nf4_block_absmax), [numel] f32 row-major.
/// |w − ŵ| <= c₂ · 0.1519 (half the widest codebook gap, −1 to −0.6962) + |c₂ − ĉ₂| for a weight of a block
/// with absmax c₂.
std::vector<float> nf4_dequantize(const Nf4Tensor& t);

/// The engine's NF4 run-time weight type (DType::kNF4, `--dtype nf4`): each row of a matrix is
/// one Nf4Tensor of shape {n} (so its absmax mean and group scales are the row's), stored as
/// nf4_row_bytes(n) bytes (core/dtype.h): f32 mean, f32 group scales, absmax codes, codes.
/// Writes `row` (n values, n a positive multiple of kNf4BlockSize) at `dst`. A row holding a
/// value that is not finite gets a NaN mean and decodes to NaN (as the float types keep NaN).
void nf4_encode_row(std::span<const float> row, std::uint8_t* dst);
/// Decodes one DType::kNF4 row of out.size() values from `src`: exactly nf4_dequantize's values
/// for that row's Nf4Tensor, without allocating.
void nf4_decode_row(const std::uint8_t* src, std::span<float> out);

}  // namespace peregrine
