#include "peregrine/kernels/cpu/matmul/half_packed.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/count_dispatch.h"
#include "kernels/cpu/matmul/decode_prefetch.h"
#include "kernels/cpu/row_split.h"
#include "kernels/cpu/token_chunks.h"
#include "peregrine/quant/fp16.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul/half_packed.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/matmul/column_passes-inl.h"
#include "kernels/cpu/matmul/float_weight_load-inl.h"

#ifndef PEREGRINE_KERNELS_CPU_HALF_PACKED_SHARED
#define PEREGRINE_KERNELS_CPU_HALF_PACKED_SHARED
namespace peregrine::half_packed_detail {

constexpr std::size_t kRows = 16;        // rows per group (kHalfPackRows)
constexpr std::size_t kSums = 4;         // partial sums per output: column i goes to i mod 4

// One product's operands, shared by every target's kernel: W's packed groups (F16 or BF16 bits),
// x [n_tokens, in] and y [n_tokens, out].
struct Operands {
  const std::uint16_t* packed;
  bool bf16;
  std::size_t in, out;
  const float* x;
  std::size_t n_tokens;
  float* y;
};

inline float widen(const Operands& op, std::uint16_t bits) { return op.bf16 ? bf16_to_f32(bits) : f16_to_f32(bits); }

// One group for every token, lane by lane: the scalar twin, and the kernel of targets without
// 16 f32 lanes.
inline void GroupScalar(const Operands& op, std::size_t group) {
  const std::uint16_t* g = op.packed + group * kRows * op.in;
  for (std::size_t t = 0; t < op.n_tokens; ++t) {
    const float* x = op.x + t * op.in;
    for (std::size_t e = 0; e < kRows; ++e) {
      float s[kSums] = {};
      for (std::size_t i = 0; i < op.in; ++i) s[i % kSums] = std::fma(widen(op, g[i * kRows + e]), x[i], s[i % kSums]);
      op.y[t * op.out + group * kRows + e] = (s[0] + s[1]) + (s[2] + s[3]);
    }
  }
}

}  // namespace peregrine::half_packed_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using half_packed_detail::kRows;
using half_packed_detail::kSums;
using half_packed_detail::Operands;

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2

// A group's 16 rows are kParts f32 vectors of kLanes: one on AVX-512, two on AVX2 (rows 0-7 and
// 8-15). Each vector is its own accumulator stream; every lane computes the same operations at
// either width, so the sums are the same bit for bit.
constexpr std::size_t kLanes = HWY_TARGET <= HWY_AVX3 ? 16 : 8;
constexpr std::size_t kParts = kRows / kLanes;
using D = hn::FixedTag<float, kLanes>;
using V = hn::Vec<D>;

// Part k of the G groups g, g + stride, …: vector k (group k / kParts, rows (k % kParts)·kLanes
// on): the offset, in values, of its first row's column 0 in the packed matrix (rows: ×1/in).
HWY_INLINE std::size_t PartRow(std::size_t k, std::size_t g, std::size_t stride) {
  return (g + k / kParts * stride) * kRows + k % kParts * kLanes;
}

// The packed weights of the vector whose first row is `row` (PartRow), at column 0.
template <class WT>
HWY_INLINE const WT* PartWeights(const Operands& op, std::size_t row) {
  return reinterpret_cast<const WT*>(op.packed) + row / kRows * kRows * op.in + row % kRows;
}

// Single-token decode: the groups walked side by side (kDecodeStreams on AVX-512; AVX2's 16
// registers hold the 4·2 accumulators of one group, the second group's spill to L1, and still
// read faster: tinyllama F16 decode on a Zen 4 capped at AVX2, 2 threads, alternated 8 times,
// one group 15-22 tok/s, two 19-24; four 15-18).
constexpr int kDecodeGroups = kParts == 1 ? kDecodeStreams : 2;

// One token, S groups at once (16 rows each, group s is g + s·stride): per column one 32-byte
// load per group widened to f32, one fused multiply-add per vector with the broadcast
// activation; S·kParts·4 accumulators. Each group is its own read stream with its own prefetch
// kDecodePrefetchBytes ahead (decode_prefetch.h).
template <int S, class WT>
HWY_INLINE void GroupStreams(const Operands& op, std::size_t g, std::size_t stride, const float* HWY_RESTRICT x,
                             float* HWY_RESTRICT y) {
  constexpr std::size_t kVectors = S * kParts;
  const D d;
  const std::size_t in = op.in;
  const WT* HWY_RESTRICT w[kVectors];
  V acc[kVectors][kSums];
  for (std::size_t k = 0; k < kVectors; ++k) {
    w[k] = PartWeights<WT>(op, PartRow(k, g, stride));
    for (std::size_t u = 0; u < kSums; ++u) acc[k][u] = hn::Zero(d);
  }
  const auto column = [&](std::size_t i, std::size_t u) {
    const V xv = hn::Set(d, x[i]);
    for (std::size_t k = 0; k < kVectors; ++k) acc[k][u] = hn::MulAdd(LoadAsF32(d, w[k] + i * kRows), xv, acc[k][u]);
  };
  std::size_t i = 0;
  for (; i + kSums <= in; i += kSums) {
    for (std::size_t k = 0; k < kVectors; k += kParts) prefetch_decode_stream<kSums * kRows * sizeof(WT)>(w[k] + i * kRows);
    for (std::size_t u = 0; u < kSums; ++u) column(i + u, u);
  }
  for (std::size_t u = 0; i + u < in; ++u) column(i + u, u);
  for (std::size_t k = 0; k < kVectors; ++k) {
    hn::StoreU(hn::Add(hn::Add(acc[k][0], acc[k][1]), hn::Add(acc[k][2], acc[k][3])), d, y + PartRow(k, g, stride));
  }
}

// AVX-512: 16 rows (one f32 vector) × T (2..6) tokens of group `g` (the tokens of `chunk`): per column
// one 32-byte load widened to f32, then one fused multiply-add per token with the broadcast
// activation; T·4 accumulators (24 at T = 6, the most that stay in the 32 registers).
template <std::size_t T, class WT>
HWY_INLINE void GroupTokens(const Operands& op, std::size_t g, TokenChunk chunk) {
  const D d;
  const WT* HWY_RESTRICT w = reinterpret_cast<const WT*>(op.packed) + g * kRows * op.in;
  const std::size_t in = op.in;
  const float* HWY_RESTRICT x = op.x + chunk.first * in;
  float* HWY_RESTRICT y = op.y + chunk.first * op.out;
  V acc[T][kSums];
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t u = 0; u < kSums; ++u) acc[t][u] = hn::Zero(d);
  }
  const auto column = [&](std::size_t i, std::size_t u) {
    const V wv = LoadAsF32(d, w + i * kRows);
    for (std::size_t t = 0; t < T; ++t) acc[t][u] = hn::MulAdd(wv, hn::Set(d, x[t * in + i]), acc[t][u]);
  };
  // With several tokens a group's compute outlasts its read: the next group is prefetched into
  // L2 meanwhile, spread over this group's chunks (NextGroupHints; first, each chunk hinting the
  // whole next group: tinyllama F16, same run, forwards of 8 rows 90-125 -> 53-63 ms). Spread,
  // against every chunk hinting it all (tinyllama's F16 matrices over 22 layers, 2 threads, a
  // Xeon with AVX-512, 2026-11-28, alternated): 8 tokens 117-122 -> 104-106 ms, 16 tokens
  // 158-168 -> 136-141, 24 tokens 207-227 -> 185-191; batched decode tg16, 8 sequences 59.7 /
  // 57.8 -> 65.4 / 65.8 tok/s, 16: 85.8 / 82.0 -> 97.4 / 102.2, 24: 96.8 / 92.2 -> 105.3 / 106.6
  // (2 and 4 sequences, one chunk: 23.0 / 22.9 -> 22.1 / 22.2 and 40.5 / 39.6 -> 37.8 / 39.6).
  // Past the matrix's end the addresses are hints, never dereferenced.
  const std::uintptr_t next = reinterpret_cast<std::uintptr_t>(w + kRows * in);
  constexpr std::size_t kStepBytes = kSums * kRows * sizeof(WT);
  NextGroupHints hints(chunk, in / kSums);
  std::size_t i = 0;
  for (; i + kSums <= in; i += kSums) {
    if (std::size_t step; hints.due(step)) {
      for (std::size_t line = 0; line < kStepBytes; line += 64) {
        __builtin_prefetch(reinterpret_cast<const char*>(next + step * kStepBytes + line), 0, 2);
      }
    }
    for (std::size_t u = 0; u < kSums; ++u) column(i + u, u);
  }
  for (std::size_t u = 0; i + u < in; ++u) column(i + u, u);
  for (std::size_t t = 0; t < T; ++t) {
    hn::StoreU(hn::Add(hn::Add(acc[t][0], acc[t][1]), hn::Add(acc[t][2], acc[t][3])), d, y + t * op.out + g * kRows);
  }
}

// The passes kernel, for 2..kPassTokens tokens (column_passes-inl.h): S groups side by side (g,
// g + stride, ...; each its own read stream, prefetched one block of kPassBlock columns ahead),
// every token at once, so each weight is widened once for all of them; the same sums as the other
// kernels, bit for bit.
constexpr std::size_t kPassTokens = 12;
constexpr std::size_t kPassBlock = 128;  // columns: 4 KiB of F16 per group

// Whether S groups × T tokens × P partial sums of accumulators fit the registers: AVX-512's 32
// keep up to 24; AVX2's 16 hold the 2·S·T·P accumulators, T broadcast activations and the
// widened weights.
template <std::size_t S, std::size_t T>
constexpr bool Fits(std::size_t p) {
  return kParts == 1 ? S * T * p <= 24 : kParts * S * T * p + T + 1 < 16;
}

// Partial sums per pass for S groups and T tokens: the most (4, 2 or 1) that fit (AVX-512, 2
// groups: 4 up to 3 tokens, 2 up to 6, then 1).
template <std::size_t S, std::size_t T>
constexpr std::size_t kPassSums = Fits<S, T>(4) ? 4 : Fits<S, T>(2) ? 2 : 1;

// AVX2: how far ahead of the passes' column walk each group's stream is hinted into L2 (the walk's
// own hints, one block ahead into L1, left a single stream per thread short of the bandwidth:
// tinyllama F16 batched decode, Zen 4 capped at AVX2, alternated 4 times, 3 sequences 33.5 ->
// 39.7 tok/s, 6 sequences 48.3 -> 52.3).
constexpr std::size_t kFarHintBytes = 16384;

// The column step of the walk over the kParts vectors of S groups (the walk's streams): one load
// per vector widened to f32, one multiply-add per token.
template <std::size_t S, std::size_t T, class WT>
struct PassColumns {
  using V = peregrine::HWY_NAMESPACE::V;
  static constexpr std::size_t kStepBytes = kRows * sizeof(WT);  // a column of one group
  static constexpr std::size_t kStreamParts = kParts;
  const float* HWY_RESTRICT x;  // [T, in]
  std::size_t in;
  float* y;  // token 0's outputs; token t at y + t·out
  std::size_t out;
  std::size_t rows[S * kParts];  // each vector's first output row
  const WT* HWY_RESTRICT w[S * kParts];

  PassColumns(const Operands& op, std::size_t g, std::size_t stride) : x(op.x), in(op.in), y(op.y), out(op.out) {
    for (std::size_t k = 0; k < S * kParts; ++k) {
      rows[k] = PartRow(k, g, stride);
      w[k] = PartWeights<WT>(op, rows[k]);
    }
  }
  static V zero() { return hn::Zero(D()); }
  static V load(const float* p) { return hn::Load(D(), p); }
  static void store(V v, float* p) { hn::Store(v, D(), p); }
  static V add(V a, V b) { return hn::Add(a, b); }
  const char* stream(std::size_t s) const { return reinterpret_cast<const char*>(w[s]); }
  template <std::size_t P>
  HWY_INLINE void step(V (&acc)[S * kParts][T][P], std::size_t i, std::size_t p) const {
    if constexpr (kParts == 2) {
      if (p == 0 && i % kSums == 0) {
        for (std::size_t s = 0; s < S * kParts; s += kParts) {
          const char* far = reinterpret_cast<const char*>(w[s] + i * kRows) + kFarHintBytes;
          for (std::size_t line = 0; line < kSums * kRows * sizeof(WT); line += 64) prefetch_line_l2(far + line);
        }
      }
    }
    for (std::size_t s = 0; s < S * kParts; ++s) {
      const V wv = LoadAsF32(D(), w[s] + i * kRows);
      for (std::size_t t = 0; t < T; ++t) acc[s][t][p] = hn::MulAdd(wv, hn::Set(D(), x[t * in + i]), acc[s][t][p]);
    }
  }
  void finish(std::size_t s, std::size_t t, V sum) const { hn::StoreU(sum, D(), y + t * out + rows[s]); }
};

template <std::size_t S, std::size_t T, class WT>
HWY_INLINE void GroupPasses(const Operands& op, std::size_t g, std::size_t stride) {
  PassColumns<S, T, WT> columns(op, g, stride);
  walk_column_passes<S * kParts, T, kPassSums<S, T>, kPassBlock>(op.in, columns);
}

// Groups [g0, g1) through the passes kernel for op.n_tokens = 2 .. kPassTokens, two streams.
template <class WT>
void Passes(const Operands& op, std::size_t g0, std::size_t g1) {
  dispatch_count<std::size_t{2}, kPassTokens>(op.n_tokens, [&]<std::size_t kT>() {
    for_decode_streams<2>(g0, g1, [&]<int S>(std::size_t g, std::size_t stride) { GroupPasses<S, kT, WT>(op, g, stride); });
  });
}

// AVX2, 2 .. kHalfPackedTokens tokens: G groups side by side (for_decode_streams), the tokens
// in chunks of up to kChunk, each chunk one walk of the passes kernel over the groups (after the
// first chunk, from L2).
template <int G, std::size_t kChunk, class WT>
void AvxPasses(const Operands& op, std::size_t g0, std::size_t g1) {
  for_decode_streams<G>(g0, g1, [&]<int S>(std::size_t g, std::size_t stride) {
    for_token_chunks<kChunk>(op.n_tokens, [&]<std::size_t T>(TokenChunk chunk) {
      Operands part = op;
      part.x += chunk.first * op.in;
      part.y += chunk.first * op.out;
      part.n_tokens = T;
      if constexpr (T == 1) {
        GroupStreams<S, WT>(part, g, stride, part.x, part.y);
      } else {
        GroupPasses<S, T, WT>(part, g, stride);
      }
    });
  });
}

template <class WT>
void GroupsOf(const Operands& op, std::size_t g0, std::size_t g1) {
  if (op.n_tokens == 1) {
    // kDecodeStreams groups side by side (tinyllama F16 decode on a Xeon, 2 threads, one binary
    // choosing by a test-only variable, alternated: 1 stream without hints 12.7-13.0 tok/s, 2
    // streams 14.5-14.6, 4 streams 14.6-15.4, 8 streams 14.1-14.5; 4 streams with the hints 512 B
    // ahead instead of 2 KiB: 12.4-12.6).
    return for_decode_streams<kDecodeGroups>(g0, g1, [&]<int S>(std::size_t g, std::size_t stride) {
      GroupStreams<S, WT>(op, g, stride, op.x, op.y);
    });
  }
  if constexpr (kParts == 2) {
    // Up to 5 tokens one group and one chunk (at 5 its 10 accumulators and 5 broadcasts fill the
    // registers: tinyllama F16 5-row verify forwards 108-110 ms as chunks of 3 + 2, 68-69 ms in
    // one; 5 sequences 1.26x the row-major GEMV), 6 chunks of 3, more two groups and chunks of 3
    // (against one group in chunks of 6, alternated 4 times: 4 sequences 49.9 -> 46.5 tok/s with
    // two groups, 16 sequences 66.8 -> 75.8; docs/performance.md has the row-major comparison).
    if (op.n_tokens <= 5) {
      AvxPasses<1, 5, WT>(op, g0, g1);
    } else if (op.n_tokens <= 6) {
      AvxPasses<1, 3, WT>(op, g0, g1);
    } else {
      AvxPasses<2, 3, WT>(op, g0, g1);
    }
  } else {
    // Up to kPassTokens tokens, the passes kernel: one read stream per group, two groups at once,
    // each weight widened once (tinyllama's F16 matrices over 22 layers, 2 threads, a Xeon with
    // AVX-512, 2026-11-28, against the token chunks below, alternated twice, ms: 2 tokens 84-86 ->
    // 68-72, 4: 93-95 -> 68-72, 6: 94-102 -> 74-75, 8: 110-112 -> 80-83, 12: 123-125 -> 113-116;
    // with 16 or more tokens the GEMV is bound by the multiply-adds, and passes of 8 or 12 tokens
    // ran 0-15% slower than the chunks).
    if (op.n_tokens <= kPassTokens) return Passes<WT>(op, g0, g1);
    // Chunks of up to 6 tokens, so one widening serves up to 6 multiply-adds (tinyllama's F16
    // matrices over 22 layers, 2 threads, a Xeon with AVX-512, 2026-11-28, against chunks of up to
    // 4, alternated: 16 tokens 189-199 -> 176-184 ms, 24 tokens 254-267 -> 236-241, 8 tokens
    // 127-131 -> 125-128; chunks of 8 spill the 32 accumulators and took 2x as long; tinyllama F16
    // batched decode tg16: 16 sequences 73.2 / 71.7 -> 75.9 / 77.6 tok/s, 24: 74.3 / 79.0 -> 87.0 /
    // 90.9).
    for_groups_in_token_chunks<6>(g0, g1, op.n_tokens, [&]<std::size_t T>(std::size_t g, TokenChunk chunk) {
      if constexpr (T == 1) {
        GroupStreams<1, WT>(op, g, 1, op.x + chunk.first * op.in, op.y + chunk.first * op.out);
      } else {
        GroupTokens<T, WT>(op, g, chunk);
      }
    });
  }
}

// Groups [g0, g1) of `op`, every token: each group read from memory once, the token chunks
// after the first finding it in L1/L2.
void GemvGroups(const Operands& op, std::size_t g0, std::size_t g1) {
  if (op.bf16) return GroupsOf<hwy::bfloat16_t>(op, g0, g1);
  GroupsOf<hwy::float16_t>(op, g0, g1);
}
bool HasSimdKernel() { return true; }

#else
void GemvGroups(const Operands& op, std::size_t g0, std::size_t g1) {
  for (std::size_t g = g0; g < g1; ++g) half_packed_detail::GroupScalar(op, g);
}
bool HasSimdKernel() { return false; }
#endif

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {
namespace {

HWY_EXPORT(GemvGroups);
HWY_EXPORT(HasSimdKernel);

using half_packed_detail::Operands;

Operands operands(const TensorView& w, std::span<const float> x, std::int64_t n_tokens, std::span<float> y) {
  return {static_cast<const std::uint16_t*>(w.packed), w.dtype == DType::kBF16, static_cast<std::size_t>(w.row_length()),
          static_cast<std::size_t>(w.n_rows()), x.data(), static_cast<std::size_t>(n_tokens), y.data()};
}

}  // namespace

bool half_packed_gemv_available() { return HWY_DYNAMIC_DISPATCH(HasSimdKernel)(); }

bool half_packable(const TensorView& w) {
  if ((w.dtype != DType::kF16 && w.dtype != DType::kBF16) || w.shape.size() != 2) return false;
  const std::int64_t out = w.shape[0], in = w.shape[1];
  return out > 0 && out % kHalfPackRows == 0 && in > 0 && w.nbytes == static_cast<std::size_t>(out * in) * 2;
}

Status pack_half(const TensorView& w, std::span<std::uint8_t> dst) {
  if (!half_packable(w)) {
    return invalid_argument("pack_half: " + w.name + " is not a 2-D F16 / BF16 matrix of whole 16-row groups");
  }
  if (dst.size() < w.nbytes) {
    return invalid_argument("pack_half: " + std::to_string(dst.size()) + " bytes cannot hold the " +
                            std::to_string(w.nbytes) + " of " + w.name);
  }
  const auto in = static_cast<std::size_t>(w.shape[1]), rows = static_cast<std::size_t>(kHalfPackRows);
  const auto* src = static_cast<const std::uint8_t*>(w.data);
  for (std::size_t r = 0; r < static_cast<std::size_t>(w.shape[0]); ++r) {
    std::uint8_t* group = dst.data() + (r / rows) * rows * in * 2;
    for (std::size_t i = 0; i < in; ++i) std::memcpy(group + (i * rows + r % rows) * 2, src + (r * in + i) * 2, 2);
  }
  return Status::ok();
}

void gemv_half_packed(std::span<const MatmulProduct> products, std::int64_t n_tokens, ThreadPool& pool,
                      std::int64_t min_parallel_macs) {
  std::vector<Operands> ops;
  std::vector<std::int64_t> outs;
  std::int64_t macs = 0, max_in = 0;
  for (const MatmulProduct& p : products) {
    ops.push_back(operands(*p.w, p.x, n_tokens, p.y));
    outs.push_back(p.w->n_rows());
    macs += p.w->n_rows() * p.w->row_length() * n_tokens;
    max_in = std::max(max_in, p.w->row_length());
  }
  split_products_guided(outs, macs, static_cast<std::size_t>(max_in) * 2, kHalfPackRows, pool, min_parallel_macs,
                        [&](std::size_t p, std::int64_t begin, std::int64_t end) {
                          HWY_DYNAMIC_DISPATCH(GemvGroups)(ops[p], static_cast<std::size_t>(begin / kHalfPackRows),
                                                           static_cast<std::size_t>(end / kHalfPackRows));
                        });
}

void gemv_half_packed_reference(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                                std::span<float> y) {
  const Operands op = operands(w, x, n_tokens, y);
  for (std::size_t g = 0; g < op.out / half_packed_detail::kRows; ++g) half_packed_detail::GroupScalar(op, g);
}

}  // namespace peregrine
#endif  // HWY_ONCE
