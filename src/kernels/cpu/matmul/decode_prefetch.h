// The software prefetch of the single-token decode GEMVs: each stream of weights a thread reads
// in order gets a hint kDecodePrefetchBytes ahead of the line being read, which keeps its next
// lines in flight across the 4 KiB boundaries where the L2 hardware prefetcher starts over (also
// in 2 MiB pages). Measured on tinyllama decode, 2 threads (Xeon with AVX-512, 2026-11-28, same
// binary, alternated; distances set through a test-only variable): F16 13.1-13.3 -> 13.9-14.5
// tok/s at 1.5-2 KiB (3 KiB: 13.0; L2 hint instead of L1: 14.2; non-temporal: 5.8), packed Q8_0
// 25.8 -> 26.8-27.3, packed Q4_0 45.0-45.3 -> 46.1-47.6 (3 KiB: 23.4 / 40.7). With 4 streams per
// thread (kDecodeStreams) 2 KiB stays best for F16 (512 B: 12.4-12.6, no better than none). On
// the Zen 5 of earlier sessions hints 1-8 KiB ahead neither helped nor hurt F16. With several
// tokens a group's compute outlasts its read and the kernels prefetch the next row group into L2
// instead.
#pragma once

#include <cstddef>
#include <utility>

#include "kernels/cpu/count_dispatch.h"

namespace peregrine {

inline constexpr std::size_t kDecodePrefetchBytes = 2048;

/// Read streams per thread of a single-token decode GEMV: each thread's row groups cut into this
/// many contiguous parts that it walks side by side, each part prefetched kDecodePrefetchBytes
/// ahead. One stream per thread left a Xeon core short of its share of the bandwidth (each core
/// reads at most about half the 2-thread roofline, and one stream per core did not keep enough
/// lines in flight). tinyllama decode, 2 threads, alternated twice with the build before (one
/// stream per thread), 2026-11-28, tok/s: F16 13.64 / 13.63 -> 15.24 / 14.83 (its hint had been
/// compiled away), Q4_0 46.46 / 46.78 -> 53.11 / 51.92, Q8_0 27.10 / 26.96 -> 27.62 / 28.00, BF16
/// (dot-product GEMV) 15.32 / 14.84 -> 15.08 / 15.09.
inline constexpr int kDecodeStreams = 4;

/// Row groups [g0, g1) as kStreams read streams (kDecodeStreams for single-token decode;
/// half_packed's multi-token passes take 2): the range cut into kStreams contiguous parts of
/// `part` groups walked side by side, tile.template operator()<kStreams>(g, part) reading groups
/// g, g + part, g + 2·part, …; the r < kStreams groups left over side by side too, as r streams
/// of one group each: tile.template operator()<r>(g, 1). (The guided split's last ranges are a
/// few groups each; read one at a time they cost, on tinyllama decode, 2 threads, a Xeon VM,
/// 2026-11-28, alternated twice, tok/s: F16 14.46 / 14.27 -> 14.79 / 14.62, Q4_0 51.3 / 50.1 ->
/// 52.6 / 50.9, Q8_0 26.3 / 26.6 -> 26.3 / 26.9, BF16 13.97 / 13.96 -> 14.25 / 14.09.)
template <int kStreams = kDecodeStreams, class Index, class Tile>
inline void for_decode_streams(Index g0, Index g1, Tile&& tile) {
  const Index part = (g1 - g0) / kStreams;
  for (Index k = 0; k < part; ++k) tile.template operator()<kStreams>(g0 + k, part);
  const Index g = g0 + part * kStreams, left = g1 - g;
  if constexpr (kStreams > 1) dispatch_count<1, kStreams - 1>(left, [&]<int r>() { tile.template operator()<r>(g, 1); });
}

/// Hints the 64-byte line at `line` into L1 (never dereferenced). On x86 an inline-assembly
/// prefetcht0: GCC 12 deletes __builtin_prefetch calls, which it counts as free of side effects,
/// from some kernels they are inlined into (half_packed's single-token hint was missing from the
/// binary until 2026-11-28, and an unrolled form lost the Q8_0 kernel's too).
inline void prefetch_line_l1(const char* line) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*line));
#else
  __builtin_prefetch(line, 0, 3);
#endif
}

/// Hints the 64-byte line at `line` into L2 (prefetcht1; never dereferenced), for the same reason
/// in inline assembly as prefetch_line_l1.
inline void prefetch_line_l2(const char* line) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht1 %0" : : "m"(*line));
#else
  __builtin_prefetch(line, 0, 2);
#endif
}

/// Hints the kBytes starting kDecodePrefetchBytes past `p` into L1, one per 64-byte line
/// (addresses past the weights' end are hints only, never dereferenced).
template <std::size_t kBytes>
inline void prefetch_decode_stream(const void* p) {
  const char* ahead = static_cast<const char*>(p) + kDecodePrefetchBytes;
  [&]<std::size_t... kLine>(std::index_sequence<kLine...>) {
    (prefetch_line_l1(ahead + kLine * 64), ...);
  }(std::make_index_sequence<(kBytes + 63) / 64>());
}

}  // namespace peregrine
