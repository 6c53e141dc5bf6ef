#include "peregrine/kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/simd_targets.h"

namespace peregrine {
namespace {

struct Heads {
  std::int64_t n_heads, n_kv_heads;
};

constexpr Heads kHeadConfigs[] = {{4, 4}, {8, 2}, {6, 1}};  // MHA, GQA, MQA
constexpr std::int64_t kHeadDims[] = {8, 48, 64, 128};
// 1 and 2 threads as the CLI runs; 3 makes (KV head, chunk) items split every head layout.
constexpr int kThreadCounts[] = {1, 2, 3};

AttentionShape shape_of(const Heads& h, std::int64_t hd) { return {h.n_heads, h.n_kv_heads, hd, h.n_kv_heads * hd}; }

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

struct Inputs {
  std::vector<float> q, k, v;
};

Inputs random_inputs(const AttentionShape& s, std::int64_t n_q, std::int64_t n_ctx, bool large, std::mt19937& rng) {
  const auto nq = static_cast<std::size_t>(n_q * s.n_heads * s.head_dim);
  const auto nk = static_cast<std::size_t>(n_ctx * s.kv_stride);
  Inputs in;
  in.q = large ? integer_vec(nq, rng) : random_vec(nq, rng);
  in.k = large ? integer_vec(nk, rng) : random_vec(nk, rng);
  in.v = random_vec(nk, rng);
  return in;
}

// attention_decode on one row vs the reference, for every thread count, pooled and inline.
void check_decode(const Inputs& in, std::int64_t n_ctx, const AttentionShape& s, const std::string& what) {
  std::vector<float> ref(static_cast<std::size_t>(s.n_heads * s.head_dim));
  attention_row_reference(in.q.data(), in.k.data(), in.v.data(), n_ctx, s, ref.data());
  const float tol = kRelTol * max_abs(in.v);
  test::for_each_simd_target([&] {
    for (int threads : kThreadCounts) {
      ThreadPool pool(threads);
      for (std::int64_t min_macs : {std::int64_t{0}, kMinParallelAttentionMacs}) {
        std::vector<float> out(ref.size(), -999.0f);
        attention_decode(in.q.data(), in.k.data(), in.v.data(), n_ctx, s, out.data(), pool, min_macs);
        expect_rows_near(out.data(), ref, tol, what + " threads=" + std::to_string(threads) + " min_macs=" + std::to_string(min_macs));
      }
    }
  });
}

// attention_prefill of n_q rows at p0.. vs the reference row by row (row i sees p0 + i + 1).
void check_prefill(const Inputs& in, std::int64_t p0, std::int64_t n_q, const AttentionShape& s, const std::string& what) {
  const std::int64_t row = s.n_heads * s.head_dim;
  std::vector<float> ref(static_cast<std::size_t>(n_q * row));
  for (std::int64_t i = 0; i < n_q; ++i) {
    attention_row_reference(&in.q[static_cast<std::size_t>(i * row)], in.k.data(), in.v.data(), p0 + i + 1, s, &ref[static_cast<std::size_t>(i * row)]);
  }
  const float tol = kRelTol * max_abs(in.v);
  test::for_each_simd_target([&] {
    for (int threads : kThreadCounts) {
      ThreadPool pool(threads);
      std::vector<float> out(ref.size(), -999.0f);
      attention_prefill(in.q.data(), in.k.data(), in.v.data(), p0, n_q, s, out.data(), pool, 0);
      expect_rows_near(out.data(), ref, tol, what + " threads=" + std::to_string(threads));
    }
  });
}

std::string describe(const AttentionShape& s, const char* kind, std::int64_t a, std::int64_t b, bool large) {
  return std::string(kind) + " heads=" + std::to_string(s.n_heads) + "/" + std::to_string(s.n_kv_heads) +
         " hd=" + std::to_string(s.head_dim) + " " + std::to_string(a) + "," + std::to_string(b) + (large ? " large" : "");
}

TEST(AttentionDecode, MatchesReferenceAcrossHeadLayoutsAndLengths) {
  std::mt19937 rng(2024);
  for (const Heads& h : kHeadConfigs) {
    for (std::int64_t hd : kHeadDims) {
      // Around the 64-key tile, and long enough for several split-K chunks.
      for (std::int64_t n_ctx : {1, 5, 63, 64, 65, 300, 3001}) {
        for (bool large : {false, true}) {
          const AttentionShape s = shape_of(h, hd);
          const Inputs in = random_inputs(s, 1, n_ctx, large, rng);
          check_decode(in, n_ctx, s, describe(s, "decode", n_ctx, 0, large));
        }
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
          const Inputs in = random_inputs(s, n_q, p0 + n_q, large, rng);
          check_prefill(in, p0, n_q, s, describe(s, "prefill", n_q, p0, large));
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

TEST(AttentionPrefill, IgnoresKvPastTheRun) {
  // Rows past p0 + n_q - 1 (e.g. a longer cache slab) must not be read.
  std::mt19937 rng(3);
  const AttentionShape s = shape_of({8, 2}, 16);
  Inputs in = random_inputs(s, 20, 60, false, rng);
  std::vector<float> a(static_cast<std::size_t>(20 * 8 * 16)), b(a.size());
  ThreadPool pool(2);
  attention_prefill(in.q.data(), in.k.data(), in.v.data(), 10, 20, s, a.data(), pool, 0);
  std::fill(in.k.begin() + 30 * s.kv_stride, in.k.end(), NAN);
  std::fill(in.v.begin() + 30 * s.kv_stride, in.v.end(), NAN);
  attention_prefill(in.q.data(), in.k.data(), in.v.data(), 10, 20, s, b.data(), pool, 0);
  EXPECT_EQ(a, b);
}

TEST(AttentionDecode, RisingScoresRescaleTheRunningSum) {
  // Score of position t grows with t (k_t = c*(t+1)*q), so the running max changes at every
  // step and the accumulator is rescaled every time; the steps are small enough that many
  // positions keep non-negligible weight.
  std::mt19937 rng(7);
  const std::int64_t hd = 16, n_ctx = 300;
  const AttentionShape s{2, 1, hd, hd};
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
  // Head 0 sees rising scores, head 1 (negated q) falling ones: both orders are covered.
  check_decode(in, n_ctx, s, "rising");

  // Scores that jump to ~1e4 after a long flat stretch: earlier mass must vanish, not NaN.
  for (std::int64_t d = 0; d < hd; ++d) {
    in.k[static_cast<std::size_t>((n_ctx - 1) * hd + d)] = static_cast<float>(1e4 * std::sqrt(static_cast<double>(hd)) / qq * in.q[static_cast<std::size_t>(d)]);
  }
  for (int threads : kThreadCounts) {
    ThreadPool pool(threads);
    std::vector<float> out(static_cast<std::size_t>(2 * hd));
    attention_decode(in.q.data(), in.k.data(), in.v.data(), n_ctx, s, out.data(), pool, 0);
    for (std::int64_t d = 0; d < hd; ++d) {
      EXPECT_NEAR(out[static_cast<std::size_t>(d)], in.v[static_cast<std::size_t>((n_ctx - 1) * hd + d)], 1e-6f);
    }
    for (float x : out) EXPECT_TRUE(std::isfinite(x));
  }
}

TEST(AttentionDecode, SinglePositionReturnsItsValue) {
  std::mt19937 rng(11);
  const AttentionShape s{8, 2, 16, 32};
  const auto q = integer_vec(8 * 16, rng);
  const auto k = integer_vec(32, rng);
  const auto v = random_vec(32, rng);
  std::vector<float> out(8 * 16);
  ThreadPool pool(1);
  attention_decode(q.data(), k.data(), v.data(), 1, s, out.data(), pool);
  for (std::int64_t h = 0; h < 8; ++h) {
    for (std::int64_t d = 0; d < 16; ++d) {
      EXPECT_FLOAT_EQ(out[static_cast<std::size_t>(h * 16 + d)], v[static_cast<std::size_t>((h / 4) * 16 + d)]);
    }
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
  attention_decode(q.data(), k.data(), v.data(), n_ctx, {n_heads, n_kv, hd, n_kv * hd}, gqa.data(), pool, 0);
  attention_row_reference(q.data(), k_full.data(), v_full.data(), n_ctx, {n_heads, n_heads, hd, n_heads * hd}, mha.data());
  for (std::size_t i = 0; i < gqa.size(); ++i) EXPECT_NEAR(gqa[i], mha[i], 1e-5f) << i;
}

TEST(AttentionDecode, UniformScoresAverageValues) {
  // q = 0 → all scores equal → output is the mean of V over the visible positions.
  const std::int64_t hd = 8, n_ctx = 7;
  const AttentionShape s{1, 1, hd, hd};
  std::vector<float> q(hd, 0.0f), k(n_ctx * hd, 1.0f), v(n_ctx * hd);
  for (std::int64_t t = 0; t < n_ctx; ++t)
    for (std::int64_t d = 0; d < hd; ++d) v[static_cast<std::size_t>(t * hd + d)] = static_cast<float>(t * 10 + d);
  std::vector<float> out(hd);
  ThreadPool pool(1);
  attention_decode(q.data(), k.data(), v.data(), n_ctx, s, out.data(), pool);
  for (std::int64_t d = 0; d < hd; ++d) EXPECT_NEAR(out[static_cast<std::size_t>(d)], 30.0f + static_cast<float>(d), 1e-5f);
}

TEST(Attention, PaddedKvStrideIsIgnored) {
  // kv_stride larger than n_kv_heads*head_dim (rows of a wider cache): padding is never read.
  std::mt19937 rng(9);
  const AttentionShape s{4, 2, 8, 2 * 8 + 5};
  const std::int64_t n_ctx = 170;
  Inputs in = random_inputs(s, 4, n_ctx, false, rng);
  check_decode(in, n_ctx, s, "padded decode");
  check_prefill(in, n_ctx - 4, 4, s, "padded prefill");
  ThreadPool pool(2);
  std::vector<float> a(static_cast<std::size_t>(4 * 32)), b(a.size()), c(a.size()), d(a.size());
  attention_decode(in.q.data(), in.k.data(), in.v.data(), n_ctx, s, a.data(), pool, 0);
  attention_prefill(in.q.data(), in.k.data(), in.v.data(), n_ctx - 4, 4, s, c.data(), pool, 0);
  for (std::int64_t t = 0; t < n_ctx; ++t) {
    for (std::int64_t p = 16; p < s.kv_stride; ++p) {
      in.k[static_cast<std::size_t>(t * s.kv_stride + p)] = NAN;
      in.v[static_cast<std::size_t>(t * s.kv_stride + p)] = NAN;
    }
  }
  attention_decode(in.q.data(), in.k.data(), in.v.data(), n_ctx, s, b.data(), pool, 0);
  attention_prefill(in.q.data(), in.k.data(), in.v.data(), n_ctx - 4, 4, s, d.data(), pool, 0);
  EXPECT_EQ(a, b);
  EXPECT_EQ(c, d);
}

}  // namespace
}  // namespace peregrine
