#include "peregrine/kernels/cpu/matmul/quant_packed.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

#include "peregrine/kernels/cpu/isa.h"
#include "kernels/cpu/count_dispatch.h"
#include "kernels/cpu/matmul/decode_prefetch.h"
#include "kernels/cpu/row_split.h"
#include "peregrine/quant/fp16.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul/quant_packed.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#ifndef PEREGRINE_KERNELS_CPU_QUANT_PACKED_SHARED
#define PEREGRINE_KERNELS_CPU_QUANT_PACKED_SHARED
namespace peregrine::quant_packed_detail {

// One format's packed group block (16 rows × one block of 32 values): codes, then 16 f16 scales.
struct Format {
  std::size_t block_bytes;  // one stored block: f16 d, then the codes
  std::size_t code_bytes;   // the group block's codes; its scales follow
  std::int32_t offset;      // c: u = q + c, so Σ u·q_x = Σ q·q_x + c·Σ q_x
  constexpr std::size_t group_block_bytes() const { return 16 * block_bytes; }
};
constexpr Format kQ4_0{18, 256, 8};
constexpr Format kQ8_0{34, 512, 128};
inline const Format& format(DType dtype) { return dtype == DType::kQ8_0 ? kQ8_0 : kQ4_0; }

// The operands of one call, shared by every target's kernel.
struct Operands {
  DType dtype;
  const std::uint8_t* packed;
  std::int64_t blocks;                // per row
  const std::int8_t* xq;              // [n_tokens, in]
  const float* xd;                    // [n_tokens, blocks]
  const std::int32_t* bias;           // [n_tokens, blocks]: -c · Σ q_x of the block
  std::int64_t n_tokens, out;
  float* y;                           // [n_tokens, out]
  std::size_t group_bytes() const { return static_cast<std::size_t>(blocks) * format(dtype).group_block_bytes(); }
};

// Value j (0..31) of row e in a group block's codes: Q4_0's nibble minus 8, Q8_0's byte minus 128.
inline std::int32_t code(DType dtype, const std::uint8_t* codes, int e, int j) {
  if (dtype == DType::kQ8_0) return std::int32_t{codes[(j / 4) * 64 + e * 4 + j % 4]} - 128;
  const std::uint8_t byte = codes[((j / 4) % 4) * 64 + e * 4 + j % 4];
  return (j < 16 ? byte & 0x0f : byte >> 4) - 8;
}

// One packed group row by row: the scalar twin, and the kernel of targets below AVX2.
void GroupScalar(const Operands& op, std::int64_t group) {
  const Format& f = format(op.dtype);
  const std::uint8_t* g = op.packed + static_cast<std::size_t>(group) * op.group_bytes();
  for (std::int64_t t = 0; t < op.n_tokens; ++t) {
    for (int e = 0; e < 16; ++e) {
      float acc = 0.0f;
      for (std::int64_t b = 0; b < op.blocks; ++b) {
        const std::uint8_t* codes = g + b * f.group_block_bytes();
        const std::int8_t* x = op.xq + t * op.blocks * 32 + b * 32;
        std::int32_t dot = 0;
        for (int j = 0; j < 32; ++j) dot += code(op.dtype, codes, e, j) * std::int32_t{x[j]};
        std::uint16_t d;
        std::memcpy(&d, codes + f.code_bytes + 2 * e, 2);
        acc += (f16_to_f32(d) * op.xd[t * op.blocks + b]) * static_cast<float>(dot);
      }
      op.y[t * op.out + group * 16 + e] = acc;
    }
  }
}

}  // namespace peregrine::quant_packed_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
using quant_packed_detail::Operands;

#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#pragma GCC push_options
#if HWY_TARGET == HWY_AVX3_DL
#pragma GCC target("avx512vnni")

// AVX-512 VNNI: one zmm holds a group block's 16 rows (one int32 lane each).
//
// vpdpbusd's unsigned operands u[m] (values 4m..4m+3 of the 16 rows, m = 0..7) of one group block.
struct Q4_0Codes {
  static constexpr const quant_packed_detail::Format& kFormat = quant_packed_detail::kQ4_0;
  static HWY_INLINE void unpack(const std::uint8_t* codes, __m512i (&u)[8]) {
    const __m512i low = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int h = 0; h < 4; ++h) {
      const __m512i q = _mm512_loadu_si512(codes + 64 * h);
      u[h] = _mm512_and_si512(q, low);
      u[h + 4] = _mm512_and_si512(_mm512_srli_epi16(q, 4), low);
    }
  }
};
struct Q8_0Codes {
  static constexpr const quant_packed_detail::Format& kFormat = quant_packed_detail::kQ8_0;
  static HWY_INLINE void unpack(const std::uint8_t* codes, __m512i (&u)[8]) {
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) u[m] = _mm512_loadu_si512(codes + 64 * m);
  }
};

// acc + d_w·d_x·(bias + Σ_m u[m]·x[m]) for one token's block (x its 32 activation bytes as 8
// words, bias = -c·Σq_x, d_x its scale): two int32 vpdpbusd chains, one f32 fused multiply-add.
HWY_INLINE __m512 AddBlockProduct(const __m512i (&u)[8], __m512 dw, const std::int32_t* x, std::int32_t bias, float xd,
                                  __m512 acc) {
  __m512i s0 = _mm512_set1_epi32(bias), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int h = 0; h < 4; ++h) {
    s0 = _mm512_dpbusd_epi32(s0, u[h], _mm512_set1_epi32(x[h]));
    s1 = _mm512_dpbusd_epi32(s1, u[h + 4], _mm512_set1_epi32(x[h + 4]));
  }
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), _mm512_mul_ps(dw, _mm512_set1_ps(xd)), acc);
}

// One format's group block for T tokens: the 16 rows' outputs in one zmm per token (Acc); per
// block the codes unpacked into 8 vpdpbusd operands, each multiplied by 4 broadcast activation
// bytes of every token, two int32 chains per token starting from the block's -c·Σq_x bias, then
// one f32 fused multiply-add by d_w (16 lanes) · d_x.
template <class Codes>
struct Block {
  static constexpr const quant_packed_detail::Format& kFormat = Codes::kFormat;
  using Acc = __m512;
  static HWY_INLINE Acc zero() { return _mm512_setzero_ps(); }
  static HWY_INLINE void store(float* y, Acc acc) { _mm512_storeu_ps(y, acc); }
  // acc[t] += token t's products with block b (at `codes`) of the group.
  template <int T>
  static HWY_INLINE void add(const std::uint8_t* codes, const Operands& op, std::int64_t b, Acc (&acc)[T]) {
    __m512i u[8];
    Codes::unpack(codes, u);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + kFormat.code_bytes)));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const std::int64_t tb = t * op.blocks + b;
      acc[t] = AddBlockProduct(u, dw, reinterpret_cast<const std::int32_t*>(op.xq + tb * 32), op.bias[tb], op.xd[tb], acc[t]);
    }
  }
};

// Tokens per pass of one group (the prefill), and the most tokens read as two streams.
constexpr int kChunkTokens = 8;
// 2..kStreamTokens tokens: two groups side by side, each its own stream prefetched 2 KiB ahead,
// every token at once (tinyllama bench --batch B -p 0 -n 16, 2 threads, a Xeon, 2026-11-28,
// alternated with the one-group kernel below, tok/s: Q4_0 2 sequences 84.3 / 78.5 / 83.7 / 76.0
// -> 85.4 / 97.6 / 84.2 / 94.3, 4: 141.9 / 133.2 -> 154.5 / 171.9, 6: 201.7 / 180.5 / 195.5 /
// 182.4 -> 204.2 / 219.0 / 200.4 / 214.2; Q8_0 2: 50.4 / 49.7 -> 54.1 / 52.5, 4: 86.8 / 85.7 ->
// 96.4 / 97.1, 6: 121.1 / 127.2 -> 132.5 / 130.9; at 8 sequences no better: Q4_0 229.7 / 216.3 /
// 223.7 / 214.9 -> 213.1 / 246.8 / 215.2 / 213.1).
constexpr int kStreamTokens = 6;

#include "kernels/cpu/matmul/quant_packed_groups-inl.h"

#else  // AVX2 (and AVX-512 without VNNI, which runs the same 256-bit code); with AVX-VNNI one
// vpdpbusd per 4 values, token and 8 rows, where AVX2 takes vpmaddubsw + vpmaddwd + vpaddd (Q8_0)
// or vpmaddubsw + vpaddw (Q4_0).
#define PEREGRINE_AVX2_KERNELS "kernels/cpu/matmul/quant_packed_avx2-inl.h"
#include "kernels/cpu/avx2_levels-inl.h"  // namespaces avx2, avx2_vnni
#undef PEREGRINE_AVX2_KERNELS

void GemvGroups(const Operands& op, std::int64_t g0, std::int64_t g1) {
  if (isa_level() == IsaLevel::kAvx2Vnni) return avx2_vnni::GemvGroups(op, g0, g1);
  avx2::GemvGroups(op, g0, g1);
}
#endif

bool QuantHasSimdKernel() { return true; }

#pragma GCC pop_options
#else
void GemvGroups(const Operands& op, std::int64_t g0, std::int64_t g1) {
  for (std::int64_t g = g0; g < g1; ++g) quant_packed_detail::GroupScalar(op, g);
}
bool QuantHasSimdKernel() { return false; }
#endif

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {
namespace {

HWY_EXPORT(GemvGroups);
HWY_EXPORT(QuantHasSimdKernel);

using quant_packed_detail::Format;
using quant_packed_detail::Operands;

// Per token and block of `xq`, -c · Σ q_x: the bias that takes off the codes' offset c.
std::vector<std::int32_t> activation_biases(const QuantizedActivations& xq, std::int32_t c) {
  std::vector<std::int32_t> bias(static_cast<std::size_t>(xq.n_tokens * (xq.in / 32)));
  for (std::size_t i = 0; i < bias.size(); ++i) {
    std::int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += xq.q[i * 32 + static_cast<std::size_t>(j)];
    bias[i] = -c * sum;
  }
  return bias;
}

Operands operands(const PackedProduct& p, const std::vector<std::int32_t>& bias) {
  return {p.dtype, p.packed, p.xq->in / 32, p.xq->q.data(), p.xq->d.data(), bias.data(), p.xq->n_tokens, p.out, p.y.data()};
}

// Block b of stored row e (d, then the codes) into group block `dst` of its group.
void pack_block(DType dtype, const std::uint8_t* block, int e, std::uint8_t* dst) {
  const Format& f = quant_packed_detail::format(dtype);
  std::memcpy(dst + f.code_bytes + 2 * e, block, 2);
  for (int m = 0; m < 8; ++m) {
    for (int k = 0; k < 4; ++k) {
      const int j = 4 * m + k;
      if (dtype == DType::kQ8_0) {
        dst[m * 64 + e * 4 + k] = static_cast<std::uint8_t>(block[2 + j] ^ 0x80);
      } else if (m < 4) {  // Q4_0 qs[j] = value j | value j + 16 << 4: byte j holds both
        dst[m * 64 + e * 4 + k] = block[2 + j];
      }
    }
  }
}

}  // namespace

bool quant_packed_gemv_available() { return HWY_DYNAMIC_DISPATCH(QuantHasSimdKernel)(); }

bool quant_packable(const TensorView& w) {
  if ((w.dtype != DType::kQ4_0 && w.dtype != DType::kQ8_0) || w.shape.size() != 2) return false;
  const std::int64_t out = w.shape[0], in = w.shape[1];
  return out > 0 && out % kQuantPackRows == 0 && in > 0 && in % 32 == 0 &&
         w.nbytes == static_cast<std::size_t>(out * (in / 32)) * quant_packed_detail::format(w.dtype).block_bytes;
}

Status pack_quant(const TensorView& w, std::span<std::uint8_t> dst) {
  if (!quant_packable(w)) {
    return invalid_argument("pack_quant: " + w.name + " is not a 2-D Q4_0 or Q8_0 matrix of whole 16-row groups");
  }
  if (dst.size() < w.nbytes) {
    return invalid_argument("pack_quant: " + std::to_string(dst.size()) + " bytes cannot hold the " +
                            std::to_string(w.nbytes) + " of " + w.name);
  }
  const Format& f = quant_packed_detail::format(w.dtype);
  const std::int64_t out = w.shape[0], blocks = w.shape[1] / 32;
  const auto* src = static_cast<const std::uint8_t*>(w.data);
  const std::size_t row_bytes = static_cast<std::size_t>(blocks) * f.block_bytes;
  for (std::int64_t g = 0; g < out / kQuantPackRows; ++g) {
    std::uint8_t* group = dst.data() + static_cast<std::size_t>(g) * 16 * row_bytes;
    for (int e = 0; e < 16; ++e) {
      const std::uint8_t* row = src + static_cast<std::size_t>(g * 16 + e) * row_bytes;
      for (std::int64_t b = 0; b < blocks; ++b) {
        pack_block(w.dtype, row + b * f.block_bytes, e, group + b * f.group_block_bytes());
      }
    }
  }
  return Status::ok();
}

void gemv_quant_packed(std::span<const PackedProduct> products, ThreadPool& pool, std::int64_t min_parallel_macs) {
  // One bias per distinct input and offset c.
  std::map<std::pair<const QuantizedActivations*, std::int32_t>, std::vector<std::int32_t>> biases;
  std::vector<Operands> ops;
  std::vector<std::int64_t> outs;
  std::int64_t macs = 0;
  std::size_t max_row_bytes = 0;
  for (const PackedProduct& p : products) {
    const Format& f = quant_packed_detail::format(p.dtype);
    auto [it, added] = biases.try_emplace({p.xq, f.offset});
    if (added) it->second = activation_biases(*p.xq, f.offset);
    ops.push_back(operands(p, it->second));
    outs.push_back(p.out);
    macs += p.out * p.xq->in * p.xq->n_tokens;
    max_row_bytes = std::max(max_row_bytes, static_cast<std::size_t>(p.xq->in / 32) * f.block_bytes);
  }
  split_products_guided(outs, macs, max_row_bytes, kQuantPackRows, pool, min_parallel_macs,
                        [&](std::size_t p, std::int64_t begin, std::int64_t end) {
                          HWY_DYNAMIC_DISPATCH(GemvGroups)(ops[p], begin / kQuantPackRows, end / kQuantPackRows);
                        });
}

void gemv_quant_packed_reference(const PackedProduct& product) {
  const std::vector<std::int32_t> bias = activation_biases(*product.xq, quant_packed_detail::format(product.dtype).offset);
  const Operands op = operands(product, bias);
  for (std::int64_t g = 0; g < product.out / kQuantPackRows; ++g) quant_packed_detail::GroupScalar(op, g);
}

}  // namespace peregrine
#endif  // HWY_ONCE
