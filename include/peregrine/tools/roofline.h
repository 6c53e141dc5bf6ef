// The machine's roofline: sustained memory read bandwidth and fp32 FMA peak, measured with the
// same SIMD target and thread pool the kernels use (Williams, Waterman & Patterson 2009,
// "Roofline: an insightful visual performance model"). Batch-1 decode is bound by the first
// (weight bytes per token), prefill by the second (FLOPs per token).
#pragma once

#include <cstddef>

#include "peregrine/core/thread_pool.h"

namespace peregrine {

/// A read-bandwidth measurement: the best of its samples (the ceiling), their median (what
/// reading at an ordinary moment of the run gets) and the fastest read method's median over the
/// rounds (what the best way of reading sustains, bursts left out), GB/s (1e9 bytes/s)
/// streaming reads from DRAM, all pool threads. median ≤ best and sustained ≤ best.
struct ReadBandwidth {
  double best = 0.0;
  double median = 0.0;
  double sustained = 0.0;
};

struct Roofline {
  ReadBandwidth read;            // measure_read_bandwidth's
  double fma_gflops = 0.0;       // GFLOP/s fp32 (an FMA counts 2 FLOPs), all pool threads; 0: not measured
  const char* simd_target = "";  // Highway target the measurement ran on, e.g. "AVX3_DL"
};

/// Read bandwidth as a ceiling: the best of `reps` rounds over several read methods — every
/// thread sums its share of a `bytes`-sized buffer (well above the last-level cache: default
/// 512 MiB) as 1, 2, 4 or 8 concurrent streams, with and without software prefetch — so that a
/// decode kernel reading its weights in any of these ways stays under it. The buffer is a
/// HugePageBuffer, as the model's weights are (2 MiB pages read faster than 4 KiB ones, which
/// the file mapping of an engine reading in place mostly has). Returns the best sample, the
/// median of all of them (every method, every round) and the highest of the methods' medians
/// over the rounds, in GB/s; zeros when the buffer cannot be
/// mapped. Allocates and touches the buffer first. A shared machine's bandwidth drifts over
/// minutes and jitters between samples milliseconds apart (the best is then a burst no
/// sustained read keeps up): compare figures measured in the same run.
ReadBandwidth measure_read_bandwidth(ThreadPool& pool, std::size_t bytes = std::size_t{512} << 20, int reps = 3);

/// Best of `reps` runs of register-resident independent FMA chains on every pool thread.
/// Returns GFLOP/s fp32.
double measure_fma_peak(ThreadPool& pool, int reps = 5);

/// Both measurements plus the SIMD target name (takes about a second).
Roofline measure_roofline(ThreadPool& pool);

}  // namespace peregrine
