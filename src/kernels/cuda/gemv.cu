#include "kernels/cuda/gemv.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vector_load.cuh"

namespace peregrine::cuda {
namespace {

constexpr int kThreads = 128;  // a thread block per output row, its threads across the columns

__device__ __forceinline__ void load_x8(const float* p, bool vec, float v[8]) {
  if (vec) {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
  } else {
    for (int k = 0; k < 8; ++k) v[k] = p[k];
  }
}

// Reduces acc[i][t] over the thread block; thread 0 applies the epilogue to output row `row`.
template <int kR, int NT, Epilogue E>
__device__ __forceinline__ void finish(float (&acc)[kR][NT], std::int64_t row, float* y, std::int64_t ldy) {
  __shared__ float partial[kR][NT][kThreads / 32];
  for (int i = 0; i < kR; ++i) {
    for (int t = 0; t < NT; ++t) {
      for (int o = 16; o > 0; o >>= 1) acc[i][t] += __shfl_xor_sync(0xffffffffu, acc[i][t], o);
      if (threadIdx.x % 32 == 0) partial[i][t][threadIdx.x / 32] = acc[i][t];
    }
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int t = 0; t < NT; ++t) {
    float sum[kR];
    for (int i = 0; i < kR; ++i) {
      sum[i] = 0.0f;
      for (int w = 0; w < kThreads / 32; ++w) sum[i] += partial[i][t][w];
    }
    float* out = y + t * ldy + row;
    if constexpr (E == Epilogue::kSwiGlu) {
      *out = sum[0] / (1.0f + expf(-sum[0])) * sum[kR - 1];
    } else if constexpr (E == Epilogue::kAccumulate) {
      *out += sum[0];
    } else {
      *out = sum[0];
    }
  }
}

// Float weights. A block computes kR weight rows (row, row + row_step, ...): each thread takes 8
// consecutive values per kThreads·8-wide step and holds kU steps of loads in flight.
template <typename T, int NT, int kR, Epilogue E>
__global__ void gemv_float_kernel(const T* w, std::int64_t stride, std::int64_t rows, std::int64_t cols,
                                  std::int64_t row_step, const float* x, float* y, std::int64_t ldy) {
  constexpr int kU = kR == 1 ? 4 : 2;
  constexpr std::int64_t kStep = kThreads * 8;
  const std::int64_t row = blockIdx.x;
  const int tid = threadIdx.x;
  const std::int64_t body = cols & ~std::int64_t{7};
  const bool vec_x = cols % 4 == 0;
  float acc[kR][NT] = {};
  Chunk<T> c[kR][kU];
  auto load_step = [&](std::int64_t j0) {
    for (int u = 0; u < kU; ++u) {
      const std::int64_t j = j0 + u * kStep;
      for (int i = 0; i < kR; ++i) {
        if (j < body) c[i][u] = load_chunk(w + (row + i * row_step) * stride + j);
      }
    }
  };
  load_step(tid * 8);  // weights: no earlier kernel writes them
  griddep_launch_dependents();
  griddep_wait();
  for (std::int64_t j0 = tid * 8; j0 < body; j0 += kU * kStep) {
    if (j0 != tid * 8) load_step(j0);
    for (int u = 0; u < kU; ++u) {
      const std::int64_t j = j0 + u * kStep;
      if (j >= body) break;
      float wv[kR][8];
      for (int i = 0; i < kR; ++i) widen(c[i][u], wv[i]);
      for (int t = 0; t < NT; ++t) {
        float xv[8];
        load_x8(x + t * cols + j, vec_x, xv);
        for (int i = 0; i < kR; ++i) {
          for (int k = 0; k < 8; ++k) acc[i][t] = fmaf(wv[i][k], xv[k], acc[i][t]);
        }
      }
    }
  }
  if (body + tid < cols) {
    for (int i = 0; i < kR; ++i) {
      const float wv = to_float(w[(row + i * row_step) * stride + body + tid]);
      for (int t = 0; t < NT; ++t) acc[i][t] = fmaf(wv, x[t * cols + body + tid], acc[i][t]);
    }
  }
  finish<kR, NT, E>(acc, row, y, ldy);
}

// Q8_0 / Q4_0 weights against Q8_0 activations: each thread takes one block of 32 per step and
// holds kU blocks per weight row in flight.
template <bool kQ4, int NT, int kR, Epilogue E>
__global__ void gemv_q_kernel(const std::uint8_t* codes, const __half* scales, std::int64_t rows, std::int64_t nb,
                              std::int64_t row_step, Q8Activations xq, float* y, std::int64_t ldy) {
  constexpr int kU = 2, kWords = kQ4 ? 4 : 8;  // int32 words of codes per block
  const std::int64_t row = blockIdx.x;
  const int tid = threadIdx.x;
  float acc[kR][NT] = {};
  int wq[kR][kU][kWords];
  float dw[kR][kU];
  auto load_step = [&](std::int64_t b0) {
    for (int u = 0; u < kU; ++u) {
      const std::int64_t b = b0 + u * kThreads;
      for (int i = 0; i < kR; ++i) {
        if (b >= nb) continue;
        const std::int64_t blk = (row + i * row_step) * nb + b;
        const auto* p = reinterpret_cast<const int4*>(codes + blk * kWords * 4);
        for (int k = 0; k < kWords / 4; ++k) {
          const int4 v = p[k];
          wq[i][u][4 * k] = v.x; wq[i][u][4 * k + 1] = v.y; wq[i][u][4 * k + 2] = v.z; wq[i][u][4 * k + 3] = v.w;
        }
        dw[i][u] = __half2float(scales[blk]);
      }
    }
  };
  load_step(tid);
  griddep_launch_dependents();
  griddep_wait();
  for (std::int64_t b0 = tid; b0 < nb; b0 += kU * kThreads) {
    if (b0 != tid) load_step(b0);
    for (int u = 0; u < kU; ++u) {
      const std::int64_t b = b0 + u * kThreads;
      if (b >= nb) break;
      for (int t = 0; t < NT; ++t) {
        const std::int64_t xb = t * nb + b;
        const auto* xp = reinterpret_cast<const int4*>(xq.q + xb * 32);
        const int4 x0 = xp[0], x1 = xp[1];
        const int xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
        const float dx = xq.d[xb];
        for (int i = 0; i < kR; ++i) {
          int sumi = 0;
          if constexpr (kQ4) {
            for (int k = 0; k < 4; ++k) {
              sumi = __dp4a(wq[i][u][k] & 0x0F0F0F0F, xv[k], sumi);             // values 4k .. 4k+3
              sumi = __dp4a((wq[i][u][k] >> 4) & 0x0F0F0F0F, xv[4 + k], sumi);  // values 16+4k ..
            }
            sumi -= 8 * xq.sum[xb];
          } else {
            for (int k = 0; k < 8; ++k) sumi = __dp4a(wq[i][u][k], xv[k], sumi);
          }
          acc[i][t] = fmaf(dw[i][u] * dx, static_cast<float>(sumi), acc[i][t]);
        }
      }
    }
  }
  finish<kR, NT, E>(acc, row, y, ldy);
}

template <int NT, int kR, Epilogue E>
Status launch_format(const DeviceMatrix& w, const float* x, const Q8Activations& xq, const GemvOutput& o, cudaStream_t s) {
  const std::int64_t rows = w.rows / kR, step = kR == 1 ? 0 : rows;
  const dim3 grid(static_cast<unsigned>(rows)), block(kThreads);
  const auto* codes = static_cast<const std::uint8_t*>(w.data);
  switch (w.format) {
    case MatrixFormat::kF32:
      return launch(gemv_float_kernel<float, NT, kR, E>, grid, block, s, "gemv", static_cast<const float*>(w.data), w.stride,
                    rows, w.cols, step, x, o.y, o.ldy);
    case MatrixFormat::kF16:
      return launch(gemv_float_kernel<__half, NT, kR, E>, grid, block, s, "gemv", static_cast<const __half*>(w.data), w.stride,
                    rows, w.cols, step, x, o.y, o.ldy);
    case MatrixFormat::kBF16:
      return launch(gemv_float_kernel<__nv_bfloat16, NT, kR, E>, grid, block, s, "gemv",
                    static_cast<const __nv_bfloat16*>(w.data), w.stride, rows, w.cols, step, x, o.y, o.ldy);
    case MatrixFormat::kQ8_0:
      return launch(gemv_q_kernel<false, NT, kR, E>, grid, block, s, "gemv", codes, w.scales, rows, w.cols / 32, step, xq, o.y, o.ldy);
    case MatrixFormat::kQ4_0:
      return launch(gemv_q_kernel<true, NT, kR, E>, grid, block, s, "gemv", codes, w.scales, rows, w.cols / 32, step, xq, o.y, o.ldy);
  }
  return invalid_argument("gemv: unknown matrix format");
}

template <int NT>
Status launch_tokens(const DeviceMatrix& w, const float* x, const Q8Activations& xq, const GemvOutput& o, cudaStream_t s) {
  switch (o.epilogue) {
    case Epilogue::kStore: return launch_format<NT, 1, Epilogue::kStore>(w, x, xq, o, s);
    case Epilogue::kAccumulate: return launch_format<NT, 1, Epilogue::kAccumulate>(w, x, xq, o, s);
    case Epilogue::kSwiGlu: return launch_format<NT, 2, Epilogue::kSwiGlu>(w, x, xq, o, s);
  }
  return invalid_argument("gemv: unknown epilogue");
}

}  // namespace

Status gemv(const DeviceMatrix& w, const float* x, const Q8Activations& xq, int n, const GemvOutput& out,
            cudaStream_t stream) {
  if (out.epilogue == Epilogue::kSwiGlu && w.rows % 2 != 0) return invalid_argument("gemv: SwiGLU needs [gate; up] rows");
  switch (n) {
    case 1: return launch_tokens<1>(w, x, xq, out, stream);
    case 2: return launch_tokens<2>(w, x, xq, out, stream);
    case 3: return launch_tokens<3>(w, x, xq, out, stream);
    case 4: return launch_tokens<4>(w, x, xq, out, stream);
    case 5: return launch_tokens<5>(w, x, xq, out, stream);
    case 6: return launch_tokens<6>(w, x, xq, out, stream);
    case 7: return launch_tokens<7>(w, x, xq, out, stream);
    case 8: return launch_tokens<8>(w, x, xq, out, stream);
    default: return invalid_argument("gemv: " + std::to_string(n) + " activation rows (1 to 8)");
  }
}

}  // namespace peregrine::cuda
