#include "kernels/cuda/rope_kv.cuh"

#include <cuda_fp16.h>

#include "kernels/cuda/launch.cuh"

namespace peregrine::cuda {
namespace {

constexpr int kThreads = 128;

__device__ inline void store(float* p, float v) { *p = v; }
__device__ inline void store(__half* p, float v) { *p = __float2half_rn(v); }

template <typename KT>
__global__ void rope_kv_kernel(float* qkv, const float* cos, const float* sin, int n_heads, int n_kv_heads, int head_dim,
                               bool neox, const std::int32_t* write_row, KT* k_cache, KT* v_cache) {
  griddep_launch_dependents();
  griddep_wait();
  const std::int64_t row = blockIdx.x;
  const int half = head_dim / 2, kv_dim = n_kv_heads * head_dim, q_dim = n_heads * head_dim;
  float* q = qkv + row * (q_dim + 2 * kv_dim);
  const float* k = q + q_dim;
  const float* v = k + kv_dim;
  const float* c = cos + row * head_dim;
  const float* s = sin + row * head_dim;
  const std::int64_t dst = static_cast<std::int64_t>(write_row[row]) * kv_dim;
  for (int p = threadIdx.x; p < (n_heads + n_kv_heads) * half; p += kThreads) {
    const int head = p / half, i = p % half;
    const int ia = neox ? i : 2 * i, ib = neox ? i + half : 2 * i + 1;
    if (head < n_heads) {
      float* x = q + head * head_dim;
      const float a = x[ia], b = x[ib];
      x[ia] = a * c[ia] + b * s[ia];
      x[ib] = b * c[ib] + a * s[ib];
    } else {
      const int kh = head - n_heads;
      const float* x = k + kh * head_dim;
      const float a = x[ia], b = x[ib];
      store(&k_cache[dst + kh * head_dim + ia], a * c[ia] + b * s[ia]);
      store(&k_cache[dst + kh * head_dim + ib], b * c[ib] + a * s[ib]);
    }
  }
  for (int j = threadIdx.x; j < kv_dim; j += kThreads) store(&v_cache[dst + j], v[j]);
}

}  // namespace

Status rope_and_write_kv(float* qkv, const float* cos, const float* sin, std::int64_t n, std::int64_t n_heads,
                         std::int64_t n_kv_heads, std::int64_t head_dim, RopeStyle style, const std::int32_t* write_row,
                         DType kv_dtype, void* k_cache, void* v_cache, cudaStream_t stream) {
  const bool neox = style == RopeStyle::kNeox;
  const auto nh = static_cast<int>(n_heads), nkv = static_cast<int>(n_kv_heads), hd = static_cast<int>(head_dim);
  const auto grid = static_cast<unsigned>(n);
  if (kv_dtype == DType::kF16) {
    return launch(rope_kv_kernel<__half>, grid, kThreads, stream, "rope_and_write_kv", qkv, cos, sin, nh, nkv, hd, neox,
                  write_row, static_cast<__half*>(k_cache), static_cast<__half*>(v_cache));
  }
  return launch(rope_kv_kernel<float>, grid, kThreads, stream, "rope_and_write_kv", qkv, cos, sin, nh, nkv, hd, neox, write_row,
                static_cast<float*>(k_cache), static_cast<float*>(v_cache));
}

}  // namespace peregrine::cuda
