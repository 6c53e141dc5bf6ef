#include "kernels/cuda/attention.cuh"

#include <cuda_fp16.h>

#include <cfloat>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vector_load.cuh"

namespace peregrine::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kChunk = 256;      // slots scored per pass
constexpr int kMaxHeadDim = 256;

// q · k for one key row (q in shared memory): 16-byte loads of 8 values, all in flight, when
// head_dim is a multiple of 8 (rows then start 16-byte aligned), else value by value.
template <typename KT>
__device__ __forceinline__ float dot_key(const float* q, const KT* k, int hd) {
  float s = 0.0f;
  if (hd % 8 == 0) {
    for (int d = 0; d < hd; d += 8) {
      float kv[8];
      load8(k + d, kv);
      for (int e = 0; e < 8; ++e) s = fmaf(q[d + e], kv[e], s);
    }
  } else {
    for (int d = 0; d < hd; ++d) s = fmaf(q[d], to_float(k[d]), s);
  }
  return s;
}

// Block-wide reduction of one value (max or sum) through `red` (kThreads / 32 floats).
template <bool kMax>
__device__ float block_reduce(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  __syncthreads();  // red may still be read from the previous reduction
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float r = red[0];
  for (int k = 1; k < kThreads / 32; ++k) r = kMax ? fmaxf(r, red[k]) : r + red[k];
  return r;
}

template <typename KT>
__global__ void attention_kernel(const float* q, std::int64_t q_stride, PagedKv kv, AttentionDims dims, float* out) {
  __shared__ float qs[kMaxHeadDim];
  __shared__ float p[kChunk];
  __shared__ std::int64_t base[kChunk];  // element offset of each chunk slot's K/V row
  __shared__ float red[kThreads / 32];
  const std::int64_t row = blockIdx.y, h = blockIdx.x;
  const int hd = static_cast<int>(dims.head_dim);
  const std::int64_t kv_dim = dims.n_kv_heads * hd;
  const std::int64_t kvh = h / (dims.n_heads / dims.n_kv_heads);
  griddep_launch_dependents();
  griddep_wait();
  const float* qr = q + row * q_stride + h * hd;
  for (int d = threadIdx.x; d < hd; d += kThreads) qs[d] = qr[d];
  const auto* kc = static_cast<const KT*>(kv.k);
  const auto* vc = static_cast<const KT*>(kv.v);
  const std::int32_t* table = kv.tables + kv.table_offset[row];
  const std::int64_t last = kv.last_slot[row];
  const std::int64_t first = dims.window > 0 && last - dims.window + 1 > 0 ? last - dims.window + 1 : 0;
  float m = -FLT_MAX, l = 0.0f;
  float acc[kMaxHeadDim / kThreads] = {};
  __syncthreads();
  for (std::int64_t c0 = first; c0 <= last; c0 += kChunk) {
    const int cn = static_cast<int>(last - c0 + 1 < kChunk ? last - c0 + 1 : kChunk);
    float cmax = -FLT_MAX;
    for (int j = threadIdx.x; j < cn; j += kThreads) {  // a thread per slot
      const std::int64_t slot = c0 + j;
      const std::int64_t b = (static_cast<std::int64_t>(table[slot / kv.block_size]) * kv.block_size + slot % kv.block_size) * kv_dim + kvh * hd;
      float s = dot_key(qs, kc + b, hd) * dims.scale;
      if (dims.softcap > 0.0f) s = dims.softcap * tanhf(s / dims.softcap);
      base[j] = b;
      p[j] = s;
      cmax = fmaxf(cmax, s);
    }
    const float m_new = fmaxf(m, block_reduce<true>(cmax, red));
    const float alpha = expf(m - m_new);
    float csum = 0.0f;
    for (int j = threadIdx.x; j < cn; j += kThreads) {
      p[j] = expf(p[j] - m_new);
      csum += p[j];
    }
    l = l * alpha + block_reduce<false>(csum, red);  // its barriers also publish p and base
    for (int k = 0; k < kMaxHeadDim / kThreads; ++k) {
      const int d = threadIdx.x + k * kThreads;
      if (d >= hd) break;
      float a = acc[k] * alpha;
#pragma unroll 8
      for (int j = 0; j < cn; ++j) a = fmaf(p[j], to_float(vc[base[j] + d]), a);
      acc[k] = a;
    }
    m = m_new;
    __syncthreads();  // p and base are rewritten by the next chunk
  }
  for (int k = 0; k < kMaxHeadDim / kThreads; ++k) {
    const int d = threadIdx.x + k * kThreads;
    if (d < hd) out[(row * dims.n_heads + h) * hd + d] = acc[k] / l;
  }
}

}  // namespace

Status paged_attention(const float* q, std::int64_t q_stride, std::int64_t n, const PagedKv& kv, const AttentionDims& dims,
                       float* out, cudaStream_t stream) {
  if (dims.head_dim > kMaxHeadDim) {
    return invalid_argument("paged_attention: head_dim " + std::to_string(dims.head_dim) + " > " + std::to_string(kMaxHeadDim));
  }
  const dim3 grid(static_cast<unsigned>(dims.n_heads), static_cast<unsigned>(n));
  if (kv.dtype == DType::kF16) {
    return launch(attention_kernel<__half>, grid, kThreads, stream, "paged_attention", q, q_stride, kv, dims, out);
  }
  return launch(attention_kernel<float>, grid, kThreads, stream, "paged_attention", q, q_stride, kv, dims, out);
}

}  // namespace peregrine::cuda
