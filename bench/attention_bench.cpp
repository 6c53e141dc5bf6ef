// Micro-benchmark of the attention kernels (kernels/cpu/attention.h) against the scalar
// one-pass online-softmax row kernel they replaced, at TinyLlama-1.1B's attention shape
// (32 query heads, 4 KV heads, head_dim 64), random f32 inputs.
//
//   build/bin/attention_bench [--reps N]
//
// Prefill: L rows at positions 0..L-1 (old: the model's former loop, rows split over the
// pool, one row kernel call each; new: attention_prefill). Decode: one row against n_ctx
// positions (old: the row kernel on the calling thread, as the model ran a lone row; new:
// attention_decode). Then the decode threshold sweep: attention_decode on the calling thread
// vs split over the pool. Old and new alternate within each repetition; medians are printed
// with new/old speedups.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "peregrine/core/thread_pool.h"
#include "peregrine/kernels/cpu/attention.h"

namespace {

using peregrine::AttentionShape;
using peregrine::ThreadPool;

// The scalar kernel the SIMD ones replaced (the former peregrine::attention_row): per query
// head, one pass over the positions with a running max / sum.
void baseline_attention_row(const float* q, const float* k, const float* v, std::int64_t n_ctx,
                            const AttentionShape& s, float* out) {
  const std::int64_t group = s.n_heads / s.n_kv_heads, hd = s.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (std::int64_t h = 0; h < s.n_heads; ++h) {
    const float* qh = q + h * hd;
    const std::int64_t kv_off = (h / group) * hd;
    float* acc = out + h * hd;
    for (std::int64_t d = 0; d < hd; ++d) acc[d] = 0.0f;
    float running_max = -INFINITY, running_sum = 0.0f;
    for (std::int64_t t = 0; t < n_ctx; ++t) {
      const float* kt = k + t * s.kv_stride + kv_off;
      float score = 0.0f;
      for (std::int64_t d = 0; d < hd; ++d) score += qh[d] * kt[d];
      score *= scale;
      const float new_max = std::max(running_max, score);
      const float correction = std::exp(running_max - new_max);
      const float p = std::exp(score - new_max);
      const float* vt = v + t * s.kv_stride + kv_off;
      for (std::int64_t d = 0; d < hd; ++d) acc[d] = acc[d] * correction + p * vt[d];
      running_sum = running_sum * correction + p;
      running_max = new_max;
    }
    for (std::int64_t d = 0; d < hd; ++d) acc[d] /= running_sum;
  }
}

constexpr AttentionShape kTinyLlama{32, 4, 64, 4 * 64};

std::vector<float> random_vec(std::int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = normal(rng);
  return v;
}

// Milliseconds per call: fn repeated until at least `min_ms` have passed, mean per call.
double ms_per_call(const std::function<void()>& fn, double min_ms) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  std::int64_t calls = 0;
  double elapsed = 0.0;
  do {
    fn();
    ++calls;
    elapsed = std::chrono::duration<double, std::milli>(clock::now() - start).count();
  } while (elapsed < min_ms);
  return elapsed / static_cast<double>(calls);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times `a` and `b` alternately `reps` times; returns their medians.
std::pair<double, double> compare(const std::function<void()>& a, const std::function<void()>& b, int reps, double min_ms) {
  std::vector<double> ta, tb;
  for (int r = 0; r < reps; ++r) {
    ta.push_back(ms_per_call(a, min_ms));
    tb.push_back(ms_per_call(b, min_ms));
  }
  return {median(ta), median(tb)};
}

void bench_prefill(std::int64_t len, int threads, int reps, std::mt19937& rng) {
  const AttentionShape& s = kTinyLlama;
  const std::int64_t q_dim = s.n_heads * s.head_dim;
  const auto q = random_vec(len * q_dim, rng), k = random_vec(len * s.kv_stride, rng), v = random_vec(len * s.kv_stride, rng);
  std::vector<float> out(q.size());
  ThreadPool pool(threads);
  const auto old_path = [&] {
    pool.parallel_for(len, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) baseline_attention_row(&q[i * q_dim], k.data(), v.data(), i + 1, s, &out[i * q_dim]);
    });
  };
  const auto new_path = [&] { peregrine::attention_prefill(q.data(), k.data(), v.data(), 0, len, s, out.data(), pool); };
  const auto [t_old, t_new] = compare(old_path, new_path, reps, 1.0);
  std::printf("prefill L=%-5lld threads=%d  old %9.2f ms  new %8.2f ms  speedup %6.1fx\n", static_cast<long long>(len), threads, t_old, t_new, t_old / t_new);
}

void bench_decode(std::int64_t n_ctx, int threads, int reps, std::mt19937& rng) {
  const AttentionShape& s = kTinyLlama;
  const auto q = random_vec(s.n_heads * s.head_dim, rng), k = random_vec(n_ctx * s.kv_stride, rng), v = random_vec(n_ctx * s.kv_stride, rng);
  std::vector<float> out(q.size());
  ThreadPool pool(threads);
  const auto old_path = [&] { baseline_attention_row(q.data(), k.data(), v.data(), n_ctx, s, out.data()); };
  const auto new_path = [&] { peregrine::attention_decode(q.data(), k.data(), v.data(), n_ctx, s, out.data(), pool); };
  const auto [t_old, t_new] = compare(old_path, new_path, reps, 20.0);
  std::printf("decode n_ctx=%-5lld threads=%d  old %8.3f ms  new %8.3f ms  speedup %6.1fx\n", static_cast<long long>(n_ctx), threads, t_old, t_new, t_old / t_new);
}

// attention_decode on the calling thread vs forced onto the pool: where splitting pays.
void bench_decode_threshold(const AttentionShape& s, const char* name, int reps, std::mt19937& rng) {
  ThreadPool pool(2);
  for (std::int64_t n_ctx : {64, 128, 256, 512, 1024, 2048, 4096, 8192}) {
    const auto q = random_vec(s.n_heads * s.head_dim, rng), k = random_vec(n_ctx * s.kv_stride, rng), v = random_vec(n_ctx * s.kv_stride, rng);
    std::vector<float> out(q.size());
    const auto inline_call = [&] { peregrine::attention_decode(q.data(), k.data(), v.data(), n_ctx, s, out.data(), pool, std::numeric_limits<std::int64_t>::max()); };
    const auto pooled_call = [&] { peregrine::attention_decode(q.data(), k.data(), v.data(), n_ctx, s, out.data(), pool, 0); };
    const auto [t_inline, t_pooled] = compare(inline_call, pooled_call, reps, 20.0);
    std::printf("threshold %s n_ctx=%-5lld macs=%-9lld  1 thread %7.4f ms  2 threads %7.4f ms  ratio %5.2f\n", name, static_cast<long long>(n_ctx),
                static_cast<long long>(2 * n_ctx * s.n_heads * s.head_dim), t_inline, t_pooled, t_inline / t_pooled);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
  }
  std::mt19937 rng(1);
  for (int threads : {1, 2}) {
    for (std::int64_t len : {512, 2048}) bench_prefill(len, threads, len > 1024 ? std::min(reps, 3) : reps, rng);
  }
  for (int threads : {1, 2}) {
    for (std::int64_t n_ctx : {512, 2048, 8192}) bench_decode(n_ctx, threads, reps, rng);
  }
  bench_decode_threshold(kTinyLlama, "tinyllama", reps, rng);
  bench_decode_threshold({6, 1, 128, 128}, "mqa-6x128", reps, rng);
  return 0;
}
