// Micro-benchmark of the attention kernels (kernels/cpu/attention/attention.h) reading the paged KV
// cache, at TinyLlama-1.1B's attention shape (32 query heads, 4 KV heads, head_dim 64), random
// inputs.
//
//   build/bin/attention_bench [--reps N] [--paging-only | --decode-only]
//
// Paging cost: the same f32 K/V read through one block holding every position ("contiguous",
// what the kernels read before the paged cache) and through 16-position blocks in shuffled
// pool order ("paged"), for prefill (L rows at positions 0..L-1) and decode (one row against
// n_ctx positions). KV dtypes: decode over paged f16, q8_0, i8, f8_e4m3 and f8_e5m2 blocks
// against paged f32.
// Token-tree verification: a tree-masked prefill run against a causal one of the same size.
// Sliding window (Mistral, Gemma 2's local layers): full attention against a window of 512 /
// 4096 positions, prefill and decode (the window's kernels skip the KV tiles below it, so the
// cost follows min(n_ctx, window)).
// Then the decode threshold sweep: attention_decode on the calling thread vs split over the
// pool; and decode at each model family's attention shape (--decode-only: these two alone).
// Compared variants alternate within each repetition; medians are printed with their ratios.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "peregrine/core/thread_pool.h"
#include "peregrine/kernels/cpu/attention/attention.h"
#include "peregrine/quant/quantize_rtn.h"

namespace {

using peregrine::AttentionShape;
using peregrine::DType;
using peregrine::KvLayerView;
using peregrine::ThreadPool;

constexpr AttentionShape kTinyLlama{32, 4, 64};
constexpr AttentionShape kOlmoe{16, 16, 128};  // one query head per KV head
constexpr std::int32_t kBlockSize = 16;

std::vector<float> random_vec(std::int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = normal(rng);
  return v;
}

// K or V rows [n_ctx, kv_dim] f32 stored in `dtype` in blocks of `block_size` positions whose
// pool ids are shuffled (block_size = n_ctx: one contiguous block).
struct PagedRows {
  std::vector<std::uint8_t> pool;
  std::vector<std::int32_t> table;
  KvLayerView view;
};

PagedRows page(const std::vector<float>& rows, std::int64_t kv_dim, std::int32_t block_size, DType dtype,
               std::mt19937& rng) {
  const auto n_ctx = static_cast<std::int64_t>(rows.size()) / kv_dim;
  const std::int64_t n_blocks = (n_ctx + block_size - 1) / block_size;
  const auto row_bytes = static_cast<std::int64_t>(*peregrine::dtype_row_bytes(dtype, static_cast<std::uint64_t>(kv_dim)));
  PagedRows p;
  p.pool.resize(static_cast<std::size_t>(n_blocks * block_size * row_bytes));
  p.table.resize(static_cast<std::size_t>(n_blocks));
  std::iota(p.table.begin(), p.table.end(), 0);
  std::shuffle(p.table.begin(), p.table.end(), rng);
  p.view = {p.pool.data(), p.table.data(), block_size, dtype, row_bytes};
  for (std::int64_t t = 0; t < n_ctx; ++t) {
    const auto row = std::span<const float>(rows).subspan(static_cast<std::size_t>(t * kv_dim), static_cast<std::size_t>(kv_dim));
    peregrine::quantize_rtn(dtype, row, const_cast<std::uint8_t*>(p.view.row(t)));
  }
  return p;
}

struct Kv {
  PagedRows k, v;
};

Kv random_kv(std::int64_t n_ctx, std::int32_t block_size, DType dtype, std::mt19937& rng) {
  const std::int64_t kv_dim = kTinyLlama.n_kv_heads * kTinyLlama.head_dim;
  const auto k = random_vec(n_ctx * kv_dim, rng), v = random_vec(n_ctx * kv_dim, rng);
  return {page(k, kv_dim, block_size, dtype, rng), page(v, kv_dim, block_size, dtype, rng)};
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
  const auto q = random_vec(len * s.n_heads * s.head_dim, rng);
  const Kv contiguous = random_kv(len, static_cast<std::int32_t>(len), DType::kF32, rng);
  const Kv paged = random_kv(len, kBlockSize, DType::kF32, rng);
  std::vector<float> out(q.size());
  ThreadPool pool(threads);
  const auto run = [&](const Kv& kv) { return [&] { peregrine::attention_prefill(q.data(), kv.k.view, kv.v.view, 0, len, s, out.data(), pool); }; };
  const auto [t_cont, t_paged] = compare(run(contiguous), run(paged), reps, 1.0);
  std::printf("prefill L=%-5lld threads=%d  contiguous %8.3f ms  paged-16 %8.3f ms  paged/contiguous %5.3f\n",
              static_cast<long long>(len), threads, t_cont, t_paged, t_paged / t_cont);
}

void bench_decode(std::int64_t n_ctx, int threads, int reps, std::mt19937& rng) {
  const AttentionShape& s = kTinyLlama;
  const auto q = random_vec(s.n_heads * s.head_dim, rng);
  const Kv contiguous = random_kv(n_ctx, static_cast<std::int32_t>(n_ctx), DType::kF32, rng);
  const Kv paged = random_kv(n_ctx, kBlockSize, DType::kF32, rng);
  std::vector<float> out(q.size());
  ThreadPool pool(threads);
  const auto run = [&](const Kv& kv) { return [&] { peregrine::attention_decode(q.data(), kv.k.view, kv.v.view, n_ctx, s, out.data(), pool); }; };
  const auto [t_cont, t_paged] = compare(run(contiguous), run(paged), reps, 20.0);
  std::printf("decode n_ctx=%-5lld threads=%d  contiguous %8.4f ms  paged-16 %8.4f ms  paged/contiguous %5.3f\n",
              static_cast<long long>(n_ctx), threads, t_cont, t_paged, t_paged / t_cont);
}

void bench_decode_dtype(DType dtype, std::int64_t n_ctx, int reps, std::mt19937& rng) {
  const AttentionShape& s = kTinyLlama;
  const auto q = random_vec(s.n_heads * s.head_dim, rng);
  const Kv f32 = random_kv(n_ctx, kBlockSize, DType::kF32, rng), other = random_kv(n_ctx, kBlockSize, dtype, rng);
  std::vector<float> out(q.size());
  ThreadPool pool(1);
  const auto run = [&](const Kv& kv) { return [&] { peregrine::attention_decode(q.data(), kv.k.view, kv.v.view, n_ctx, s, out.data(), pool); }; };
  const auto [t_f32, t_other] = compare(run(f32), run(other), reps, 20.0);
  std::printf("decode n_ctx=%-5lld threads=1  paged f32 %8.4f ms  paged %-7s %8.4f ms  ratio %5.3f\n",
              static_cast<long long>(n_ctx), t_f32, peregrine::dtype_name(dtype).data(), t_other, t_other / t_f32);
}

// A verification run: n_q draft-tree rows after n_ctx cached positions, tree-masked (a random
// tree, parent of row i uniform in [0, i)) vs causal; the mask costs one byte test per score
// on the tiles holding the run.
void bench_tree(std::int64_t n_q, std::int64_t n_ctx, int reps, std::mt19937& rng) {
  const AttentionShape& s = kTinyLlama;
  const auto q = random_vec(n_q * s.n_heads * s.head_dim, rng);
  const Kv kv = random_kv(n_ctx + n_q, kBlockSize, DType::kF32, rng);
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(n_q * n_q), 0);
  for (std::int64_t i = 0; i < n_q; ++i) {
    if (i > 0) {
      const std::int64_t parent = std::uniform_int_distribution<std::int64_t>(0, i - 1)(rng);
      std::copy_n(&mask[static_cast<std::size_t>(parent * n_q)], parent + 1, &mask[static_cast<std::size_t>(i * n_q)]);
    }
    mask[static_cast<std::size_t>(i * n_q + i)] = 1;
  }
  std::vector<float> out(q.size());
  ThreadPool pool(1);
  const auto run = [&](const std::uint8_t* m) {
    return [&, m] { peregrine::attention_prefill(q.data(), kv.k.view, kv.v.view, n_ctx, n_q, s, out.data(), pool, 0, m); };
  };
  const auto [t_causal, t_tree] = compare(run(nullptr), run(mask.data()), reps, 20.0);
  std::printf("verify n_q=%-3lld n_ctx=%-5lld threads=1  causal %8.4f ms  tree %8.4f ms  tree/causal %5.3f\n", static_cast<long long>(n_q),
              static_cast<long long>(n_ctx), t_causal, t_tree, t_tree / t_causal);
}

// Full attention vs a sliding window over the same paged f32 K/V: prefill of L rows at 0..L-1
// and decode of one row against n_ctx positions, one thread.
void bench_window(std::int64_t n_ctx, std::int64_t window, int reps, std::mt19937& rng) {
  AttentionShape windowed = kTinyLlama;
  windowed.window = window;
  const Kv kv = random_kv(n_ctx, kBlockSize, DType::kF32, rng);
  const auto q = random_vec(n_ctx * kTinyLlama.n_heads * kTinyLlama.head_dim, rng);
  std::vector<float> out(q.size());
  ThreadPool pool(1);
  const auto prefill = [&](const AttentionShape& s) {
    return [&] { peregrine::attention_prefill(q.data(), kv.k.view, kv.v.view, 0, n_ctx, s, out.data(), pool); };
  };
  const auto decode = [&](const AttentionShape& s) {
    return [&] { peregrine::attention_decode(q.data(), kv.k.view, kv.v.view, n_ctx, s, out.data(), pool); };
  };
  const auto [p_full, p_window] = compare(prefill(kTinyLlama), prefill(windowed), std::min(reps, 3), 1.0);
  const auto [d_full, d_window] = compare(decode(kTinyLlama), decode(windowed), reps, 20.0);
  std::printf("window %-5lld n_ctx=%-5lld threads=1  prefill full %8.3f ms  window %8.3f ms  ratio %5.3f   decode full %7.4f ms  window %7.4f ms  ratio %5.3f\n",
              static_cast<long long>(window), static_cast<long long>(n_ctx), p_full, p_window, p_window / p_full, d_full, d_window,
              d_window / d_full);
}

// attention_decode on the calling thread vs forced onto the pool: where splitting pays.
void bench_decode_threshold(const AttentionShape& s, const char* name, int reps, std::mt19937& rng) {
  ThreadPool pool(2);
  for (std::int64_t n_ctx : {16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192}) {
    const std::int64_t kv_dim = s.n_kv_heads * s.head_dim;
    const auto q = random_vec(s.n_heads * s.head_dim, rng);
    const PagedRows k = page(random_vec(n_ctx * kv_dim, rng), kv_dim, kBlockSize, DType::kF32, rng);
    const PagedRows v = page(random_vec(n_ctx * kv_dim, rng), kv_dim, kBlockSize, DType::kF32, rng);
    std::vector<float> out(q.size());
    const auto inline_call = [&] { peregrine::attention_decode(q.data(), k.view, v.view, n_ctx, s, out.data(), pool, std::numeric_limits<std::int64_t>::max()); };
    const auto pooled_call = [&] { peregrine::attention_decode(q.data(), k.view, v.view, n_ctx, s, out.data(), pool, 0); };
    const auto [t_inline, t_pooled] = compare(inline_call, pooled_call, reps, 20.0);
    std::printf("threshold %s n_ctx=%-5lld macs=%-9lld  1 thread %7.4f ms  2 threads %7.4f ms  ratio %5.2f\n", name, static_cast<long long>(n_ctx),
                static_cast<long long>(2 * n_ctx * s.n_heads * s.head_dim), t_inline, t_pooled, t_inline / t_pooled);
  }
}


// One decode call at each family's attention shape (paged f32, one thread): the query-lane
// kernel serves large KV groups, the head-rows kernel small ones (attention.cpp's
// use_head_rows), so the time per multiply-add shows whether either wastes its SIMD lanes.
void bench_family_decode(int reps, std::mt19937& rng) {
  struct Family {
    const char* name;
    AttentionShape s;
  };
  const Family families[] = {{"tinyllama-1.1b", kTinyLlama},   {"qwen2.5-0.5b", {14, 2, 64}}, {"llama3.2-1b", {32, 8, 64}},
                             {"qwen3-0.6b", {16, 8, 128}},     {"gemma2-2b", {8, 4, 256}},    {"phi3-mini", {32, 32, 96}},
                             {"olmoe-1b-7b", kOlmoe}};
  ThreadPool pool(1);
  for (const Family& f : families) {
    const AttentionShape& s = f.s;
    for (std::int64_t n_ctx : {64, 512, 4096}) {
      const std::int64_t kv_dim = s.n_kv_heads * s.head_dim;
      const auto q = random_vec(s.n_heads * s.head_dim, rng);
      const PagedRows k = page(random_vec(n_ctx * kv_dim, rng), kv_dim, kBlockSize, DType::kF32, rng);
      const PagedRows v = page(random_vec(n_ctx * kv_dim, rng), kv_dim, kBlockSize, DType::kF32, rng);
      std::vector<float> out(q.size());
      const auto call = [&] { peregrine::attention_decode(q.data(), k.view, v.view, n_ctx, s, out.data(), pool); };
      std::vector<double> t;
      for (int r = 0; r < reps; ++r) t.push_back(ms_per_call(call, 20.0));
      const double ms = median(t), macs = 2.0 * static_cast<double>(n_ctx * s.n_heads * s.head_dim);
      std::printf("family %-15s heads %2lld/%-2lld hd %3lld  n_ctx=%-5lld threads=1  %8.4f ms  %6.2f GMAC/s\n", f.name,
                  static_cast<long long>(s.n_heads), static_cast<long long>(s.n_kv_heads), static_cast<long long>(s.head_dim),
                  static_cast<long long>(n_ctx), ms, macs / ms * 1e-6);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  bool paging_only = false, decode_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--paging-only") == 0) paging_only = true;
    if (std::strcmp(argv[i], "--decode-only") == 0) decode_only = true;
  }
  std::mt19937 rng(1);
  if (decode_only) {
    bench_family_decode(reps, rng);
    bench_decode_threshold(kOlmoe, "olmoe", reps, rng);
    return 0;
  }
  for (int threads : {1, 2}) {
    for (std::int64_t len : {512, 2048}) bench_prefill(len, threads, len > 1024 ? std::min(reps, 3) : reps, rng);
  }
  for (int threads : {1, 2}) {
    for (std::int64_t n_ctx : {512, 1024, 2048, 4096}) bench_decode(n_ctx, threads, reps, rng);
  }
  if (paging_only) return 0;
  for (DType dtype : {DType::kF16, DType::kQ8_0, DType::kI8, DType::kF8E4M3, DType::kF8E5M2}) {
    for (std::int64_t n_ctx : {512, 4096}) bench_decode_dtype(dtype, n_ctx, reps, rng);
  }
  for (std::int64_t n_q : {16, 64}) bench_tree(n_q, 1024, reps, rng);
  bench_window(4096, 512, reps, rng);
  bench_window(4096, 4096, reps, rng);
  bench_decode_threshold(kTinyLlama, "tinyllama", reps, rng);
  bench_decode_threshold({6, 1, 128}, "mqa-6x128", reps, rng);
  bench_decode_threshold(kOlmoe, "olmoe", reps, rng);
  bench_family_decode(reps, rng);
  return 0;
}
