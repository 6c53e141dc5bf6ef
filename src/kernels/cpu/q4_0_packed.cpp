#include "peregrine/kernels/cpu/q4_0_packed.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "kernels/cpu/row_split.h"
#include "peregrine/quant/fp16.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/q4_0_packed.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#ifndef PEREGRINE_KERNELS_CPU_Q4_0_PACKED_SHARED
#define PEREGRINE_KERNELS_CPU_Q4_0_PACKED_SHARED
namespace peregrine::q4_0_packed_detail {

constexpr std::size_t kBlockBytes = 18;         // one Q4_0 block: f16 d, 16 bytes of nibbles
constexpr std::size_t kNibbleBytes = 256;       // one block of 16 rows: 4 quarters × 64 bytes ...
constexpr std::size_t kGroupBlockBytes = 288;   // ... then their 16 f16 scales

// The operands of one call, shared by every target's kernel.
struct Operands {
  const std::uint8_t* packed;
  std::int64_t blocks;                // per row
  const std::int8_t* xq;              // [n_tokens, in]
  const float* xd;                    // [n_tokens, blocks]
  const std::int32_t* bias;           // [n_tokens, blocks]: -8 · Σ q_x of the block
  std::int64_t n_tokens, out;
  float* y;                           // [n_tokens, out]
  std::size_t group_bytes() const { return static_cast<std::size_t>(blocks) * kBlockBytes * 16; }
};

// One packed group row by row: the scalar twin, and the kernel of targets without VNNI.
void GroupScalar(const Operands& op, std::int64_t group) {
  const std::uint8_t* g = op.packed + static_cast<std::size_t>(group) * op.group_bytes();
  const std::uint8_t* scales = g + kNibbleBytes;
  for (std::int64_t t = 0; t < op.n_tokens; ++t) {
    for (int e = 0; e < 16; ++e) {
      float acc = 0.0f;
      for (std::int64_t b = 0; b < op.blocks; ++b) {
        const std::uint8_t* nib = g + b * kGroupBlockBytes;
        const std::int8_t* x = op.xq + t * op.blocks * 32 + b * 32;
        std::int32_t dot = 0;
        for (int j = 0; j < 32; ++j) {
          const int h = (j / 4) % 4;
          const std::uint8_t byte = nib[h * 64 + e * 4 + j % 4];
          dot += ((j < 16 ? byte & 0x0f : byte >> 4) - 8) * std::int32_t{x[j]};
        }
        std::uint16_t d;
        std::memcpy(&d, scales + b * kGroupBlockBytes + 2 * e, 2);
        acc += (f16_to_f32(d) * op.xd[t * op.blocks + b]) * static_cast<float>(dot);
      }
      op.y[t * op.out + group * 16 + e] = acc;
    }
  }
}

}  // namespace peregrine::q4_0_packed_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
using q4_0_packed_detail::Operands;

#if HWY_TARGET == HWY_AVX3_DL
#pragma GCC push_options
#pragma GCC target("avx512vnni")

// 16 rows × RN (<= 8) tokens: per block, the 4 nibble quarters unpack into 8 vpdpbusd operands (values
// 4h..4h+3 and 4h+16..4h+19 of every row, rows in lanes), each multiplied by 4 broadcast
// activation bytes; two int32 chains per token start from the block's -8·Σq_x bias; then one
// f32 fused multiply-add by d_w (16 lanes) · d_x. The outputs of the 16 rows are one store.
template <int RN>
void GroupVnni(const Operands& op, std::int64_t group) {
  const std::uint8_t* nib = op.packed + static_cast<std::size_t>(group) * op.group_bytes();
  const std::uint8_t* scales = nib + q4_0_packed_detail::kNibbleBytes;
  const __m512i low = _mm512_set1_epi8(0x0f);
  __m512 acc[RN];
#pragma GCC unroll 8
  for (int t = 0; t < RN; ++t) acc[t] = _mm512_setzero_ps();
  // Each block prefetches the next group's same block into L2, so that the next group's DRAM
  // read overlaps this group's compute; the hardware prefetcher alone left them in series once a
  // group had several tokens to compute (tinyllama, same run: forwards of 4 / 8 / 16 / 24 / 32
  // rows 14 / 31 / 50 / 62 / 76 -> 10 / 16 / 28 / 43 / 56 ms; one row unchanged at 9.1 ms).
  // Past the matrix's end the addresses are hints, never dereferenced.
  const std::size_t ahead = op.group_bytes();
  for (std::int64_t b = 0; b < op.blocks; ++b, nib += q4_0_packed_detail::kGroupBlockBytes) {
    for (std::size_t line = 0; line < q4_0_packed_detail::kGroupBlockBytes; line += 64) {
      __builtin_prefetch(nib + ahead + line, 0, 2);
    }
    __m512i u[8];
#pragma GCC unroll 4
    for (int h = 0; h < 4; ++h) {
      const __m512i q = _mm512_loadu_si512(nib + 64 * h);
      u[h] = _mm512_and_si512(q, low);
      u[h + 4] = _mm512_and_si512(_mm512_srli_epi16(q, 4), low);
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + b * q4_0_packed_detail::kGroupBlockBytes)));
#pragma GCC unroll 8
    for (int t = 0; t < RN; ++t) {
      const auto* x = reinterpret_cast<const std::int32_t*>(op.xq + (t * op.blocks + b) * 32);
      __m512i s0 = _mm512_set1_epi32(op.bias[t * op.blocks + b]), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int h = 0; h < 4; ++h) {
        s0 = _mm512_dpbusd_epi32(s0, u[h], _mm512_set1_epi32(x[h]));
        s1 = _mm512_dpbusd_epi32(s1, u[h + 4], _mm512_set1_epi32(x[h + 4]));
      }
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(op.xd[t * op.blocks + b]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), scale, acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < RN; ++t) _mm512_storeu_ps(op.y + t * op.out + group * 16, acc[t]);
}

// One group for up to 8 tokens of `op`.
void GroupTokens(const Operands& op, std::int64_t g) {
  switch (op.n_tokens) {
    case 1: return GroupVnni<1>(op, g);
    case 2: return GroupVnni<2>(op, g);
    case 3: return GroupVnni<3>(op, g);
    case 4: return GroupVnni<4>(op, g);
    case 5: return GroupVnni<5>(op, g);
    case 6: return GroupVnni<6>(op, g);
    case 7: return GroupVnni<7>(op, g);
    default: return GroupVnni<8>(op, g);
  }
}

// Each group for all tokens, 8 at a time: the group's weights (16 rows) stay in L1/L2 between
// the token chunks, so DRAM sees them once.
void GemvGroups(const Operands& op, std::int64_t g0, std::int64_t g1) {
  for (std::int64_t g = g0; g < g1; ++g) {
    for (std::int64_t t = 0; t < op.n_tokens; t += 8) {
      Operands chunk = op;
      chunk.xq += t * op.blocks * 32;
      chunk.xd += t * op.blocks;
      chunk.bias += t * op.blocks;
      chunk.y += t * op.out;
      chunk.n_tokens = std::min<std::int64_t>(8, op.n_tokens - t);
      GroupTokens(chunk, g);
    }
  }
}
bool HasVnniKernel() { return true; }

#pragma GCC pop_options
#else
void GemvGroups(const Operands& op, std::int64_t g0, std::int64_t g1) {
  for (std::int64_t g = g0; g < g1; ++g) q4_0_packed_detail::GroupScalar(op, g);
}
bool HasVnniKernel() { return false; }
#endif

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {
namespace {

HWY_EXPORT(GemvGroups);
HWY_EXPORT(HasVnniKernel);

using q4_0_packed_detail::kBlockBytes;
using q4_0_packed_detail::Operands;

// Per token and block of `xq`, -8 · Σ q_x: the bias that applies Q4_0's -8 offset.
std::vector<std::int32_t> activation_biases(const QuantizedActivations& xq) {
  std::vector<std::int32_t> bias(static_cast<std::size_t>(xq.n_tokens * (xq.in / 32)));
  for (std::size_t i = 0; i < bias.size(); ++i) {
    std::int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += xq.q[i * 32 + static_cast<std::size_t>(j)];
    bias[i] = -8 * sum;
  }
  return bias;
}

Operands operands(const std::uint8_t* packed, std::int64_t out, const QuantizedActivations& xq, std::span<float> y,
                  const std::vector<std::int32_t>& bias) {
  return {packed, xq.in / 32, xq.q.data(), xq.d.data(), bias.data(), xq.n_tokens, out, y.data()};
}

}  // namespace

bool q4_0_packed_gemv_available() { return HWY_DYNAMIC_DISPATCH(HasVnniKernel)(); }

bool q4_0_packable(const TensorView& w) {
  if (w.dtype != DType::kQ4_0 || w.shape.size() != 2) return false;
  const std::int64_t out = w.shape[0], in = w.shape[1];
  return out > 0 && out % kQ4_0PackRows == 0 && in > 0 && in % 32 == 0 &&
         w.nbytes == static_cast<std::size_t>(out * (in / 32)) * kBlockBytes;
}

Status pack_q4_0(const TensorView& w, std::span<std::uint8_t> dst) {
  if (!q4_0_packable(w)) {
    return invalid_argument("pack_q4_0: " + w.name + " is not a 2-D Q4_0 matrix of whole 16-row groups");
  }
  if (dst.size() < w.nbytes) {
    return invalid_argument("pack_q4_0: " + std::to_string(dst.size()) + " bytes cannot hold the " +
                            std::to_string(w.nbytes) + " of " + w.name);
  }
  const std::int64_t out = w.shape[0], blocks = w.shape[1] / 32;
  const auto* src = static_cast<const std::uint8_t*>(w.data);
  const std::size_t row_bytes = static_cast<std::size_t>(blocks) * kBlockBytes;
  for (std::int64_t g = 0; g < out / kQ4_0PackRows; ++g) {
    std::uint8_t* nib = dst.data() + static_cast<std::size_t>(g) * 16 * row_bytes;
    std::uint8_t* scales = nib + q4_0_packed_detail::kNibbleBytes;
    for (int e = 0; e < 16; ++e) {
      const std::uint8_t* row = src + static_cast<std::size_t>(g * 16 + e) * row_bytes;
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::uint8_t* block = row + b * kBlockBytes;  // d, then qs[j] = value j | value j+16 << 4
        std::memcpy(scales + b * q4_0_packed_detail::kGroupBlockBytes + 2 * e, block, 2);
        for (int h = 0; h < 4; ++h) {
          for (int k = 0; k < 4; ++k) {
            const int j = 4 * h + k;  // low nibble: value j; high nibble: value j + 16
            nib[b * q4_0_packed_detail::kGroupBlockBytes + h * 64 + e * 4 + k] = block[2 + j];
          }
        }
      }
    }
  }
  return Status::ok();
}

void gemv_q4_0_packed(std::span<const PackedProduct> products, ThreadPool& pool, std::int64_t min_parallel_macs) {
  std::map<const QuantizedActivations*, std::vector<std::int32_t>> biases;  // one per distinct input
  std::vector<Operands> ops;
  std::vector<std::int64_t> outs;
  std::int64_t macs = 0, max_in = 0;
  for (const PackedProduct& p : products) {
    auto [it, added] = biases.try_emplace(p.xq);
    if (added) it->second = activation_biases(*p.xq);
    ops.push_back(operands(p.packed, p.out, *p.xq, p.y, it->second));
    outs.push_back(p.out);
    macs += p.out * p.xq->in * p.xq->n_tokens;
    max_in = std::max(max_in, p.xq->in);
  }
  split_products_guided(outs, macs, static_cast<std::size_t>(max_in / 32) * kBlockBytes, kQ4_0PackRows, pool,
                        min_parallel_macs, [&](std::size_t p, std::int64_t begin, std::int64_t end) {
                          HWY_DYNAMIC_DISPATCH(GemvGroups)(ops[p], begin / kQ4_0PackRows, end / kQ4_0PackRows);
                        });
}

void gemv_q4_0_packed_reference(const std::uint8_t* packed, std::int64_t out, const QuantizedActivations& xq,
                                std::span<float> y) {
  const std::vector<std::int32_t> bias = activation_biases(xq);
  const Operands op = operands(packed, out, xq, y, bias);
  for (std::int64_t g = 0; g < out / kQ4_0PackRows; ++g) q4_0_packed_detail::GroupScalar(op, g);
}

}  // namespace peregrine
#endif  // HWY_ONCE
