#include "peregrine/kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace peregrine {
namespace {

struct Heads {
  std::int64_t n_heads, n_kv_heads;
  const char* name;
};

constexpr Heads kHeadConfigs[] = {{4, 4, "MHA"}, {8, 2, "GQA"}, {8, 1, "MQA"}};

std::vector<float> random_vec(std::size_t n, float scale, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = scale * normal(rng);
  return v;
}

// Integers in [-30, 30]: "inputs scaled by 30" on an integer grid, so every q·k dot product
// (|sum| < 2^24) is exact in f32 in any summation order. Real-valued inputs of that size give
// scores ~1e3 whose f32 rounding alone (ulp 6e-5) moves the output by ~1e-4 relative, which
// says nothing about the online softmax; the grid isolates the running max/sum rescaling.
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

// Compares attention_row with its reference twin; the output is a convex combination of V
// rows, so the tolerance is relative to max|V|.
void expect_matches_reference(const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, std::int64_t n_ctx,
                              const AttentionShape& s, const char* what) {
  std::vector<float> out(static_cast<std::size_t>(s.n_heads * s.head_dim), -999.0f);
  std::vector<float> ref(out.size());
  attention_row(q.data(), k.data(), v.data(), n_ctx, s, out.data());
  attention_row_reference(q.data(), k.data(), v.data(), n_ctx, s, ref.data());
  const float tol = 1e-5f * max_abs(v);
  for (std::size_t i = 0; i < out.size(); ++i) {
    ASSERT_NEAR(out[i], ref[i], tol) << what << " n_heads=" << s.n_heads << " n_kv=" << s.n_kv_heads
                                     << " hd=" << s.head_dim << " n_ctx=" << n_ctx << " i=" << i;
  }
}

TEST(Attention, MatchesReferenceAcrossHeadLayoutsAndLengths) {
  std::mt19937 rng(2024);
  for (const Heads& h : kHeadConfigs) {
    for (std::int64_t hd : {8, 16, 64}) {
      for (std::int64_t n_ctx : {1, 5, 300}) {
        for (bool large : {false, true}) {  // large: scores ~1e3, many running-max updates
          const AttentionShape s{h.n_heads, h.n_kv_heads, hd, h.n_kv_heads * hd};
          const auto nq = static_cast<std::size_t>(s.n_heads * hd);
          const auto nk = static_cast<std::size_t>(n_ctx * s.kv_stride);
          const auto q = large ? integer_vec(nq, rng) : random_vec(nq, 1.0f, rng);
          const auto k = large ? integer_vec(nk, rng) : random_vec(nk, 1.0f, rng);
          const auto v = random_vec(static_cast<std::size_t>(n_ctx * s.kv_stride), 1.0f, rng);
          expect_matches_reference(q, k, v, n_ctx, s, h.name);
        }
      }
    }
  }
}

TEST(Attention, RisingScoresRescaleTheRunningSum) {
  // Score of position t grows with t (k_t = c*(t+1)*q), so the running max changes at every
  // step and the accumulator is rescaled every time; the steps are small enough that many
  // positions keep non-negligible weight.
  std::mt19937 rng(7);
  const std::int64_t hd = 16, n_ctx = 300;
  const AttentionShape s{2, 1, hd, hd};
  auto q = random_vec(static_cast<std::size_t>(2 * hd), 1.0f, rng);
  for (std::int64_t d = 0; d < hd; ++d) q[static_cast<std::size_t>(hd + d)] = -q[static_cast<std::size_t>(d)];
  double qq = 0.0;
  for (std::int64_t d = 0; d < hd; ++d) qq += q[static_cast<std::size_t>(d)] * q[static_cast<std::size_t>(d)];
  std::vector<float> k(static_cast<std::size_t>(n_ctx * hd));
  for (std::int64_t t = 0; t < n_ctx; ++t) {
    const double c = 0.02 * (t + 1) * std::sqrt(static_cast<double>(hd)) / qq;  // score = 0.02*(t+1)
    for (std::int64_t d = 0; d < hd; ++d) k[static_cast<std::size_t>(t * hd + d)] = static_cast<float>(c * q[static_cast<std::size_t>(d)]);
  }
  const auto v = random_vec(static_cast<std::size_t>(n_ctx * hd), 1.0f, rng);
  // Head 0 sees rising scores, head 1 (negated q) falling ones: both orders are covered.
  expect_matches_reference(q, k, v, n_ctx, s, "rising");

  // Scores that jump to ~1e4 after a long flat stretch: earlier mass must vanish, not NaN.
  for (std::int64_t d = 0; d < hd; ++d) {
    k[static_cast<std::size_t>((n_ctx - 1) * hd + d)] = static_cast<float>(1e4 * std::sqrt(static_cast<double>(hd)) / qq * q[static_cast<std::size_t>(d)]);
  }
  std::vector<float> out(static_cast<std::size_t>(2 * hd));
  attention_row(q.data(), k.data(), v.data(), n_ctx, s, out.data());
  for (std::int64_t d = 0; d < hd; ++d) {
    EXPECT_NEAR(out[static_cast<std::size_t>(d)], v[static_cast<std::size_t>((n_ctx - 1) * hd + d)], 1e-6f);
  }
  for (float x : out) EXPECT_TRUE(std::isfinite(x));
}

TEST(Attention, SinglePositionReturnsItsValue) {
  std::mt19937 rng(11);
  const AttentionShape s{8, 2, 16, 32};
  const auto q = integer_vec(8 * 16, rng);
  const auto k = integer_vec(32, rng);
  const auto v = random_vec(32, 1.0f, rng);
  std::vector<float> out(8 * 16);
  attention_row(q.data(), k.data(), v.data(), 1, s, out.data());
  for (std::int64_t h = 0; h < 8; ++h) {
    for (std::int64_t d = 0; d < 16; ++d) {
      EXPECT_FLOAT_EQ(out[static_cast<std::size_t>(h * 16 + d)], v[static_cast<std::size_t>((h / 4) * 16 + d)]);
    }
  }
}

TEST(Attention, GroupedHeadsEqualMhaWithReplicatedKv) {
  // Query head h reads KV head h / (n_heads / n_kv_heads): contiguous groups share a KV head.
  std::mt19937 rng(5);
  const std::int64_t n_heads = 8, n_kv = 2, hd = 16, n_ctx = 33;
  const auto q = random_vec(static_cast<std::size_t>(n_heads * hd), 1.0f, rng);
  const auto k = random_vec(static_cast<std::size_t>(n_ctx * n_kv * hd), 1.0f, rng);
  const auto v = random_vec(static_cast<std::size_t>(n_ctx * n_kv * hd), 1.0f, rng);
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
  attention_row(q.data(), k.data(), v.data(), n_ctx, {n_heads, n_kv, hd, n_kv * hd}, gqa.data());
  attention_row_reference(q.data(), k_full.data(), v_full.data(), n_ctx, {n_heads, n_heads, hd, n_heads * hd}, mha.data());
  for (std::size_t i = 0; i < gqa.size(); ++i) EXPECT_NEAR(gqa[i], mha[i], 1e-5f) << i;
}

TEST(Attention, UniformScoresAverageValues) {
  // q = 0 → all scores equal → output is the mean of V over the visible positions.
  const std::int64_t hd = 8, n_ctx = 7;
  const AttentionShape s{1, 1, hd, hd};
  std::vector<float> q(hd, 0.0f), k(n_ctx * hd, 1.0f), v(n_ctx * hd);
  for (std::int64_t t = 0; t < n_ctx; ++t)
    for (std::int64_t d = 0; d < hd; ++d) v[static_cast<std::size_t>(t * hd + d)] = static_cast<float>(t * 10 + d);
  std::vector<float> out(hd);
  attention_row(q.data(), k.data(), v.data(), n_ctx, s, out.data());
  for (std::int64_t d = 0; d < hd; ++d) EXPECT_NEAR(out[static_cast<std::size_t>(d)], 30.0f + static_cast<float>(d), 1e-5f);
}

TEST(Attention, PaddedKvStride) {
  // kv_stride larger than n_kv_heads*head_dim (rows of a wider cache): padding is ignored.
  std::mt19937 rng(9);
  const AttentionShape s{4, 2, 8, 2 * 8 + 5};
  const auto q = random_vec(32, 1.0f, rng);
  auto k = random_vec(static_cast<std::size_t>(17 * s.kv_stride), 1.0f, rng);
  auto v = random_vec(static_cast<std::size_t>(17 * s.kv_stride), 1.0f, rng);
  expect_matches_reference(q, k, v, 17, s, "padded");
  std::vector<float> a(32), b(32);
  attention_row(q.data(), k.data(), v.data(), 17, s, a.data());
  for (std::int64_t t = 0; t < 17; ++t) {
    for (std::int64_t p = 16; p < s.kv_stride; ++p) {
      k[static_cast<std::size_t>(t * s.kv_stride + p)] = 1e30f;
      v[static_cast<std::size_t>(t * s.kv_stride + p)] = 1e30f;
    }
  }
  attention_row(q.data(), k.data(), v.data(), 17, s, b.data());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace peregrine
