// Decode GEMV micro-benchmark of the run-time quantized weight formats (issue #6) against F16
// and Q4_0 in the same run: µs per call and GB/s of weight bytes on the tinyllama shapes, and the
// decode tokens/s that the matmuls of tinyllama's 22 layers alone would allow.
//
// Usage: build/bin/quant_matmul_bench [--reps N] [--threads N] [--tokens N] [--clock wall|cpu]
//                                     [--only FORMAT]
//        (default: 7 repetitions, 1 and 2 threads, 1 token, every format; FORMAT as printed,
//        e.g. "int4 g128")
// Each figure is the best of N repetitions; the formats alternate within a repetition so that
// background load hits them alike; every format cycles through copies of its matrix totalling
// > 3× the 32 MiB L3, so the weights stream from DRAM as in real decoding.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/quant/int_group.h"
#include "peregrine/quant/quantize_rtn.h"

namespace peregrine {
namespace {

int g_cpu_clock_threads = 0;  // --clock cpu: process CPU seconds / threads (0: wall clock)
std::string g_only;           // --only: one format (and f16 for the comparison)

double seconds(const std::function<void()>& fn) {
  if (g_cpu_clock_threads > 0) {
    timespec a{}, b{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    fn();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    return (static_cast<double>(b.tv_sec - a.tv_sec) + static_cast<double>(b.tv_nsec - a.tv_nsec) * 1e-9) / g_cpu_clock_threads;
  }
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Format {
  const char* name;
  DType dtype;
  QuantParams quant;  // kInt only; group_size 0 = per-channel
};
constexpr Format kFormats[] = {
    {"f16", DType::kF16, {}},
    {"q4_0", DType::kQ4_0, {}},
    {"int4 g128", DType::kInt, {4, 128, false, 16}},
    {"int3 g128", DType::kInt, {3, 128, false, 16}},
    {"int4 g32", DType::kInt, {4, 32, false, 16}},
    {"int2 g32", DType::kInt, {2, 32, false, 16}},
    {"int8 ch A16", DType::kInt, {8, 0, false, 16}},
    {"int8 ch A8", DType::kInt, {8, 0, false, 8}},
    {"int4 g128 A8", DType::kInt, {4, 128, false, 8}},
    {"fp8 e4m3", DType::kF8E4M3, {}},
};

struct Shape {
  std::int64_t out, in;
  int per_layer;  // how many of tinyllama's per-layer matmuls have this shape
};
// q and o; gate and up; down (k and v, 256×2048, are left out: 4% of the layer's bytes).
constexpr Shape kShapes[] = {{2048, 2048, 2}, {5632, 2048, 2}, {2048, 5632, 1}};
constexpr int kLayers = 22;

// `copies` copies of one random [out, in] matrix in format f, back to back.
struct Weights {
  std::vector<std::uint8_t> bytes;
  std::vector<TensorView> views;
  std::size_t matrix_bytes = 0;
};

Weights make_weights(const Format& f, Shape s, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(static_cast<std::size_t>(s.out * s.in));
  for (auto& v : w) v = normal(rng);
  QuantParams p = f.quant;
  if (f.dtype == DType::kInt && p.group_size == 0) p.group_size = s.in;
  std::vector<std::uint8_t> one;
  if (f.dtype == DType::kInt) {
    one = quantize_int_rtn(w, s.out, s.in, p);
  } else {
    const std::size_t rb = *dtype_row_bytes(f.dtype, static_cast<std::uint64_t>(s.in));
    one.resize(rb * static_cast<std::size_t>(s.out));
    for (std::int64_t o = 0; o < s.out; ++o) {
      quantize_rtn(f.dtype, std::span<const float>(w).subspan(static_cast<std::size_t>(o * s.in), static_cast<std::size_t>(s.in)),
                   one.data() + static_cast<std::size_t>(o) * rb);
    }
  }
  Weights out;
  out.matrix_bytes = one.size();
  const std::size_t copies = std::max<std::size_t>(1, (std::size_t{100} << 20) / one.size() + 1);
  out.bytes.resize(one.size() * copies);
  for (std::size_t c = 0; c < copies; ++c) {
    std::memcpy(out.bytes.data() + c * one.size(), one.data(), one.size());
    out.views.push_back(TensorView{"w", f.dtype, {s.out, s.in}, out.bytes.data() + c * one.size(), one.size(), p});
  }
  return out;
}

void bench(ThreadPool& pool, int reps, std::int64_t n_tokens, std::mt19937& rng) {
  std::vector<Format> formats;
  for (const Format& f : kFormats) {
    if (g_only.empty() || f.name == g_only || f.dtype == DType::kF16) formats.push_back(f);
  }
  const std::size_t kN = formats.size();
  std::vector<double> layer_seconds(kN, 0.0);
  std::printf("\n%-13s %-11s %9s %8s %9s\n", "format", "out x in", "MiB", "us/call", "GB/s");
  for (Shape s : kShapes) {
    std::vector<Weights> w;
    for (const Format& f : formats) w.push_back(make_weights(f, s, rng));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(n_tokens * s.in)), y(static_cast<std::size_t>(n_tokens * s.out));
    for (auto& v : x) v = normal(rng);
    std::vector<double> best(kN, 1e30);
    std::vector<std::size_t> next(kN, 0);
    for (int r = 0; r < reps; ++r) {
      for (std::size_t f = 0; f < kN; ++f) {
        // Ten calls per timing (a few ms): each on the next copy of the matrix.
        best[f] = std::min(best[f], seconds([&] {
                             for (int c = 0; c < 10; ++c) matmul(w[f].views[next[f]++ % w[f].views.size()], x, n_tokens, y, pool);
                           }) / 10);
      }
    }
    for (std::size_t f = 0; f < kN; ++f) {
      layer_seconds[f] += s.per_layer * best[f];
      std::printf("%-13s %5ldx%-5ld %9.2f %8.1f %9.2f\n", formats[f].name, static_cast<long>(s.out), static_cast<long>(s.in),
                  static_cast<double>(w[f].matrix_bytes) / (1 << 20), best[f] * 1e6,
                  static_cast<double>(w[f].matrix_bytes) / best[f] / 1e9);
    }
  }
  std::printf("\n%-13s %14s %12s\n", "format", "tok/s (22 L)", "vs f16");
  for (std::size_t f = 0; f < kN; ++f) {
    const double tok_s = static_cast<double>(n_tokens) / (kLayers * layer_seconds[f]);
    std::printf("%-13s %14.1f %12.2f\n", formats[f].name, tok_s, layer_seconds[0] / layer_seconds[f]);
  }
}

}  // namespace
}  // namespace peregrine

int main(int argc, char** argv) {
  int reps = 7;
  std::int64_t n_tokens = 1;
  std::vector<int> thread_counts = {1, 2};
  bool cpu_clock = false;
  for (int a = 1; a + 1 < argc; a += 2) {
    const std::string flag = argv[a];
    if (flag == "--reps") reps = std::max(1, std::atoi(argv[a + 1]));
    else if (flag == "--threads") thread_counts = {std::max(1, std::atoi(argv[a + 1]))};
    else if (flag == "--tokens") n_tokens = std::max(1, std::atoi(argv[a + 1]));
    else if (flag == "--clock") cpu_clock = std::string(argv[a + 1]) == "cpu";
    else if (flag == "--only") peregrine::g_only = argv[a + 1];
  }
  std::mt19937 rng(7);
  for (int threads : thread_counts) {
    peregrine::ThreadPool pool(threads);
    peregrine::g_cpu_clock_threads = cpu_clock ? threads : 0;
    std::printf("==== %d thread(s), %ld token(s) ====\n", threads, static_cast<long>(n_tokens));
    peregrine::bench(pool, reps, n_tokens, rng);
  }
  return 0;
}
