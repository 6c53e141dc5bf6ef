#include "peregrine/tools/roofline.h"

#include "peregrine/core/huge_page_buffer.h"
#include "peregrine/kernels/cpu/isa.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tools/roofline.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// Sum of x[0, n) read as S concurrent streams (one per 1/S of it: S = 1 is one sequential
/// stream, like a GEMV reading its rows in order; S = 4 like one reading four rows at once),
/// each with a software prefetch `ahead` bytes in front of it (0: none, the hardware
/// prefetchers alone).
template <std::size_t S>
float SumStreams(const float* HWY_RESTRICT x, std::size_t n, std::size_t ahead) {
  const hn::ScalableTag<float> d;
  const std::size_t N = hn::Lanes(d);
  const std::size_t len = n / S / N * N;  // stream length, whole vectors
  hn::Vec<decltype(d)> acc[S];
  for (std::size_t s = 0; s < S; ++s) acc[s] = hn::Zero(d);
  for (std::size_t i = 0; i < len; i += N) {
    for (std::size_t s = 0; s < S; ++s) {
      const float* p = x + s * len + i;
      if (ahead != 0 && i % (64 / sizeof(float)) == 0) hwy::Prefetch(reinterpret_cast<const char*>(p) + ahead);
      acc[s] = hn::Add(acc[s], hn::Load(d, p));
    }
  }
  for (std::size_t s = 1; s < S; ++s) acc[0] = hn::Add(acc[0], acc[s]);
  float sum = hn::GetLane(hn::SumOfLanes(d, acc[0]));
  for (std::size_t i = S * len; i < n; ++i) sum += x[i];
  return sum;
}

float SumStream(const float* HWY_RESTRICT x, std::size_t n, std::size_t streams, std::size_t ahead) {
  switch (streams) {
    case 1: return SumStreams<1>(x, n, ahead);
    case 2: return SumStreams<2>(x, n, ahead);
    case 4: return SumStreams<4>(x, n, ahead);
    default: return SumStreams<8>(x, n, ahead);
  }
}

/// `iters` rounds of 12 independent FMA chains (enough to cover FMA latency × pipes on current
/// x86 cores). Returns the FLOPs performed; `sink` defeats dead-code elimination.
double FmaChains(std::int64_t iters, float* sink) {
  const hn::ScalableTag<float> d;
  const auto m = hn::Set(d, 0.999999f), c = hn::Set(d, 1e-7f);
  // Distinct starting values, so the compiler cannot merge identical chains into one.
  auto a0 = hn::Set(d, 1.00f), a1 = hn::Set(d, 1.01f), a2 = hn::Set(d, 1.02f), a3 = hn::Set(d, 1.03f);
  auto a4 = hn::Set(d, 1.04f), a5 = hn::Set(d, 1.05f), a6 = hn::Set(d, 1.06f), a7 = hn::Set(d, 1.07f);
  auto a8 = hn::Set(d, 1.08f), a9 = hn::Set(d, 1.09f), a10 = hn::Set(d, 1.10f), a11 = hn::Set(d, 1.11f);
  for (std::int64_t i = 0; i < iters; ++i) {
    a0 = hn::MulAdd(a0, m, c); a1 = hn::MulAdd(a1, m, c); a2 = hn::MulAdd(a2, m, c);
    a3 = hn::MulAdd(a3, m, c); a4 = hn::MulAdd(a4, m, c); a5 = hn::MulAdd(a5, m, c);
    a6 = hn::MulAdd(a6, m, c); a7 = hn::MulAdd(a7, m, c); a8 = hn::MulAdd(a8, m, c);
    a9 = hn::MulAdd(a9, m, c); a10 = hn::MulAdd(a10, m, c); a11 = hn::MulAdd(a11, m, c);
  }
  auto s = hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)));
  s = hn::Add(s, hn::Add(hn::Add(a8, a9), hn::Add(a10, a11)));
  *sink += hn::GetLane(hn::SumOfLanes(d, s));
  return 2.0 * 12.0 * static_cast<double>(hn::Lanes(d)) * static_cast<double>(iters);
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {
HWY_EXPORT(SumStream);
HWY_EXPORT(FmaChains);

namespace {

// The ways a decode kernel may read its weights (streams per thread × software prefetch
// distance): the roofline takes the fastest, so that no kernel reading the same way beats it.
struct ReadMethod {
  std::size_t streams, ahead;
};
constexpr ReadMethod kReadMethods[] = {{1, 0}, {1, 4096}, {2, 0}, {2, 2048}, {4, 0}, {4, 4096}, {8, 0}, {8, 1024}};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The median of `v` (not empty): the middle value, or the mean of the two middle ones.
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t k = v.size();
  return k % 2 == 1 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2.0;
}

}  // namespace

ReadBandwidth measure_read_bandwidth(ThreadPool& pool, std::size_t bytes, int reps) {
  const std::size_t n = bytes / sizeof(float);
  auto pages = HugePageBuffer::allocate(n * sizeof(float));  // where LlamaModel keeps the weights
  if (!pages || reps < 1) return {};
  auto* const data = reinterpret_cast<float*>(pages->data());
  const std::int64_t n_chunks = pool.n_threads();
  const std::size_t per_chunk = n / static_cast<std::size_t>(n_chunks) / 64 * 64;
  std::vector<float> sums(static_cast<std::size_t>(n_chunks));
  pool.parallel_for(n_chunks, [&](std::int64_t b, std::int64_t e) {  // first touch, per thread
    std::fill(data + b * per_chunk, data + e * per_chunk, 1.0f);
  });
  const ThreadPool::WarmScope warm(pool);
  std::vector<std::vector<double>> by_method(std::size(kReadMethods));
  for (int r = 0; r < reps; ++r) {
    for (std::size_t k = 0; k < std::size(kReadMethods); ++k) {
      const ReadMethod& m = kReadMethods[k];
      const auto t0 = std::chrono::steady_clock::now();
      pool.parallel_for(n_chunks, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t c = b; c < e; ++c) {
          sums[static_cast<std::size_t>(c)] =
              HWY_DYNAMIC_DISPATCH(SumStream)(data + c * per_chunk, per_chunk, m.streams, m.ahead);
        }
      });
      const double bytes_read = static_cast<double>(per_chunk * sizeof(float)) * n_chunks;
      by_method[k].push_back(bytes_read / seconds_since(t0) / 1e9);
    }
  }
  std::vector<double> samples;
  double sustained = 0.0;
  for (const std::vector<double>& method : by_method) {
    samples.insert(samples.end(), method.begin(), method.end());
    sustained = std::max(sustained, median_of(method));
  }
  return {*std::max_element(samples.begin(), samples.end()), median_of(samples), sustained};
}

double measure_fma_peak(ThreadPool& pool, int reps) {
  constexpr std::int64_t kIters = 4'000'000;
  std::vector<float> sink(static_cast<std::size_t>(pool.n_threads()));
  std::vector<double> flops(sink.size());
  double best = 0.0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(pool.n_threads(), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t t = b; t < e; ++t) {
        const auto i = static_cast<std::size_t>(t);
        flops[i] = HWY_DYNAMIC_DISPATCH(FmaChains)(kIters, &sink[i]);
      }
    });
    double total = 0.0;
    for (double f : flops) total += f;
    best = std::max(best, total / seconds_since(t0) / 1e9);
  }
  return best;
}

Roofline measure_roofline(ThreadPool& pool) {
  Roofline r;
  r.read = measure_read_bandwidth(pool);
  r.fma_gflops = measure_fma_peak(pool);
  r.simd_target = isa_target_name();
  return r;
}

}  // namespace peregrine
#endif  // HWY_ONCE
