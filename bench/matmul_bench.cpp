// Float-weight matmul micro-benchmark: the SIMD decode GEMV (GB/s of weight bytes) and the
// packed prefill GEMM (GFLOP/s) against the scalar matmul they replaced, timed in the same
// run, plus the machine's streaming read bandwidth for scale.
//
// Usage: build/bin/matmul_bench [--reps N] [--threads N] [--only small|gemv|threshold|gemm]
//                               [--clock wall|cpu] [--old off]   (default: 5 repetitions, 1 and 2 threads, all)
// Each figure is the best of N repetitions; new and old code alternate within a repetition so
// that background load hits both alike.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <ctime>
#include <vector>

#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/kernels/cpu/matmul/float_matmul.h"
#include "peregrine/kernels/cpu/matmul/gemm_float.h"
#include "peregrine/kernels/cpu/matmul/gemv_float.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/fp16.h"

namespace peregrine {
namespace {

bool g_run_old = true;  // --old off skips the slow baseline while tuning (its columns then read inf)

// The scalar matmul this work replaced (src/kernels/cpu/matmul/matmul.cpp before the float
// kernels): each weight row decoded to f32, then one scalar dot product per token.
void old_scalar_matmul(const TensorView& w, const float* x, std::int64_t n_tokens, float* y,
                       ThreadPool& pool) {
  if (!g_run_old) return;
  const std::int64_t out = w.n_rows(), in = w.row_length();
  const std::size_t row_bytes = w.nbytes / static_cast<std::size_t>(out);
  pool.parallel_for(out, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> scratch(static_cast<std::size_t>(in));
    for (std::int64_t o = begin; o < end; ++o) {
      const auto* src = static_cast<const std::uint8_t*>(w.data) + o * row_bytes;
      const float* row = reinterpret_cast<const float*>(src);  // F32: in place (aligned here)
      if (w.dtype != DType::kF32) {
        dequantize(w.dtype, src, scratch);
        row = scratch.data();
      }
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        float s = 0.0f;
        for (std::int64_t i = 0; i < in; ++i) s += row[i] * x[t * in + i];
        y[t * out + o] = s;
      }
    }
  });
}

// --clock cpu: time = process CPU seconds / threads, i.e. what undisturbed cores would take
// (other jobs on the machine then do not count, though they still share caches and DRAM).
int g_cpu_clock_threads = 0;  // 0: wall clock

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double seconds(const std::function<void()>& fn) {
  if (g_cpu_clock_threads > 0) {
    const double c0 = process_cpu_seconds();
    fn();
    return (process_cpu_seconds() - c0) / g_cpu_clock_threads;
  }
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best time of `reps` for each function, calling them alternately.
std::vector<double> best_times(int reps, const std::vector<std::function<void()>>& fns) {
  std::vector<double> best(fns.size(), 1e30);
  for (int r = 0; r < reps; ++r) {
    for (std::size_t f = 0; f < fns.size(); ++f) best[f] = std::min(best[f], seconds(fns[f]));
  }
  return best;
}

std::size_t dtype_bytes(DType t) { return t == DType::kF32 ? 4 : 2; }

// `copies` random [out, in] matrices in dtype t, back to back (so that cycling through them
// defeats the 32 MiB L3 and the GEMV figures are DRAM bandwidth).
struct Weights {
  std::vector<std::uint8_t> bytes;
  std::vector<TensorView> views;
};

Weights make_weights(DType t, std::int64_t out, std::int64_t in, int copies, std::mt19937& rng) {
  const std::size_t n = static_cast<std::size_t>(out * in), nb = n * dtype_bytes(t);
  Weights w;
  w.bytes.resize(nb * static_cast<std::size_t>(copies));
  std::normal_distribution<float> normal(0.0f, 0.05f);
  for (std::size_t e = 0; e < n; ++e) {
    const float v = normal(rng);
    std::uint32_t bits = t == DType::kF16 ? f32_to_f16(v) : t == DType::kBF16 ? f32_to_bf16(v) : 0;
    std::memcpy(w.bytes.data() + e * dtype_bytes(t), t == DType::kF32 ? static_cast<const void*>(&v) : &bits,
                dtype_bytes(t));
  }
  for (int c = 0; c < copies; ++c) {
    if (c > 0) std::memcpy(w.bytes.data() + nb * static_cast<std::size_t>(c), w.bytes.data(), nb);
    w.views.push_back(TensorView{"w", t, {out, in}, w.bytes.data() + nb * static_cast<std::size_t>(c), nb});
  }
  return w;
}

std::vector<float> random_floats(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& e : v) e = normal(rng);
  return v;
}

// Streaming read of `nbytes` at p split across the pool (64-bit integer sums, which the
// compiler vectorizes freely): the bandwidth yardstick for the GEMV.
void stream_read(ThreadPool& pool, const void* p, std::size_t nbytes) {
  const auto* words = static_cast<const std::uint64_t*>(p);
  const auto n = static_cast<std::int64_t>(nbytes / 8);
  pool.parallel_for(n, [&](std::int64_t b, std::int64_t e) {
    std::uint64_t s[8] = {};
    for (std::int64_t i = b & ~std::int64_t{7}; i < (e & ~std::int64_t{7}); i += 8) {
      __builtin_prefetch(words + i + 512);  // 4 KiB ahead: across the pages hardware stops at
      for (int j = 0; j < 8; ++j) s[j] += words[i + j];
    }
    volatile std::uint64_t sink = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
    (void)sink;
  });
}

// Row split of matmul_float, for forcing one kernel at any token count.
using RowKernel = void (*)(const TensorView&, std::span<const float>, std::int64_t,
                           std::span<float>, std::int64_t, std::int64_t);
void run_split(RowKernel kernel, std::int64_t tile, const TensorView& w, std::span<const float> x,
               std::int64_t n_tokens, std::span<float> y, ThreadPool& pool) {
  const std::int64_t out = w.n_rows();
  pool.parallel_for((out + tile - 1) / tile, [&](std::int64_t b, std::int64_t e) {
    kernel(w, x, n_tokens, y, b * tile, std::min(out, e * tile));
  });
}

struct Shape {
  std::int64_t out, in;
};
constexpr Shape kTinyllama[] = {{2048, 2048}, {5632, 2048}, {2048, 5632}, {32000, 2048}};
constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};

void bench_gemv(ThreadPool& pool, int reps, std::mt19937& rng) {
  std::printf("\nGEMV, 1 token (GB/s of weight bytes; matrices cycled past L3)\n");
  std::printf("%-6s %-12s %8s %8s %8s %8s %8s\n", "dtype", "out x in", "new", "old", "stream",
              "new/old", "new/strm");
  for (DType t : kDtypes) {
    for (Shape s : kTinyllama) {
      const std::size_t nb = static_cast<std::size_t>(s.out * s.in) * dtype_bytes(t);
      const int copies = static_cast<int>(std::max<std::size_t>(1, (std::size_t{160} << 20) / nb + 1));
      const Weights w = make_weights(t, s.out, s.in, copies, rng);
      const auto x = random_floats(static_cast<std::size_t>(s.in), rng);
      std::vector<float> y(static_cast<std::size_t>(s.out));
      std::size_t c_new = 0, c_old = 0, c_read = 0;
      auto next = [&](std::size_t& c) { return w.views[c++ % w.views.size()]; };
      const auto best = best_times(reps, {
          [&] { matmul(next(c_new), x, 1, y, pool); },
          [&] { old_scalar_matmul(next(c_old), x.data(), 1, y.data(), pool); },
          [&] { stream_read(pool, next(c_read).data, nb); }});
      std::printf("%-6s %5ldx%-6ld %8.2f %8.2f %8.2f %8.2f %8.2f\n", std::string(dtype_name(t)).c_str(),
                  static_cast<long>(s.out), static_cast<long>(s.in), nb / best[0] / 1e9,
                  nb / best[1] / 1e9, nb / best[2] / 1e9, best[1] / best[0], best[2] / best[0]);
    }
  }
}

void bench_gemm(ThreadPool& pool, int reps, std::mt19937& rng) {
  std::printf("\nGEMM, 128 tokens (GFLOP/s)\n");
  std::printf("%-6s %-12s %10s %10s %8s\n", "dtype", "out x in", "new", "old", "new/old");
  const std::int64_t n_tokens = 128;
  for (DType t : kDtypes) {
    for (Shape s : kTinyllama) {
      if (s.out == 32000) continue;  // the LM head runs on the last prompt token only
      const Weights w = make_weights(t, s.out, s.in, 1, rng);
      const auto x = random_floats(static_cast<std::size_t>(n_tokens * s.in), rng);
      std::vector<float> y(static_cast<std::size_t>(n_tokens * s.out));
      const auto best = best_times(reps, {
          [&] { matmul(w.views[0], x, n_tokens, y, pool); },
          [&] { old_scalar_matmul(w.views[0], x.data(), n_tokens, y.data(), pool); }});
      const double flop = 2.0 * static_cast<double>(n_tokens * s.out * s.in);
      std::printf("%-6s %5ldx%-6ld %10.1f %10.1f %8.2f\n", std::string(dtype_name(t)).c_str(),
                  static_cast<long>(s.out), static_cast<long>(s.in), flop / best[0] / 1e9,
                  flop / best[1] / 1e9, best[1] / best[0]);
    }
  }
}

// GEMV vs GEMM time per call by token count on [5632 x 2048] F16: where kGemmMinTokens sits.
void bench_threshold(ThreadPool& pool, int reps, std::mt19937& rng) {
  std::printf("\nGEMV vs GEMM by token count, f16 5632x2048 (ms per call)\n");
  std::printf("%-8s %10s %10s %10s\n", "tokens", "gemv", "gemm", "gemv/gemm");
  const Weights w = make_weights(DType::kF16, 5632, 2048, 1, rng);
  for (std::int64_t n_tokens : {1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32}) {
    const auto x = random_floats(static_cast<std::size_t>(n_tokens * 2048), rng);
    std::vector<float> y(static_cast<std::size_t>(n_tokens * 5632));
    const auto best = best_times(reps, {
        [&] { run_split(gemv_float, kGemvRows, w.views[0], x, n_tokens, y, pool); },
        [&] { run_split(gemm_float, kGemmRows, w.views[0], x, n_tokens, y, pool); }});
    std::printf("%-8ld %10.3f %10.3f %10.2f\n", static_cast<long>(n_tokens), best[0] * 1e3,
                best[1] * 1e3, best[0] / best[1]);
  }
}

// stories260K-size decode products (dim 64, ffn 172, vocab 512), F32: below
// kMinParallelMacs, so both run on the calling thread. ns per call.
void bench_small(int reps, std::mt19937& rng) {
  std::printf("\nstories260K decode products, f32, 1 token (ns per call)\n");
  std::printf("%-12s %10s %10s %8s\n", "out x in", "new", "old", "new/old");
  ThreadPool inline_pool(1);
  for (Shape s : {Shape{64, 64}, Shape{172, 64}, Shape{64, 172}, Shape{512, 64}}) {
    const Weights w = make_weights(DType::kF32, s.out, s.in, 1, rng);
    const auto x = random_floats(static_cast<std::size_t>(s.in), rng);
    std::vector<float> y(static_cast<std::size_t>(s.out));
    constexpr int kCalls = 2000;
    const auto best = best_times(reps, {
        [&] { for (int i = 0; i < kCalls; ++i) matmul(w.views[0], x, 1, y, inline_pool); },
        [&] { for (int i = 0; i < kCalls; ++i) old_scalar_matmul(w.views[0], x.data(), 1, y.data(), inline_pool); }});
    std::printf("%5ldx%-6ld %10.1f %10.1f %8.2f\n", static_cast<long>(s.out), static_cast<long>(s.in),
                best[0] / kCalls * 1e9, best[1] / kCalls * 1e9, best[1] / best[0]);
  }
}

}  // namespace
}  // namespace peregrine

int main(int argc, char** argv) {
  int reps = 5;
  std::vector<int> thread_counts = {1, 2};
  std::string only;
  bool cpu_clock = false;
  for (int a = 1; a + 1 < argc; a += 2) {
    const std::string flag = argv[a];
    if (flag == "--reps") reps = std::max(1, std::atoi(argv[a + 1]));
    else if (flag == "--threads") thread_counts = {std::max(1, std::atoi(argv[a + 1]))};
    else if (flag == "--only") only = argv[a + 1];
    else if (flag == "--clock") cpu_clock = std::string(argv[a + 1]) == "cpu";
    else if (flag == "--old") peregrine::g_run_old = std::string(argv[a + 1]) != "off";
  }
  std::mt19937 rng(7);
  if (only.empty() || only == "small") {
    peregrine::g_cpu_clock_threads = cpu_clock ? 1 : 0;
    peregrine::bench_small(reps, rng);
  }
  for (int threads : thread_counts) {
    peregrine::ThreadPool pool(threads);
    peregrine::g_cpu_clock_threads = cpu_clock ? threads : 0;
    std::printf("==== %d thread(s) ====\n", threads);
    if (only.empty() || only == "gemv") peregrine::bench_gemv(pool, reps, rng);
    if (only.empty() || only == "threshold") peregrine::bench_threshold(pool, reps, rng);
    if (only.empty() || only == "gemm") peregrine::bench_gemm(pool, reps, rng);
  }
  return 0;
}
