// The CUDA backend (issue #23, part 1): the Llama-family decoder's layers run on one NVIDIA GPU
// with the weights and the K/V resident in device memory. LlamaModel::forward keeps everything
// that is not arithmetic on the host — batch validation, the KV slots and block reservation in
// the paged KvCache, the embedding lookup and the RoPE cos/sin tables (kernels/cpu's
// rope_table, so every RoPE scaling applies unchanged) — and hands this class one call per
// forward. The K/V live on the GPU in the host cache's layout ([n_layers, K|V, n_blocks,
// block_size, kv_dim], f32 or f16), addressed through the host cache's block tables.
//
// Kernels (kernels/cuda/): matrices with 8 or fewer rows of activations (decode, small batches)
// go through our dequantizing GEMV — F32/F16/BF16 rows, Q8_0 and Q4_0 repacked at load into
// 16-byte-aligned codes + f16 scales and multiplied against Q8_0-quantized activations with
// __dp4a, as the CPU engine and llama.cpp's MMVQ do — and larger ones through cuBLAS (F16/BF16/
// F32 weights as stored; quantized ones dequantized to an F16 scratch first); RMSNorm, RoPE +
// K/V write, SwiGLU and the residual add are one kernel each; attention is one kernel for
// prefill and decode (a thread block per query row and head, online softmax over chunks of the
// sequence's paged K/V, Milakov & Gimelshein 2018). A forward of 8 or fewer rows is captured
// once per (rows, logits rows, layers) as a CUDA Graph and replayed.
//
// Part 1 serves the dense Llama family with SwiGLU: no MoE, Q/K/V biases, Q/K norms, post
// norms, soft-caps, Hadamard-rotated FFNs, token trees or calibration observers (create / the
// forward refuse them with kUnsupported). Weight dtypes other than F32/F16/BF16/Q8_0/Q4_0 are
// decoded to F16 at load. KvCache::fork / attach_prefix / compact copy host rows only, so a
// cache used here must not share blocks (generate and bench do not).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/kv/kv_cache.h"

namespace peregrine {

/// Whether this build has the CUDA backend and a CUDA device is usable. On false, `why` (if
/// given) says which: "built without CUDA (PEREGRINE_CUDA=OFF)" or the runtime's error.
bool cuda_device_available(std::string* why = nullptr);

/// One forward's rows as the host laid them out (LlamaModel::forward after reserve).
struct CudaForwardRows {
  std::int64_t n = 0;                     // rows
  std::span<const float> x;               // [n, dim] f32 embeddings (× embed_scale)
  std::span<const float> rope_cos;        // [n, head_dim] f32 (kernels/cpu rope_table)
  std::span<const float> rope_sin;        // [n, head_dim]
  std::span<const std::int32_t> slot;     // [n] the row's KV slot in its sequence; it attends to slots [0, slot]
  std::span<const std::int32_t> table_offset;  // [n] where the row's block table starts in `tables`
  std::span<const std::int32_t> tables;   // the sequences' block tables, concatenated
  std::span<const std::int32_t> logit_rows;  // rows whose logits are wanted, increasing
};

/// The host weights CudaForward::create uploads: per layer the seven matrices ({out, in}, any
/// dtype) and the two RMSNorm weights [dim] f32 (norm_weight_offset already added).
struct CudaLayerWeights {
  const TensorView *wq, *wk, *wv, *wo, *w_gate, *w_up, *w_down;
  std::span<const float> attn_norm, ffn_norm;
};
struct CudaModelWeights {
  std::vector<CudaLayerWeights> layers;
  const TensorView* output = nullptr;     // LM head [vocab, dim]
  std::span<const float> output_norm;     // [dim]
};

/// The GPU forward of one model. Its implementation lives in the CUDA backend library,
/// libperegrine_cuda.so (built beside the executables where nvcc is found), which this
/// process loads on first use (dlopen; $PEREGRINE_CUDA_LIBRARY names another path): a build
/// or machine without CUDA runs everything else unchanged and does not load the CUDA runtime.
class CudaForward {
 public:
  /// Uploads `weights` to device 0 for a model of `config` (dense, SwiGLU; the caller refuses
  /// the other families) whose attention scores are scaled by `attention_scale`.
  /// Errors: kUnavailable (no CUDA backend library or device: cuda_device_available's reason,
  /// or any CUDA error with the runtime's message), kResourceExhausted (device memory).
  static Expected<std::unique_ptr<CudaForward>> create(const ModelConfig& config, const CudaModelWeights& weights,
                                                       float attention_scale);
  virtual ~CudaForward() = default;

  /// Runs the first `n_layers` decoder layers, the final RMSNorm and the LM head over `rows`,
  /// writing each row's K/V (after RoPE) into `cache`'s device storage (created on first use in
  /// the cache's dtype, f32 or f16, and kept with the cache), and returns the logits
  /// [rows.logit_rows.size(), vocab] f32 in `logits` (resized). Errors: kUnsupported (a KV
  /// dtype other than f32/f16), kResourceExhausted (device memory), kUnavailable (a CUDA error,
  /// with its message).
  virtual Status forward(const CudaForwardRows& rows, KvCache& cache, std::int64_t n_layers, std::vector<float>& logits) = 0;

  /// Weight bytes in device memory (what one decode step reads).
  virtual std::int64_t weight_bytes() const = 0;
};

/// Device-to-device copy bandwidth of device 0 in GB/s (bytes read + bytes written per
/// second, 1e9 bytes), the median of `repeats` copies of a `bytes`-byte buffer timed with CUDA
/// events: the memory roofline `bench -d cuda` reports against. Errors: kUnavailable.
Expected<double> cuda_copy_bandwidth_gbs(std::int64_t bytes = std::int64_t{1} << 30, int repeats = 20);

/// Free memory of device 0 in bytes now (cudaMemGetInfo): what `serve -d cuda` sizes its KV
/// pool from after the weights are uploaded. Errors: kUnavailable.
Expected<std::int64_t> cuda_free_memory_bytes();

}  // namespace peregrine
