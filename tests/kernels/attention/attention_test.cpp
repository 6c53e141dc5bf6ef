#include "peregrine/kernels/cpu/attention/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/simd_targets.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/quantize_rtn.h"

namespace peregrine {
namespace {

struct Heads {
  std::int64_t n_heads, n_kv_heads;
};

constexpr Heads kHeadConfigs[] = {{4, 4}, {8, 2}, {6, 1}};  // MHA, GQA, MQA
constexpr std::int64_t kHeadDims[] = {8, 48, 64, 128};
// 1 and 2 threads as the CLI runs; 3 makes (KV head, chunk) items split every head layout.
constexpr int kThreadCounts[] = {1, 2, 3};

AttentionShape shape_of(const Heads& h, std::int64_t hd) { return {h.n_heads, h.n_kv_heads, hd}; }

std::int64_t kv_dim(const AttentionShape& s) { return s.n_kv_heads * s.head_dim; }

std::vector<float> random_vec(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

// Integers in [-30, 30]: every q·k dot product (|sum| < 2^24) is exact in f32 in any summation
// order, so scores reach ~1e3 (many running-max updates, near one-hot softmax) while the
// comparison still isolates the online softmax rather than dot-product rounding.
std::vector<float> integer_vec(std::size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> grid(-30, 30);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(grid(rng));
  return v;
}

float max_abs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Every output is a convex combination of V rows, so errors are measured relative to max|V|.
// f32 error of the kernels against the f64 reference: scores ~N(0, 1) carry ~sqrt(head_dim)·eps
// relative rounding from the head_dim-term dot product, the softmax sums are blocked (64-key
// tiles, then one rescaled add per tile or chunk) so n_ctx = 3000 adds ~(64 + 47)·eps in the
// worst case and ~sqrt(3000)·eps = 3e-6 typically; 1e-5·max|V| covers these with margin.
constexpr float kRelTol = 1e-5f;

void expect_rows_near(const float* out, const std::vector<float>& ref, float tol, const std::string& what) {
  for (std::size_t i = 0; i < ref.size(); ++i) {
    ASSERT_NEAR(out[i], ref[i], tol) << what << " i=" << i;
  }
}

// K/V rows [n_ctx, kv_dim] f32 stored as a paged cache would hold them: the rows converted to
// `dtype` in the blocks of a shuffled block table over a pool with spare blocks; every byte
// not holding a valid row (spare blocks, the last block's tail) is 0xFF, a NaN in every KV
// dtype (the f16 / q8_0 scale, the i8 / f8 row's f32 scale, an f8 value), so a kernel reading
// past n_ctx or through the wrong block shows up as NaN.
struct PagedKv {
  std::vector<std::uint8_t> k_pool, v_pool;
  std::vector<std::int32_t> table;
  std::int32_t block_size = 0;
  DType dtype = DType::kF32;
  std::int64_t row_bytes = 0;

  KvLayerView k() const { return {k_pool.data(), table.data(), block_size, dtype, row_bytes}; }
  KvLayerView v() const { return {v_pool.data(), table.data(), block_size, dtype, row_bytes}; }
};

PagedKv page(const std::vector<float>& k, const std::vector<float>& v, std::int64_t kv_dim,
             std::int32_t block_size, DType dtype, std::mt19937& rng) {
  const auto n_ctx = static_cast<std::int64_t>(k.size()) / kv_dim;
  const std::int64_t n_blocks = (n_ctx + block_size - 1) / block_size, n_pool = n_blocks + 3;
  PagedKv p;
  p.block_size = block_size;
  p.dtype = dtype;
  p.row_bytes = static_cast<std::int64_t>(*dtype_row_bytes(dtype, static_cast<std::uint64_t>(kv_dim)));
  p.k_pool.assign(static_cast<std::size_t>(n_pool * block_size * p.row_bytes), 0xFF);
  p.v_pool = p.k_pool;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n_pool));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  p.table.assign(ids.begin(), ids.begin() + n_blocks);
  for (std::int64_t t = 0; t < n_ctx; ++t) {
    const std::int64_t at = (p.table[static_cast<std::size_t>(t / block_size)] * block_size + t % block_size) * p.row_bytes;
    const auto row = static_cast<std::size_t>(kv_dim);
    quantize_rtn(dtype, std::span<const float>(k).subspan(static_cast<std::size_t>(t) * row, row), &p.k_pool[static_cast<std::size_t>(at)]);
    quantize_rtn(dtype, std::span<const float>(v).subspan(static_cast<std::size_t>(t) * row, row), &p.v_pool[static_cast<std::size_t>(at)]);
  }
  return p;
}

struct Inputs {
  std::vector<float> q, k, v;  // k, v: [n_ctx, kv_dim] f32 before paging
  PagedKv kv;
};

constexpr std::int32_t kContiguous = 0;  // block_size: one block holding every position

Inputs random_inputs(const AttentionShape& s, std::int64_t n_q, std::int64_t n_ctx, bool large, std::mt19937& rng,
                     std::int32_t block_size = 16, DType dtype = DType::kF32) {
  const auto nq = static_cast<std::size_t>(n_q * s.n_heads * s.head_dim);
  const auto nk = static_cast<std::size_t>(n_ctx * kv_dim(s));
  Inputs in;
  in.q = large ? integer_vec(nq, rng) : random_vec(nq, rng);
  in.k = large ? integer_vec(nk, rng) : random_vec(nk, rng);
  in.v = random_vec(nk, rng);
  in.kv = page(in.k, in.v, kv_dim(s), block_size == kContiguous ? static_cast<std::int32_t>(n_ctx) : block_size, dtype, rng);
  return in;
}

// attention_decode on one row vs the reference, for every thread count, pooled and inline.
void check_decode(const Inputs& in, std::int64_t n_ctx, const AttentionShape& s, const std::string& what) {
  std::vector<float> ref(static_cast<std::size_t>(s.n_heads * s.head_dim));
  attention_row_reference(in.q.data(), in.kv.k(), in.kv.v(), n_ctx, s, ref.data());
  const float tol = kRelTol * max_abs(in.v);
  test::for_each_simd_target([&] {
    for (int threads : kThreadCounts) {
      ThreadPool pool(threads);
      for (std::int64_t min_macs : {std::int64_t{0}, kMinParallelAttentionMacs}) {
        std::vector<float> out(ref.size(), -999.0f);
        attention_decode(in.q.data(), in.kv.k(), in.kv.v(), n_ctx, s, out.data(), pool, min_macs);
        expect_rows_near(out.data(), ref, tol, what + " threads=" + std::to_string(threads) + " min_macs=" + std::to_string(min_macs));
      }
    }
  });
}

// The depth of every row of a tree mask [n, n]: its parent is its last ancestor (rows are in
// topological order), one level up.
std::vector<std::int64_t> tree_depths(const std::vector<std::uint8_t>& mask, std::int64_t n) {
  std::vector<std::int64_t> depth(static_cast<std::size_t>(n), 0);
  for (std::int64_t i = 1; i < n; ++i) {
    std::int64_t parent = i - 1;
    while (mask[static_cast<std::size_t>(i * n + parent)] == 0) --parent;
    depth[static_cast<std::size_t>(i)] = depth[static_cast<std::size_t>(parent)] + 1;
  }
  return depth;
}

// The slots [0, p0 + i] row i of a run at p0 sees: all (mask empty: causal) or [0, p0) and the
// run slots p0 + j with mask[i * n_q + j]; with a window, only the keys whose positions lie in
// [pos_i - window + 1, pos_i], pos = p0 + row (causal) or p0 + depth (tree).
std::vector<std::uint8_t> visible_slots(std::int64_t p0, std::int64_t n_q, std::int64_t i,
                                        const std::vector<std::uint8_t>& mask, std::int64_t window) {
  std::vector<std::uint8_t> visible(static_cast<std::size_t>(p0 + i + 1), 1);
  std::vector<std::int64_t> depth(static_cast<std::size_t>(n_q));
  std::iota(depth.begin(), depth.end(), 0);
  if (!mask.empty()) {
    std::copy_n(&mask[static_cast<std::size_t>(i * n_q)], i + 1, &visible[static_cast<std::size_t>(p0)]);
    depth = tree_depths(mask, n_q);
  }
  const std::int64_t pos = p0 + depth[static_cast<std::size_t>(i)];
  for (std::int64_t t = 0; t <= p0 + i && window > 0; ++t) {
    const std::int64_t key_pos = t < p0 ? t : p0 + depth[static_cast<std::size_t>(t - p0)];
    if (pos - key_pos >= window) visible[static_cast<std::size_t>(t)] = 0;
  }
  return visible;
}

// attention_prefill of n_q rows at slots p0.. vs the reference row by row (visible_slots).
void check_prefill(const Inputs& in, std::int64_t p0, std::int64_t n_q, const AttentionShape& s, const std::string& what,
                   const std::vector<std::uint8_t>& mask = {}) {
  const std::int64_t row = s.n_heads * s.head_dim;
  std::vector<float> ref(static_cast<std::size_t>(n_q * row));
  for (std::int64_t i = 0; i < n_q; ++i) {
    const std::vector<std::uint8_t> visible = visible_slots(p0, n_q, i, mask, s.window);
    attention_row_reference(&in.q[static_cast<std::size_t>(i * row)], in.kv.k(), in.kv.v(), p0 + i + 1, s, &ref[static_cast<std::size_t>(i * row)],
                            visible.data());
  }
  const float tol = kRelTol * max_abs(in.v);
  test::for_each_simd_target([&] {
    for (int threads : kThreadCounts) {
      ThreadPool pool(threads);
      std::vector<float> out(ref.size(), -999.0f);
      attention_prefill(in.q.data(), in.kv.k(), in.kv.v(), p0, n_q, s, out.data(), pool, 0, mask.empty() ? nullptr : mask.data());
      expect_rows_near(out.data(), ref, tol, what + " threads=" + std::to_string(threads));
    }
  });
}

// Tree shapes of a draft: random parents, a star (every node a child of the root, as a
// top-k fan-out), a chain (one branch, a sequence draft).
enum class TreeShape { kRandom, kStar, kChain };

// The ancestor-or-self mask [n, n] of a token tree over n rows in topological order
// (parent[i] < i, row 0 the root), as attention_prefill takes it.
std::vector<std::uint8_t> tree_mask(std::int64_t n, TreeShape shape, std::mt19937& rng) {
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(n * n), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    if (i > 0) {
      const std::int64_t parent = shape == TreeShape::kStar    ? 0
                                  : shape == TreeShape::kChain ? i - 1
                                                               : std::uniform_int_distribution<std::int64_t>(0, i - 1)(rng);
      std::copy_n(&mask[static_cast<std::size_t>(parent * n)], parent + 1, &mask[static_cast<std::size_t>(i * n)]);
    }
    mask[static_cast<std::size_t>(i * n + i)] = 1;
  }
  return mask;
}

std::string describe(const AttentionShape& s, const char* kind, std::int64_t a, std::int64_t b, bool large,
                     const PagedKv& kv) {
  return std::string(kind) + " heads=" + std::to_string(s.n_heads) + "/" + std::to_string(s.n_kv_heads) +
         " hd=" + std::to_string(s.head_dim) + " " + std::to_string(a) + "," + std::to_string(b) + (large ? " large" : "") +
         " block=" + std::to_string(kv.block_size) + " " + std::string(dtype_name(kv.dtype));
}

// The f32 grids cycle through these block sizes (1: a run per row, gathered; 7: tiles crossing
// blocks at odd offsets, gathered; 16: runs read in place; contiguous: one block).
constexpr std::int32_t kBlockSizes[] = {16, 7, 1, kContiguous};

TEST(AttentionDecode, MatchesReferenceAcrossHeadLayoutsAndLengths) {
  std::mt19937 rng(2024);
  for (const Heads& h : kHeadConfigs) {
    for (std::int64_t hd : kHeadDims) {
      // Around the 64-key tile, and long enough for several split-K chunks.
      for (std::int64_t n_ctx : {1, 5, 63, 64, 65, 300, 3001}) {
        for (bool large : {false, true}) {
          const AttentionShape s = shape_of(h, hd);
          const std::int32_t block = kBlockSizes[static_cast<std::size_t>(n_ctx + hd + large) % 4];
          const Inputs in = random_inputs(s, 1, n_ctx, large, rng, block);
          check_decode(in, n_ctx, s, describe(s, "decode", n_ctx, 0, large, in.kv));
        }
      }
    }
  }
}

// Small KV groups (the head-rows decode kernel: head_dim in lanes) at head dims whose last
// vector is partial under AVX2 or AVX-512 (20, Phi-3's 96, 80), from one to three query heads
// per KV head.
TEST(AttentionDecode, MatchesReferenceAtHeadDimsWithPartialVectors) {
  std::mt19937 rng(96);
  for (const Heads& h : {Heads{3, 3}, Heads{4, 2}, Heads{6, 2}}) {
    for (std::int64_t hd : {20, 80, 96}) {
      for (std::int64_t n_ctx : {1, 65, 300}) {
        const AttentionShape s = shape_of(h, hd);
        const bool large = n_ctx == 65;
        const std::int32_t block = kBlockSizes[static_cast<std::size_t>(n_ctx + hd) % 4];
        const Inputs in = random_inputs(s, 1, n_ctx, large, rng, block);
        check_decode(in, n_ctx, s, describe(s, "decode", n_ctx, 0, large, in.kv));
      }
    }
  }
}

TEST(AttentionPrefill, MatchesReferenceAcrossHeadLayoutsRowsAndOffsets) {
  std::mt19937 rng(77);
  for (const Heads& h : kHeadConfigs) {
    for (std::int64_t hd : kHeadDims) {
      // n_q around and between query-tile sizes; p0 > 0 continues a cached prompt.
      for (std::int64_t n_q : {1, 2, 7, 17, 33, 70}) {
        for (std::int64_t p0 : {0, 3, 130}) {
          const bool large = (n_q + p0) % 2 == 1;
          const AttentionShape s = shape_of(h, hd);
          const std::int32_t block = kBlockSizes[static_cast<std::size_t>(n_q + p0 + hd / 8) % 4];
          const Inputs in = random_inputs(s, n_q, p0 + n_q, large, rng, block);
          check_prefill(in, p0, n_q, s, describe(s, "prefill", n_q, p0, large, in.kv));
        }
      }
    }
  }
}

TEST(AttentionPrefill, LongPromptWithManyQueryAndKvTiles) {
  std::mt19937 rng(31);
  const AttentionShape s = shape_of({8, 2}, 64);
  const Inputs in = random_inputs(s, 301, 1000 + 301, false, rng);
  check_prefill(in, 1000, 301, s, "long");
}

TEST(AttentionPaged, F16AndQ8_0MatchTheReferenceOnTheSameStoredValues) {
  // The reference widens the same stored f16 / q8_0 rows, so the f32-accumulation tolerance
  // holds. Head dims 64 (q8_0 heads on block boundaries) and 8 / 48 (q8_0 whole-row path).
  std::mt19937 rng(404);
  for (DType dtype : {DType::kF16, DType::kQ8_0}) {
    for (const Heads& h : {Heads{8, 2}, Heads{4, 4}}) {
      for (std::int64_t hd : {8, 48, 64}) {
        const AttentionShape s = shape_of(h, hd);
        if (dtype == DType::kQ8_0 && kv_dim(s) % 32 != 0) continue;
        for (std::int32_t block : {1, 7, 16}) {
          for (std::int64_t n_ctx : {5, 300}) {
            const Inputs in = random_inputs(s, 1, n_ctx, false, rng, block, dtype);
            check_decode(in, n_ctx, s, describe(s, "decode", n_ctx, 0, false, in.kv));
          }
          const Inputs in = random_inputs(s, 33, 130 + 33, dtype == DType::kF16, rng, block, dtype);
          check_prefill(in, 130, 33, s, describe(s, "prefill", 33, 130, dtype == DType::kF16, in.kv));
        }
      }
    }
  }
}

// The per-token scaled KV dtypes: one f32 scale per row, then one byte per value.
constexpr DType kRowScaledKvTypes[] = {DType::kI8, DType::kF8E4M3, DType::kF8E5M2};

TEST(AttentionPaged, I8AndFp8MatchTheReferenceOnTheSameStoredValues) {
  // Per-token i8 / f8 rows: each head's bytes sit at 4 + kv_head · head_dim behind the row's
  // scale. Head dims 8 and 48 (tails shorter than a vector on wide targets), 20 (a scalar
  // tail on every target) and 64; every head layout; blocks of 1, 7, 16. Normal inputs only:
  // the "large" integer grid is exact in f32 / f16 but not once rounded to 8 bits, and its
  // ~1e3 scores would then amplify the (legitimately different) summation orders.
  std::mt19937 rng(606);
  for (DType dtype : kRowScaledKvTypes) {
    for (const Heads& h : kHeadConfigs) {
      for (std::int64_t hd : {8, 20, 48, 64}) {
        const AttentionShape s = shape_of(h, hd);
        for (std::int32_t block : {1, 7, 16}) {
          for (std::int64_t n_ctx : {5, 300}) {
            const Inputs in = random_inputs(s, 1, n_ctx, false, rng, block, dtype);
            check_decode(in, n_ctx, s, describe(s, "decode", n_ctx, 0, false, in.kv));
          }
          const Inputs in = random_inputs(s, 33, 130 + 33, false, rng, block, dtype);
          check_prefill(in, 130, 33, s, describe(s, "prefill", 33, 130, false, in.kv));
        }
      }
    }
  }
}

TEST(AttentionPaged, LongDecodeSplitsAcrossShuffledBlocks) {
  // Split-K chunks of whole 64-key tiles over 16-row blocks in shuffled order, every dtype.
  std::mt19937 rng(8);
  const AttentionShape s = shape_of({32, 4}, 64);  // TinyLlama's attention
  for (DType dtype : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kI8, DType::kF8E4M3, DType::kF8E5M2}) {
    const Inputs in = random_inputs(s, 1, 2049, false, rng, 16, dtype);
    check_decode(in, 2049, s, describe(s, "decode", 2049, 0, false, in.kv));
  }
}

TEST(AttentionPrefill, IgnoresKvPastTheRun) {
  // Rows past p0 + n_q - 1 (e.g. positions reserved but not yet valid) must not be read.
  std::mt19937 rng(3);
  const AttentionShape s = shape_of({8, 2}, 16);
  for (std::int32_t block : {16, 7, 1}) {
    Inputs in = random_inputs(s, 20, 60, false, rng, block);
    std::vector<float> a(static_cast<std::size_t>(20 * 8 * 16)), b(a.size());
    ThreadPool pool(2);
    attention_prefill(in.q.data(), in.kv.k(), in.kv.v(), 10, 20, s, a.data(), pool, 0);
    std::fill(in.k.begin() + 30 * kv_dim(s), in.k.end(), NAN);
    std::fill(in.v.begin() + 30 * kv_dim(s), in.v.end(), NAN);
    in.kv = page(in.k, in.v, kv_dim(s), block, DType::kF32, rng);
    attention_prefill(in.q.data(), in.kv.k(), in.kv.v(), 10, 20, s, b.data(), pool, 0);
    EXPECT_EQ(a, b) << "block " << block;
  }
}

TEST(AttentionPrefill, TreeMaskMatchesReference) {
  // Token-tree runs (random, star, chain trees) of odd sizes around the query-tile sizes, at
  // slots crossing KV tiles and blocks, every head layout, f32 K/V.
  std::mt19937 rng(91);
  for (const Heads& h : kHeadConfigs) {
    for (std::int64_t hd : {8, 48, 64}) {
      for (std::int64_t n_q : {2, 5, 17, 33, 70}) {
        for (std::int64_t p0 : {0, 3, 130}) {
          const bool large = (n_q + p0) % 2 == 0;
          const auto shape = static_cast<TreeShape>((n_q + p0 + hd) % 3);
          const AttentionShape s = shape_of(h, hd);
          const std::int32_t block = kBlockSizes[static_cast<std::size_t>(n_q + p0 + hd / 8) % 4];
          const Inputs in = random_inputs(s, n_q, p0 + n_q, large, rng, block);
          check_prefill(in, p0, n_q, s, describe(s, "tree", n_q, p0, large, in.kv) + " shape=" + std::to_string(static_cast<int>(shape)),
                        tree_mask(n_q, shape, rng));
        }
      }
    }
  }
}

TEST(AttentionPaged, TreeMaskOverQuantizedKvMatchesReference) {
  std::mt19937 rng(505);
  for (DType dtype : {DType::kF16, DType::kQ8_0, DType::kI8, DType::kF8E4M3}) {
    for (std::int64_t hd : {8, 64}) {
      const AttentionShape s = shape_of({8, 2}, hd);
      if (dtype == DType::kQ8_0 && kv_dim(s) % 32 != 0) continue;
      for (std::int32_t block : {1, 7, 16}) {
        for (std::int64_t p0 : {0, 61}) {
          const Inputs in = random_inputs(s, 23, p0 + 23, false, rng, block, dtype);
          check_prefill(in, p0, 23, s, describe(s, "tree", 23, p0, false, in.kv), tree_mask(23, TreeShape::kRandom, rng));
        }
      }
    }
  }
}

TEST(AttentionPrefill, CausalMaskGivesTheUnmaskedResultExactly) {
  // A chain's mask is the causal one: the masked path sets the same scores to -inf, so the
  // output is bitwise that of mask == nullptr.
  std::mt19937 rng(17);
  const AttentionShape s = shape_of({8, 2}, 48);
  for (std::int64_t p0 : {0, 40}) {
    const Inputs in = random_inputs(s, 37, p0 + 37, false, rng, 7);
    const auto chain = tree_mask(37, TreeShape::kChain, rng);
    test::for_each_simd_target([&] {
      for (int threads : kThreadCounts) {
        ThreadPool pool(threads);
        std::vector<float> causal(static_cast<std::size_t>(37 * 8 * 48)), masked(causal.size());
        attention_prefill(in.q.data(), in.kv.k(), in.kv.v(), p0, 37, s, causal.data(), pool, 0);
        attention_prefill(in.q.data(), in.kv.k(), in.kv.v(), p0, 37, s, masked.data(), pool, 0, chain.data());
        EXPECT_EQ(causal, masked) << "p0=" << p0 << " threads=" << threads;
      }
    });
  }
}

TEST(AttentionDecode, RisingScoresRescaleTheRunningSum) {
  // Score of position t grows with t (k_t = c*(t+1)*q), so the running max changes at every
  // step and the accumulator is rescaled every time; the steps are small enough that many
  // positions keep non-negligible weight.
  std::mt19937 rng(7);
  const std::int64_t hd = 16, n_ctx = 300;
  const AttentionShape s{2, 1, hd};
  Inputs in;
  in.q = random_vec(static_cast<std::size_t>(2 * hd), rng);
  for (std::int64_t d = 0; d < hd; ++d) in.q[static_cast<std::size_t>(hd + d)] = -in.q[static_cast<std::size_t>(d)];
  double qq = 0.0;
  for (std::int64_t d = 0; d < hd; ++d) qq += in.q[static_cast<std::size_t>(d)] * in.q[static_cast<std::size_t>(d)];
  in.k.resize(static_cast<std::size_t>(n_ctx * hd));
  for (std::int64_t t = 0; t < n_ctx; ++t) {
    const double c = 0.02 * (t + 1) * std::sqrt(static_cast<double>(hd)) / qq;  // score = 0.02*(t+1)
    for (std::int64_t d = 0; d < hd; ++d) in.k[static_cast<std::size_t>(t * hd + d)] = static_cast<float>(c * in.q[static_cast<std::size_t>(d)]);
  }
  in.v = random_vec(static_cast<std::size_t>(n_ctx * hd), rng);
  in.kv = page(in.k, in.v, hd, 16, DType::kF32, rng);
  // Head 0 sees rising scores, head 1 (negated q) falling ones: both orders are covered.
  check_decode(in, n_ctx, s, "rising");

  // Scores that jump to ~1e4 after a long flat stretch: earlier mass must vanish, not NaN.
  for (std::int64_t d = 0; d < hd; ++d) {
    in.k[static_cast<std::size_t>((n_ctx - 1) * hd + d)] = static_cast<float>(1e4 * std::sqrt(static_cast<double>(hd)) / qq * in.q[static_cast<std::size_t>(d)]);
  }
  in.kv = page(in.k, in.v, hd, 16, DType::kF32, rng);
  for (int threads : kThreadCounts) {
    ThreadPool pool(threads);
    std::vector<float> out(static_cast<std::size_t>(2 * hd));
    attention_decode(in.q.data(), in.kv.k(), in.kv.v(), n_ctx, s, out.data(), pool, 0);
    for (std::int64_t d = 0; d < hd; ++d) {
      EXPECT_NEAR(out[static_cast<std::size_t>(d)], in.v[static_cast<std::size_t>((n_ctx - 1) * hd + d)], 1e-6f);
    }
    for (float x : out) EXPECT_TRUE(std::isfinite(x));
  }
}

TEST(AttentionDecode, SinglePositionReturnsItsValue) {
  std::mt19937 rng(11);
  const AttentionShape s{8, 2, 16};
  const auto q = integer_vec(8 * 16, rng);
  const auto k = integer_vec(32, rng);
  const auto v = random_vec(32, rng);
  const PagedKv kv = page(k, v, 32, 16, DType::kF32, rng);
  std::vector<float> out(8 * 16);
  ThreadPool pool(1);
  attention_decode(q.data(), kv.k(), kv.v(), 1, s, out.data(), pool);
  for (std::int64_t h = 0; h < 8; ++h) {
    for (std::int64_t d = 0; d < 16; ++d) {
      EXPECT_FLOAT_EQ(out[static_cast<std::size_t>(h * 16 + d)], v[static_cast<std::size_t>((h / 4) * 16 + d)]);
    }
  }
}

TEST(AttentionDecode, SinglePositionWidensEveryI8AndFp8Byte) {
  // One position: the output is the V row itself, so a V row holding all 256 byte values
  // (scale 1) checks the kernels' i8 / f8 decoding exhaustively on every SIMD target against
  // quant/dequantize: FP8 subnormals, the largest finite values, E5M2's infinities and every
  // NaN encoding included.
  const std::int64_t hd = 256;
  const AttentionShape s{2, 1, hd};
  const std::vector<float> q(2 * hd, 0.5f);
  for (DType dtype : kRowScaledKvTypes) {
    std::vector<std::uint8_t> k_row(4 + hd, 0), v_row(4 + hd);
    const float one = 1.0f;
    std::memcpy(k_row.data(), &one, 4);
    std::memcpy(v_row.data(), &one, 4);
    for (int b = 0; b < 256; ++b) v_row[static_cast<std::size_t>(4 + b)] = static_cast<std::uint8_t>(b);
    const std::int32_t table[] = {0};
    const KvLayerView k{k_row.data(), table, 1, dtype, 4 + hd}, v{v_row.data(), table, 1, dtype, 4 + hd};
    std::vector<float> want(hd);
    dequantize(dtype, v_row.data(), want);
    test::for_each_simd_target([&] {
      std::vector<float> out(2 * hd, -999.0f);
      ThreadPool pool(1);
      attention_decode(q.data(), k, v, 1, s, out.data(), pool);
      for (std::int64_t h = 0; h < 2; ++h) {
        for (std::int64_t b = 0; b < hd; ++b) {
          const float got = out[static_cast<std::size_t>(h * hd + b)], ref = want[static_cast<std::size_t>(b)];
          if (std::isnan(ref)) {
            ASSERT_TRUE(std::isnan(got)) << dtype_name(dtype) << " byte " << b;
          } else {
            ASSERT_EQ(got, ref) << dtype_name(dtype) << " byte " << b;
          }
        }
      }
    });
  }
}

TEST(AttentionDecode, GroupedHeadsEqualMhaWithReplicatedKv) {
  // Query head h reads KV head h / (n_heads / n_kv_heads): contiguous groups share a KV head.
  std::mt19937 rng(5);
  const std::int64_t n_heads = 8, n_kv = 2, hd = 16, n_ctx = 33;
  const auto q = random_vec(static_cast<std::size_t>(n_heads * hd), rng);
  const auto k = random_vec(static_cast<std::size_t>(n_ctx * n_kv * hd), rng);
  const auto v = random_vec(static_cast<std::size_t>(n_ctx * n_kv * hd), rng);
  std::vector<float> k_full(static_cast<std::size_t>(n_ctx * n_heads * hd)), v_full(k_full.size());
  for (std::int64_t t = 0; t < n_ctx; ++t) {
    for (std::int64_t h = 0; h < n_heads; ++h) {
      for (std::int64_t d = 0; d < hd; ++d) {
        const auto dst = static_cast<std::size_t>((t * n_heads + h) * hd + d);
        const auto src = static_cast<std::size_t>((t * n_kv + h / (n_heads / n_kv)) * hd + d);
        k_full[dst] = k[src];
        v_full[dst] = v[src];
      }
    }
  }
  std::vector<float> gqa(static_cast<std::size_t>(n_heads * hd)), mha(gqa.size());
  ThreadPool pool(2);
  const PagedKv grouped = page(k, v, n_kv * hd, 7, DType::kF32, rng), full = page(k_full, v_full, n_heads * hd, 7, DType::kF32, rng);
  attention_decode(q.data(), grouped.k(), grouped.v(), n_ctx, {n_heads, n_kv, hd}, gqa.data(), pool, 0);
  attention_row_reference(q.data(), full.k(), full.v(), n_ctx, {n_heads, n_heads, hd}, mha.data());
  for (std::size_t i = 0; i < gqa.size(); ++i) EXPECT_NEAR(gqa[i], mha[i], 1e-5f) << i;
}

TEST(AttentionDecode, UniformScoresAverageValues) {
  // q = 0 → all scores equal → output is the mean of V over the visible positions.
  const std::int64_t hd = 8, n_ctx = 7;
  const AttentionShape s{1, 1, hd};
  std::vector<float> q(hd, 0.0f), k(n_ctx * hd, 1.0f), v(n_ctx * hd);
  for (std::int64_t t = 0; t < n_ctx; ++t)
    for (std::int64_t d = 0; d < hd; ++d) v[static_cast<std::size_t>(t * hd + d)] = static_cast<float>(t * 10 + d);
  std::mt19937 rng(1);
  const PagedKv kv = page(k, v, hd, 2, DType::kF32, rng);
  std::vector<float> out(hd);
  ThreadPool pool(1);
  attention_decode(q.data(), kv.k(), kv.v(), n_ctx, s, out.data(), pool);
  for (std::int64_t d = 0; d < hd; ++d) EXPECT_NEAR(out[static_cast<std::size_t>(d)], 30.0f + static_cast<float>(d), 1e-5f);
}

AttentionShape windowed(AttentionShape s, std::int64_t window, float softcap = 0.0f, float scale = 0.0f) {
  s.window = window;
  s.softcap = softcap;
  s.scale = scale;
  return s;
}

TEST(AttentionWindow, DecodeMatchesReference) {
  // Windows of 1 (the row alone), under / across / over a 64-key tile, and past n_ctx (full);
  // contexts long enough for split-K chunks of the window.
  std::mt19937 rng(4096);
  for (const Heads& h : kHeadConfigs) {
    for (std::int64_t hd : {8, 64}) {
      for (std::int64_t n_ctx : {1, 63, 300, 3001}) {
        for (std::int64_t window : {1, 5, 64, 100, 2000, 4000}) {
          const AttentionShape s = windowed(shape_of(h, hd), window);
          const std::int32_t block = kBlockSizes[static_cast<std::size_t>(n_ctx + window) % 4];
          const Inputs in = random_inputs(s, 1, n_ctx, false, rng, block);
          check_decode(in, n_ctx, s, describe(s, "decode", n_ctx, window, false, in.kv));
        }
      }
    }
  }
}

TEST(AttentionWindow, PrefillMatchesReference) {
  // Query blocks whose rows see different first slots, windows shorter than a block of rows,
  // prompts continuing a cache longer than the window.
  std::mt19937 rng(4097);
  for (const Heads& h : kHeadConfigs) {
    for (std::int64_t hd : {8, 48, 64}) {
      for (std::int64_t n_q : {1, 17, 70, 200}) {
        for (std::int64_t p0 : {0, 3, 130}) {
          for (std::int64_t window : {1, 7, 64, 100}) {
            const bool large = (n_q + p0 + window) % 2 == 1;
            const AttentionShape s = windowed(shape_of(h, hd), window);
            const std::int32_t block = kBlockSizes[static_cast<std::size_t>(n_q + p0 + window) % 4];
            const Inputs in = random_inputs(s, n_q, p0 + n_q, large, rng, block);
            check_prefill(in, p0, n_q, s, describe(s, "prefill", n_q, p0, large, in.kv) + " window=" + std::to_string(window));
          }
        }
      }
    }
  }
}

TEST(AttentionWindow, TreeMaskMatchesReference) {
  // Tree rows see the cached slots within the window of their depth's position and their
  // ancestors less than `window` positions up; deep chains and wide stars, windows shorter
  // than the tree.
  std::mt19937 rng(4098);
  for (const Heads& h : kHeadConfigs) {
    for (std::int64_t n_q : {5, 33, 70}) {
      for (std::int64_t p0 : {0, 130}) {
        for (std::int64_t window : {1, 4, 40}) {
          const auto shape = static_cast<TreeShape>((n_q + p0 + window) % 3);
          const AttentionShape s = windowed(shape_of(h, 48), window);
          const std::int32_t block = kBlockSizes[static_cast<std::size_t>(n_q + window) % 4];
          const Inputs in = random_inputs(s, n_q, p0 + n_q, false, rng, block);
          check_prefill(in, p0, n_q, s,
                        describe(s, "tree", n_q, p0, false, in.kv) + " window=" + std::to_string(window) + " shape=" +
                            std::to_string(static_cast<int>(shape)),
                        tree_mask(n_q, shape, rng));
        }
      }
    }
  }
}

TEST(AttentionWindow, QuantizedKvMatchesReference) {
  std::mt19937 rng(4099);
  const AttentionShape s = windowed(shape_of({8, 2}, 64), 50);
  for (DType dtype : {DType::kF16, DType::kQ8_0, DType::kI8, DType::kF8E4M3}) {
    const Inputs dec = random_inputs(s, 1, 300, false, rng, 16, dtype);
    check_decode(dec, 300, s, describe(s, "decode", 300, 50, false, dec.kv));
    const Inputs pre = random_inputs(s, 33, 130 + 33, false, rng, 7, dtype);
    check_prefill(pre, 130, 33, s, describe(s, "prefill", 33, 130, false, pre.kv));
  }
}

TEST(AttentionWindow, KeysBelowTheWindowAreNotRead) {
  // K/V rows no query sees are NaN: a kernel that read them (masking the scores afterwards)
  // would carry the NaN of V into the output through p · V = 0 · NaN.
  std::mt19937 rng(4100);
  const AttentionShape s = windowed(shape_of({8, 2}, 16), 40);
  const std::int64_t p0 = 500, n_q = 30, lo = p0 - 40 + 1;  // row 0's first slot
  for (std::int32_t block : {16, 7, 1}) {
    Inputs in = random_inputs(s, n_q, p0 + n_q, false, rng, block);
    std::vector<float> clean(static_cast<std::size_t>(n_q * 8 * 16)), poisoned(clean.size());
    std::vector<float> dec_clean(static_cast<std::size_t>(8 * 16)), dec_poisoned(dec_clean.size());
    ThreadPool pool(2);
    attention_prefill(in.q.data(), in.kv.k(), in.kv.v(), p0, n_q, s, clean.data(), pool, 0);
    attention_decode(in.q.data(), in.kv.k(), in.kv.v(), p0 + n_q, s, dec_clean.data(), pool, 0);
    std::fill(in.k.begin(), in.k.begin() + lo * kv_dim(s), NAN);
    std::fill(in.v.begin(), in.v.begin() + lo * kv_dim(s), NAN);
    in.kv = page(in.k, in.v, kv_dim(s), block, DType::kF32, rng);
    attention_prefill(in.q.data(), in.kv.k(), in.kv.v(), p0, n_q, s, poisoned.data(), pool, 0);
    attention_decode(in.q.data(), in.kv.k(), in.kv.v(), p0 + n_q, s, dec_poisoned.data(), pool, 0);
    EXPECT_EQ(clean, poisoned) << "block " << block;
    EXPECT_EQ(dec_clean, dec_poisoned) << "block " << block;
  }
}

TEST(AttentionWindow, WindowPastTheContextIsFullAttentionExactly) {
  std::mt19937 rng(4101);
  const AttentionShape full = shape_of({8, 2}, 48), wide = windowed(full, 1000);
  const Inputs in = random_inputs(full, 37, 40 + 37, false, rng, 16);
  ThreadPool pool(2);
  std::vector<float> a(static_cast<std::size_t>(37 * 8 * 48)), b(a.size());
  attention_prefill(in.q.data(), in.kv.k(), in.kv.v(), 40, 37, full, a.data(), pool, 0);
  attention_prefill(in.q.data(), in.kv.k(), in.kv.v(), 40, 37, wide, b.data(), pool, 0);
  EXPECT_EQ(a, b);
}

TEST(AttentionSoftcap, DecodePrefillAndTreeMatchReference) {
  // Gemma 2's soft-capped scores with its own scale (query_pre_attn_scalar^-0.5), caps that
  // bite (scores of a few units against caps of 1.5 and 50 for the integer grid), with and
  // without a window.
  std::mt19937 rng(5050);
  for (const Heads& h : kHeadConfigs) {
    for (bool large : {false, true}) {
      const float cap = large ? 50.0f : 1.5f;
      for (std::int64_t window : {0, 20}) {
        const AttentionShape s = windowed(shape_of(h, 64), window, cap, large ? 0.01f : 0.3f);
        const Inputs dec = random_inputs(s, 1, 300, large, rng, 16);
        check_decode(dec, 300, s, describe(s, "softcap decode", 300, window, large, dec.kv));
        const Inputs pre = random_inputs(s, 33, 70 + 33, large, rng, 7);
        check_prefill(pre, 70, 33, s, describe(s, "softcap prefill", 33, window, large, pre.kv));
        const Inputs tree = random_inputs(s, 17, 70 + 17, large, rng, 16);
        check_prefill(tree, 70, 17, s, describe(s, "softcap tree", 17, window, large, tree.kv), tree_mask(17, TreeShape::kRandom, rng));
      }
    }
  }
}

TEST(AttentionSoftcap, ReferenceCapsEveryScore) {
  // Two keys whose raw scores differ by 1000: without a cap the output is the second V row;
  // capped at 2 the scores are 2·tanh(·) within [-2, 2], so both rows keep weight.
  const std::int64_t hd = 4;
  const std::vector<float> q = {1, 0, 0, 0}, k = {0, 0, 0, 0, 1000, 0, 0, 0}, v = {1, 1, 1, 1, 3, 3, 3, 3};
  std::mt19937 rng(1);
  const PagedKv kv = page(k, v, hd, 16, DType::kF32, rng);
  AttentionShape s{1, 1, hd};
  s.scale = 1.0f;
  s.softcap = 2.0f;
  std::vector<float> out(hd);
  attention_row_reference(q.data(), kv.k(), kv.v(), 2, s, out.data());
  const double w = 1.0 / (1.0 + std::exp(2.0 * std::tanh(500.0)));  // weight of the first row
  EXPECT_NEAR(out[0], w * 1 + (1 - w) * 3, 1e-6);
}

}  // namespace
}  // namespace peregrine
