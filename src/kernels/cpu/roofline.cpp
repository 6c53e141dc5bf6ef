#include "peregrine/kernels/cpu/roofline.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/roofline.cpp"
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

/// Sum of x[0, n) read as four concurrent streams (one per quarter, like a GEMV reading four
/// weight rows at once), each prefetched 4 KiB ahead: hardware prefetchers stop at page
/// boundaries, and one stream per core leaves DRAM bandwidth unused (measured: ~30 vs ~45 GB/s).
float SumStream(const float* HWY_RESTRICT x, std::size_t n) {
  const hn::ScalableTag<float> d;
  const std::size_t N = hn::Lanes(d);
  const std::size_t q = n / 4 / N * N;  // stream length, whole vectors
  const float* s0 = x;
  const float* s1 = x + q;
  const float* s2 = x + 2 * q;
  const float* s3 = x + 3 * q;
  constexpr std::size_t kAhead = 4096 / sizeof(float);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  for (std::size_t i = 0; i < q; i += N) {
    if (i % (64 / sizeof(float)) == 0) {
      hwy::Prefetch(s0 + i + kAhead);
      hwy::Prefetch(s1 + i + kAhead);
      hwy::Prefetch(s2 + i + kAhead);
      hwy::Prefetch(s3 + i + kAhead);
    }
    a0 = hn::Add(a0, hn::Load(d, s0 + i));
    a1 = hn::Add(a1, hn::Load(d, s1 + i));
    a2 = hn::Add(a2, hn::Load(d, s2 + i));
    a3 = hn::Add(a3, hn::Load(d, s3 + i));
  }
  float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (std::size_t i = 4 * q; i < n; ++i) s += x[i];
  return s;
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

/// The Highway target this copy of the code was compiled for.
std::int64_t CompiledTarget() { return HWY_TARGET; }

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {
HWY_EXPORT(SumStream);
HWY_EXPORT(FmaChains);
HWY_EXPORT(CompiledTarget);

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

double measure_read_bandwidth(ThreadPool& pool, std::size_t bytes, int reps) {
  const std::size_t n = bytes / sizeof(float);
  auto buf = hwy::AllocateAligned<float>(n);
  const std::int64_t n_chunks = pool.n_threads();
  const std::size_t per_chunk = n / static_cast<std::size_t>(n_chunks) / 64 * 64;
  std::vector<float> sums(static_cast<std::size_t>(n_chunks));
  pool.parallel_for(n_chunks, [&](std::int64_t b, std::int64_t e) {  // first touch, per thread
    std::fill(buf.get() + b * per_chunk, buf.get() + e * per_chunk, 1.0f);
  });
  double best = 0.0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n_chunks, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t c = b; c < e; ++c) {
        sums[static_cast<std::size_t>(c)] =
            HWY_DYNAMIC_DISPATCH(SumStream)(buf.get() + c * per_chunk, per_chunk);
      }
    });
    const double bytes_read = static_cast<double>(per_chunk * sizeof(float)) * n_chunks;
    best = std::max(best, bytes_read / seconds_since(t0) / 1e9);
  }
  return best;
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
  r.read_gbps = measure_read_bandwidth(pool);
  r.fma_gflops = measure_fma_peak(pool);
  r.simd_target = hwy::TargetName(HWY_DYNAMIC_DISPATCH(CompiledTarget)());
  return r;
}

}  // namespace peregrine
#endif  // HWY_ONCE
