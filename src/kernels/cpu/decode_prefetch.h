// The software prefetch of the single-token decode GEMVs: each thread streams its weights in
// order, and a hint kDecodePrefetchBytes ahead of the line being read keeps the stream's next
// lines in flight across the 4 KiB boundaries where the L2 hardware prefetcher starts over
// (also in 2 MiB pages). Measured on tinyllama decode, 2 threads (Xeon with AVX-512, 2026-11-28,
// same binary, alternated): F16 13.1-13.3 -> 13.9-14.5 tok/s at 1.5-2 KiB (3 KiB: 13.0; L2
// hint instead of L1: 14.2; non-temporal: 5.8), packed Q8_0 25.8 -> 26.8-27.3, packed Q4_0
// 45.0-45.3 -> 46.1-47.6 (3 KiB: 23.4 / 40.7, past the line fill buffers); on the Zen 5 of
// earlier sessions hints 1-8 KiB ahead neither helped nor hurt F16. With several tokens a group's
// compute outlasts its read and the kernels prefetch the next row group into L2 instead.
#pragma once

#include <cstddef>

namespace peregrine {

inline constexpr std::size_t kDecodePrefetchBytes = 2048;

/// Hints the `bytes` starting kDecodePrefetchBytes past `p` into L1, one per 64-byte line
/// (addresses past the weights' end are hints only, never dereferenced).
inline void prefetch_decode_stream(const void* p, std::size_t bytes) {
  const char* ahead = static_cast<const char*>(p) + kDecodePrefetchBytes;
  for (std::size_t line = 0; line < bytes; line += 64) __builtin_prefetch(ahead + line, 0, 3);
}

}  // namespace peregrine
