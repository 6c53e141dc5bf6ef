#include "peregrine/kernels/cpu/matmul/gemv_bf16_dot.h"
#include "peregrine/kernels/cpu/isa.h"

#if defined(__x86_64__)  // the AVX-512 BF16 kernels' intrinsics
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/cpu/count_dispatch.h"
#include "kernels/cpu/matmul/decode_prefetch.h"
#include "kernels/cpu/row_split.h"
#include "kernels/cpu/token_chunks.h"
#include "peregrine/kernels/cpu/matmul/half_packed.h"
#include "peregrine/quant/fp16.h"

// The kernels below are compiled for AVX-512 BF16 whatever the build's -march (a pragma rather
// than per-function attributes, so that their lambdas and the walk they share with half_packed.cpp
// are too); has_bf16_dot() guards the calls. x86 only: other architectures have no BF16 dot
// kernel, and gemv_bf16_dot runs the scalar reference there.
#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512bf16")
#include "kernels/cpu/matmul/column_passes-inl.h"
#endif

namespace peregrine {
namespace {

constexpr std::size_t kRows = 16;  // rows per packed group (kHalfPackRows)
constexpr std::size_t kSums = 4;   // partial sums per output: pair j goes to j mod 4

#if defined(__x86_64__)  // the AVX-512 BF16 kernels (up to round_pairs)

// VPERMW indices over two packed columns: word 2e is row e of the first, word 2e + 1 row e of
// the second, so each row's two weights sit side by side.
alignas(64) constexpr std::uint16_t kPairOrder[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

// One product: W's packed groups, x as BF16 pairs [n_tokens, in/2] and y [n_tokens, out].
struct Operands {
  const std::uint16_t* packed;
  std::size_t in, out;
  const std::uint32_t* x_pairs;
  std::size_t n_tokens;
  float* y;
};

// 16 rows × T (2..6) tokens of group g: per pair of columns, the 64 bytes of both columns, each
// row's two weights made adjacent by one VPERMW, then one VDPBF16PS per token with its
// broadcast pair of activations; T·4 accumulators.
template <std::size_t T>
inline void group_tokens(const Operands& op, std::size_t g, std::size_t t0) {
  const std::uint16_t* w = op.packed + g * kRows * op.in;
  const std::size_t pairs = op.in / 2;
  const __m512i idx = _mm512_load_si512(kPairOrder);
  __m512 acc[T][kSums];
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t u = 0; u < kSums; ++u) acc[t][u] = _mm512_setzero_ps();
  }
  const auto pair = [&](std::size_t j, std::size_t u) {
    const auto wv = reinterpret_cast<__m512bh>(_mm512_permutexvar_epi16(idx, _mm512_loadu_si512(w + j * 2 * kRows)));
    for (std::size_t t = 0; t < T; ++t) {
      const auto xv = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(op.x_pairs[(t0 + t) * pairs + j])));
      acc[t][u] = _mm512_dpbf16_ps(acc[t][u], wv, xv);
    }
  };
  const char* next = reinterpret_cast<const char*>(w + kRows * op.in);  // hints only, never read
  std::size_t j = 0;
  for (; j + kSums <= pairs; j += kSums) {
    for (std::size_t line = 0; line < kSums * 64; line += 64) __builtin_prefetch(next + j * 64 + line, 0, 2);
    for (std::size_t u = 0; u < kSums; ++u) pair(j + u, u);
  }
  for (std::size_t u = 0; j + u < pairs; ++u) pair(j + u, u);
  for (std::size_t t = 0; t < T; ++t) {
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_add_ps(acc[t][2], acc[t][3]));
    _mm512_storeu_ps(op.y + (t0 + t) * op.out + g * kRows, sum);
  }
}

// One token (t0), S groups at once (group s is g + s·stride), each its own read stream
// prefetched kDecodePrefetchBytes ahead (decode_prefetch.h): per pair of columns the token's
// broadcast pair shared by the S groups; S·4 accumulators.
template <int S>
inline void group_streams(const Operands& op, std::size_t g, std::size_t stride, std::size_t t0) {
  const std::size_t pairs = op.in / 2;
  const __m512i idx = _mm512_load_si512(kPairOrder);
  const std::uint16_t* w[S];
  __m512 acc[S][kSums];
  for (int s = 0; s < S; ++s) {
    w[s] = op.packed + (g + static_cast<std::size_t>(s) * stride) * kRows * op.in;
    for (std::size_t u = 0; u < kSums; ++u) acc[s][u] = _mm512_setzero_ps();
  }
  const auto pair = [&](std::size_t j, std::size_t u) {
    const auto xv = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(op.x_pairs[t0 * pairs + j])));
    for (int s = 0; s < S; ++s) {
      const auto wv = reinterpret_cast<__m512bh>(_mm512_permutexvar_epi16(idx, _mm512_loadu_si512(w[s] + j * 2 * kRows)));
      acc[s][u] = _mm512_dpbf16_ps(acc[s][u], wv, xv);
    }
  };
  std::size_t j = 0;
  for (; j + kSums <= pairs; j += kSums) {
    for (int s = 0; s < S; ++s) prefetch_decode_stream<kSums * 64>(w[s] + j * 2 * kRows);
    for (std::size_t u = 0; u < kSums; ++u) pair(j + u, u);
  }
  for (std::size_t u = 0; j + u < pairs; ++u) pair(j + u, u);
  for (int s = 0; s < S; ++s) {
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[s][0], acc[s][1]), _mm512_add_ps(acc[s][2], acc[s][3]));
    _mm512_storeu_ps(op.y + t0 * op.out + (g + static_cast<std::size_t>(s) * stride) * kRows, sum);
  }
}

// The passes kernel for kPassMinTokens..kPassTokens tokens, as half_packed.cpp's (tinyllama BF16
// batched decode tg16, 2 threads, a Xeon, 2026-11-28, alternated twice against the chunks below,
// tok/s: 8 sequences 62.7 / 64.3 -> 78.5 / 80.2, 12: 74.2 / 74.1 -> 85.7 / 86.6, 4: 50.9 / 51.5 ->
// 51.8 / 51.1; 2 sequences 28.3 / 29.1 -> 25.4 / 27.0, so 2-3 tokens stay in the chunks): the
// walk of column_passes-inl.h over column pairs, S groups side by side, each its own read stream
// prefetched one block of kPassPairs pairs ahead, every token at once (one load and VPERMW per
// pair for all of them); pair j adds to j mod 4, in order: the same sums as group_tokens.
constexpr std::size_t kPassMinTokens = 4, kPassTokens = 12;
constexpr std::size_t kPassPairs = 64;  // column pairs per block: 4 KiB of BF16 per group

template <std::size_t T>
constexpr std::size_t kPassSums = T <= 6 ? 2 : 1;

// The pair step of the walk: per group one load and one VPERMW, one VDPBF16PS per token.
template <std::size_t S, std::size_t T>
struct PassPairs {
  using V = __m512;
  static constexpr std::size_t kStepBytes = 64;  // a column pair of one group
  static constexpr std::size_t kStreamParts = 1;  // one vector per group
  const std::uint32_t* x_pairs;                   // [T, pairs]
  std::size_t pairs;
  float* y;  // the first group's outputs of token 0; token t at y + t·out, group s at + s·stride·16
  std::size_t out, stride_rows;
  const std::uint16_t* w[S];
  __m512i idx;

  PassPairs(const Operands& op, std::size_t g, std::size_t stride)
      : x_pairs(op.x_pairs), pairs(op.in / 2), y(op.y + g * kRows), out(op.out), stride_rows(stride * kRows),
        idx(_mm512_load_si512(kPairOrder)) {
    for (std::size_t s = 0; s < S; ++s) w[s] = op.packed + (g + s * stride) * kRows * op.in;
  }
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_load_ps(p); }
  static void store(V v, float* p) { _mm512_store_ps(p, v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  const char* stream(std::size_t s) const { return reinterpret_cast<const char*>(w[s]); }
  template <std::size_t P>
  [[gnu::always_inline]] void step(V (&acc)[S][T][P], std::size_t j, std::size_t p) const {
    for (std::size_t s = 0; s < S; ++s) {
      const auto wv = reinterpret_cast<__m512bh>(_mm512_permutexvar_epi16(idx, _mm512_loadu_si512(w[s] + j * 2 * kRows)));
      for (std::size_t t = 0; t < T; ++t) {
        const auto xv = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(x_pairs[t * pairs + j])));
        acc[s][t][p] = _mm512_dpbf16_ps(acc[s][t][p], wv, xv);
      }
    }
  }
  void finish(std::size_t s, std::size_t t, V sum) const { _mm512_storeu_ps(y + t * out + s * stride_rows, sum); }
};

template <std::size_t S, std::size_t T>
inline void group_passes(const Operands& op, std::size_t g, std::size_t stride) {
  PassPairs<S, T> pairs(op, g, stride);
  HWY_NAMESPACE::walk_column_passes<S, T, kPassSums<T>, kPassPairs>(op.in / 2, pairs);
}

// Groups [g0, g1) through the passes kernel for op.n_tokens = kPassMinTokens .. kPassTokens, two streams.
void passes(const Operands& op, std::size_t g0, std::size_t g1) {
  dispatch_count<kPassMinTokens, kPassTokens>(op.n_tokens, [&]<std::size_t kT>() {
    for_decode_streams<2>(g0, g1, [&]<int S>(std::size_t g, std::size_t stride) { group_passes<S, kT>(op, g, stride); });
  });
}

void groups(const Operands& op, std::size_t g0, std::size_t g1) {
  if (op.n_tokens == 1) {  // kDecodeStreams groups side by side (decode_prefetch.h)
    return for_decode_streams(g0, g1, [&]<int S>(std::size_t g, std::size_t stride) { group_streams<S>(op, g, stride, 0); });
  }
  if (op.n_tokens >= kPassMinTokens && op.n_tokens <= kPassTokens) {
    return passes(op, g0, g1);
  }
  // 2-3 and 13+ tokens: chunks of up to 6 tokens (as half_packed.cpp; tinyllama BF16 batched decode, 2 threads, a
  // Xeon, 2026-11-28, alternated with chunks of up to 4: 16 sequences 64.2 / 65.6 -> 66.4 / 67.9
  // tok/s, 24 sequences 66.9 / 64.4 -> 68.0 / 74.6, 8 sequences unchanged).
  for_groups_in_token_chunks<6>(g0, g1, op.n_tokens, [&]<std::size_t T>(std::size_t g, TokenChunk chunk) {
    if constexpr (T == 1) {
      group_streams<1>(op, g, 1, chunk.first);
    } else {
      group_tokens<T>(op, g, chunk.first);
    }
  });
}

#pragma GCC pop_options

bool has_bf16_dot() {
  static const bool bf16 = __builtin_cpu_supports("avx512bf16");
  return bf16 && isa_level() >= IsaLevel::kAvx512;  // AVX-512 F/BW
}

// x [n_tokens, in] as BF16 pairs, into `out`.
void round_pairs(std::span<const float> x, std::vector<std::uint32_t>& out) {
  out.resize(x.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = f32_pair_to_bf16(x[2 * i], x[2 * i + 1]);
}
#else
bool has_bf16_dot() { return false; }
#endif  // __x86_64__

}  // namespace

bool gemv_bf16_dot_takes(const TensorView& w) {
  return has_bf16_dot() && w.packed != nullptr && w.dtype == DType::kBF16 && w.shape.size() == 2 && w.shape[1] % 2 == 0;
}

void gemv_bf16_dot(std::span<const MatmulProduct> products, std::int64_t n_tokens, ThreadPool& pool,
                   std::int64_t min_parallel_macs) {
#if defined(__x86_64__)
  thread_local std::vector<std::vector<std::uint32_t>> rounded;  // per distinct x, reused between calls
  if (rounded.size() < products.size()) rounded.resize(products.size());
  std::vector<const float*> inputs;
  std::vector<Operands> ops;
  std::vector<std::int64_t> outs;
  std::int64_t macs = 0, max_in = 0;
  for (const MatmulProduct& p : products) {
    const auto at = std::find(inputs.begin(), inputs.end(), p.x.data());
    auto& pairs = rounded[static_cast<std::size_t>(at - inputs.begin())];
    if (at == inputs.end()) {
      inputs.push_back(p.x.data());
      round_pairs(p.x, pairs);
    }
    ops.push_back({static_cast<const std::uint16_t*>(p.w->packed), static_cast<std::size_t>(p.w->row_length()),
                   static_cast<std::size_t>(p.w->n_rows()), pairs.data(), static_cast<std::size_t>(n_tokens), p.y.data()});
    outs.push_back(p.w->n_rows());
    macs += p.w->n_rows() * p.w->row_length() * n_tokens;
    max_in = std::max(max_in, p.w->row_length());
  }
  split_products_guided(outs, macs, static_cast<std::size_t>(max_in) * 2, kHalfPackRows, pool, min_parallel_macs,
                        [&](std::size_t p, std::int64_t begin, std::int64_t end) {
                          groups(ops[p], static_cast<std::size_t>(begin / kHalfPackRows),
                                 static_cast<std::size_t>(end / kHalfPackRows));
                        });
#else  // no kernel (gemv_bf16_dot_takes() is false): the scalar reference, product by product
  static_cast<void>(pool);
  static_cast<void>(min_parallel_macs);
  for (const MatmulProduct& p : products) gemv_bf16_dot_reference(*p.w, p.x, n_tokens, p.y);
#endif
}

void gemv_bf16_dot_reference(const TensorView& w, std::span<const float> x, std::int64_t n_tokens, std::span<float> y) {
  const auto in = static_cast<std::size_t>(w.row_length()), out = static_cast<std::size_t>(w.n_rows());
  const auto* packed = static_cast<const std::uint16_t*>(w.packed);
  for (std::size_t t = 0; t < static_cast<std::size_t>(n_tokens); ++t) {
    for (std::size_t o = 0; o < out; ++o) {
      const std::uint16_t* g = packed + (o / kRows) * kRows * in;
      float s[kSums] = {};
      for (std::size_t j = 0; j < in / 2; ++j) {
        for (std::size_t k = 0; k < 2; ++k) {
          const float xi = bf16_to_f32(f32_to_bf16(x[t * in + 2 * j + k]));
          s[j % kSums] += bf16_to_f32(g[(2 * j + k) * kRows + o % kRows]) * xi;
        }
      }
      y[t * out + o] = (s[0] + s[1]) + (s[2] + s[3]);
    }
  }
}

}  // namespace peregrine
