// The roofline probes return plausible figures (a sanity check, not a performance test).
#include "peregrine/tools/roofline.h"

#include <gtest/gtest.h>

#include <string>

namespace peregrine {
namespace {

TEST(Roofline, MeasuresPositiveBandwidthAndPeak) {
  ThreadPool pool(2);
  // 64 MiB still exceeds typical L2 and takes milliseconds; the CLI default is 512 MiB.
  const ReadBandwidth read = measure_read_bandwidth(pool, std::size_t{64} << 20, 2);
  EXPECT_GT(read.median, 0.1);
  EXPECT_LE(read.median, read.best);
  EXPECT_GT(read.sustained, 0.1);
  EXPECT_LE(read.sustained, read.best);
  EXPECT_LT(read.best, 10'000.0);  // 10 TB/s would mean the reads were optimized away
  const double gflops = measure_fma_peak(pool, 2);
  EXPECT_GT(gflops, 0.1);
  EXPECT_LT(gflops, 100'000.0);
}

TEST(Roofline, NamesTheSimdTarget) {
  ThreadPool pool(1);
  EXPECT_FALSE(std::string(measure_roofline(pool).simd_target).empty());
}

}  // namespace
}  // namespace peregrine
