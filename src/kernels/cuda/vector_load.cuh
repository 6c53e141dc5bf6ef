// 16-byte vector loads of 8 values (f32, f16, bf16) widened to f32, shared by the GEMV and the
// attention kernel. Preconditions: the address is 16-byte aligned.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace peregrine::cuda {

// 8 weight values as loaded: one 16-byte vector for f16 / bf16, two for f32.
template <typename T>
struct Chunk {
  uint4 v[sizeof(T) / 2];
};

template <typename T>
__device__ __forceinline__ Chunk<T> load_chunk(const T* p) {
  Chunk<T> c;
  for (int k = 0; k < static_cast<int>(sizeof(T) / 2); ++k) c.v[k] = reinterpret_cast<const uint4*>(p)[k];
  return c;
}

__device__ __forceinline__ void widen(const Chunk<float>& c, float v[8]) {
  const auto* f = reinterpret_cast<const float*>(c.v);
  for (int k = 0; k < 8; ++k) v[k] = f[k];
}
__device__ __forceinline__ void widen(const Chunk<__half>& c, float v[8]) {
  const auto* h = reinterpret_cast<const __half2*>(c.v);
  for (int k = 0; k < 4; ++k) {
    const float2 f = __half22float2(h[k]);
    v[2 * k] = f.x;
    v[2 * k + 1] = f.y;
  }
}
__device__ __forceinline__ void widen(const Chunk<__nv_bfloat16>& c, float v[8]) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(c.v);
  for (int k = 0; k < 4; ++k) {
    const float2 f = __bfloat1622float2(h[k]);
    v[2 * k] = f.x;
    v[2 * k + 1] = f.y;
  }
}
/// One value widened to f32.
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

/// 8 values at p (16-byte aligned) widened to f32.
template <typename T>
__device__ __forceinline__ void load8(const T* p, float v[8]) {
  widen(load_chunk(p), v);
}

}  // namespace peregrine::cuda
