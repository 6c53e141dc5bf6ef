// Micro-benchmark of matmul on Q8_0 / Q4_0 weights: the integer-dot kernels (gemm_quant, via
// matmul) against the scalar dequantize-a-row-then-f32-dot path they replaced, measured in the
// same run, back to back, on tinyllama-1.1B matrix shapes.
//
//   gemm_quant_bench [THREADS=2] [REPS=5]
//
// Decode (GEMV, 1 token): GB/s of weight bytes read per product. The weights cycle through
// enough copies (>= 256 MiB) that every product reads them from DRAM, as a model's decode does.
// Prefill (GEMM, 128 tokens × [5632 x 2048]): GOP/s = 2·tokens·out·in / seconds.
// Old and new alternate, REPS timed products each (after one warm-up); lines report the best
// (least disturbed: other processes share these 2 cores) and the median. "read" is the best
// plain read bandwidth of the same threads over the same bytes, measured in between.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/fp16.h"

namespace peregrine {
namespace {

// The pre-gemm_quant kernel for block-quantized weights (src/kernels/cpu/matmul/matmul.cpp at commit
// 988e0b1): each weight row dequantized to f32 once, then a scalar f32 dot per token.
void old_matmul(const TensorView& w, const float* x, std::int64_t n_tokens, float* y, ThreadPool& pool) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  const std::size_t row_bytes = w.nbytes / static_cast<std::size_t>(out);
  pool.parallel_for(out, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> row(static_cast<std::size_t>(in));
    for (std::int64_t o = begin; o < end; ++o) {
      dequantize(w.dtype, static_cast<const std::uint8_t*>(w.data) + o * row_bytes, row);
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        float s = 0.0f;
        for (std::int64_t i = 0; i < in; ++i) s += row[static_cast<std::size_t>(i)] * x[t * in + i];
        y[t * out + o] = s;
      }
    }
  });
}

struct Matrix {
  std::vector<std::uint8_t> bytes;  // `copies` consecutive copies of one [out, in] matrix
  std::size_t matrix_bytes = 0;
  int copies = 1;
  TensorView view(DType t, std::int64_t out, std::int64_t in, int copy) const {
    return TensorView{"w", t, {out, in}, bytes.data() + static_cast<std::size_t>(copy) * matrix_bytes, matrix_bytes};
  }
};

Matrix random_matrix(DType t, std::int64_t out, std::int64_t in, std::size_t min_total, std::mt19937& rng) {
  Matrix m;
  const std::size_t block_bytes = dtype_block_bytes(t);
  m.matrix_bytes = static_cast<std::size_t>(out * in / 32) * block_bytes;
  m.copies = static_cast<int>(std::max<std::size_t>(1, (min_total + m.matrix_bytes - 1) / m.matrix_bytes));
  m.bytes.resize(m.matrix_bytes * static_cast<std::size_t>(m.copies));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : m.bytes) b = static_cast<std::uint8_t>(byte(rng));
  const std::uint16_t d = f32_to_f16(0.01f);
  for (std::size_t at = 0; at < m.bytes.size(); at += block_bytes) std::memcpy(&m.bytes[at], &d, 2);
  return m;
}

double seconds(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Read bandwidth now (GB/s): the threads sum disjoint parts of `bytes` (a baseline for the
// GEMV numbers, measured in the same run since other processes share the memory system).
double read_seconds(const std::vector<std::uint8_t>& bytes, ThreadPool& pool) {
  const std::int64_t words = static_cast<std::int64_t>(bytes.size() / 8);
  std::vector<std::uint64_t> sums(static_cast<std::size_t>(words));
  return seconds([&] {
    pool.parallel_for(words, [&](std::int64_t begin, std::int64_t end) {
      std::uint64_t sum = 0;
      for (std::int64_t i = begin; i < end; ++i) {
        std::uint64_t v;
        std::memcpy(&v, &bytes[static_cast<std::size_t>(i) * 8], 8);
        sum += v;
      }
      sums[static_cast<std::size_t>(begin)] = sum;
    });
  });
}

struct Timing {
  std::vector<double> s;  // sorted seconds
  double best() const { return s.front(); }
  double median() const { return s[s.size() / 2]; }
};

struct Timings {
  Timing old_kernel, new_kernel, read;
};

// Seconds per product of the old and the new kernel (and of a plain read of the matrix bytes),
// alternating, after one warm-up each.
Timings time_kernels(const Matrix& m, DType t, std::int64_t out, std::int64_t in,
                     std::int64_t n_tokens, int reps, ThreadPool& pool) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n_tokens * in)), y(static_cast<std::size_t>(n_tokens * out));
  for (auto& v : x) v = normal(rng);
  Timings result;
  int copy = 0;
  for (int r = -1; r < reps; ++r) {
    const TensorView w_old = m.view(t, out, in, copy++ % m.copies);
    const double o = seconds([&] { old_matmul(w_old, x.data(), n_tokens, y.data(), pool); });
    const TensorView w_new = m.view(t, out, in, copy++ % m.copies);
    const double n = seconds([&] { matmul(w_new, x, n_tokens, y, pool); });
    const double rd = read_seconds(m.bytes, pool) / m.copies;
    if (r >= 0) {
      result.old_kernel.s.push_back(o);
      result.new_kernel.s.push_back(n);
      result.read.s.push_back(rd);
    }
  }
  for (Timing* tm : {&result.old_kernel, &result.new_kernel, &result.read}) std::sort(tm->s.begin(), tm->s.end());
  return result;
}

}  // namespace
}  // namespace peregrine

int main(int argc, char** argv) {
  using namespace peregrine;
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  ThreadPool pool(threads);
  std::mt19937 rng(0);
  std::printf("threads=%d reps=%d\n", threads, reps);
  struct Shape {
    std::int64_t out, in;
  };
  for (DType t : {DType::kQ4_0, DType::kQ8_0}) {
    const char* name = dtype_name(t).data();
    for (Shape s : {Shape{2048, 2048}, Shape{5632, 2048}, Shape{2048, 5632}, Shape{32000, 2048}}) {
      const Matrix m = random_matrix(t, s.out, s.in, std::size_t{256} << 20, rng);
      const Timings tm = time_kernels(m, t, s.out, s.in, 1, reps, pool);
      const double gb = static_cast<double>(m.matrix_bytes) * 1e-9;
      std::printf("GEMV %s %5ldx%-5ld GB/s best: old %5.2f new %5.2f (%4.1fx, %3.0f%% of read %5.2f)"
                  "  median: old %5.2f new %5.2f (%4.1fx)\n",
                  name, static_cast<long>(s.out), static_cast<long>(s.in), gb / tm.old_kernel.best(),
                  gb / tm.new_kernel.best(), tm.old_kernel.best() / tm.new_kernel.best(),
                  100.0 * tm.read.best() / tm.new_kernel.best(), gb / tm.read.best(), gb / tm.old_kernel.median(),
                  gb / tm.new_kernel.median(), tm.old_kernel.median() / tm.new_kernel.median());
    }
    const std::int64_t tokens = 128, out = 5632, in = 2048;
    const Matrix m = random_matrix(t, out, in, 0, rng);
    const Timings tm = time_kernels(m, t, out, in, tokens, reps, pool);
    const double gop = 2.0 * static_cast<double>(tokens * out * in) * 1e-9;
    std::printf("GEMM %s [%ld x %ld]·[%ld x %ld]ᵀ GOP/s best: old %5.1f new %5.1f (%4.1fx)"
                "  median: old %5.1f new %5.1f (%4.1fx)\n",
                name, static_cast<long>(tokens), static_cast<long>(in), static_cast<long>(out),
                static_cast<long>(in), gop / tm.old_kernel.best(), gop / tm.new_kernel.best(),
                tm.old_kernel.best() / tm.new_kernel.best(), gop / tm.old_kernel.median(),
                gop / tm.new_kernel.median(), tm.old_kernel.median() / tm.new_kernel.median());
  }
  return 0;
}
