// Tensor parallelism (Megatron-LM, Shoeybi et al. 2019): N ranks each hold 1/N of every layer
// and sum their partial outputs twice per layer. Rank r of N keeps
//   - query heads [r·n_heads/N, (r+1)·n_heads/N) and KV heads [r·n_kv_heads/N, ...): the rows of
//     attn_q / attn_k / attn_v (and their biases) — a column-parallel split — and the matching
//     columns of attn_output — a row-parallel split; its KV cache holds its KV heads only. With
//     fewer KV heads than ranks (N a multiple of n_kv_heads) each KV head is replicated on the
//     N / n_kv_heads ranks whose query heads use it (vLLM does the same);
//   - FFN columns [r·ffn/N, (r+1)·ffn/N): rows of ffn_gate / ffn_up, columns of ffn_down; in a
//     Mixture-of-Experts layer the same of every expert (and of the shared expert), the router
//     replicated;
//   - the embedding, every RMSNorm, the LM head (each rank computes all logits) replicated —
//     except OLMoE's Q/K norms over the whole projection, sliced like q and k, their RMS taken
//     over the ranks' all-reduced sums of squares (LlamaModel);
// attn_output and ffn_down then give partial sums, which the ranks all-reduce
// (TensorParallelGroup::all_reduce_sum) before the residual add. Row slices are views into the
// file's mapping (a rank reads only its rows); column slices are copies of whole blocks (a
// quantized block is never split): float and ggml blocks, I8 / F8 rows after their row scale,
// group-wise int rows by whole groups (their scales, zeros and bit-packed codes; a per-channel
// row keeps its one scale), N:M sparse rows by whole groups of M columns (their kept values —
// whole Q8_0 / Q4_0 blocks of them — and mask bits).
#pragma once

#include <span>

#include "peregrine/core/status.h"
#include "peregrine/model/lora_adapter.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

/// The ranks one model's layers are split over (dist/ implements it over MPI; the tests over
/// threads). One per rank.
class TensorParallelGroup {
 public:
  virtual ~TensorParallelGroup() = default;
  /// This rank's index in [0, size()).
  virtual int rank() const = 0;
  /// Ranks in the group (>= 1).
  virtual int size() const = 0;
  /// x ← Σ over the group's ranks of their x (f32, the same length on every rank), with the same
  /// bits on every rank (so every rank samples the same token). Collective: every rank calls it
  /// the same number of times with the same lengths. A failure of the transport is fatal (the
  /// implementation aborts every rank with one error line: nothing can continue half-reduced).
  virtual void all_reduce_sum(std::span<float> x) = 0;
};

/// Rank `rank` of `size`'s shard of `full` (the layout above): config with n_heads, ffn_dim,
/// expert_ffn_dim and shared_expert_ffn_dim divided by `size`, n_kv_heads by `size` (at least 1), the tensors sliced
/// (row slices view `full`'s bytes, whose storage the shard shares; column slices are copied
/// into buffers the shard owns). size 1 returns a copy of `full`.
/// Errors: kInvalidArgument (size < 1, rank outside [0, size), n_heads or an FFN width not
/// divisible by size, n_kv_heads neither divisible by size nor dividing it, a column slice not a whole number of the dtype's blocks — e.g.
/// Q4_K's 256-value super-blocks across a 2·128-wide split, int groups, N:M groups —, naming the tensor); kUnsupported
/// (a whole-projection K norm (OLMoE) with fewer KV heads than ranks; a Hadamard-rotated FFN; column slices of NF4,
/// a run-time type no file holds — convert after sharding, as `--dtype` does).
Expected<ModelFile> shard_model_file(const ModelFile& full, int rank, int size);

/// Rank `rank` of `size`'s part of a LoRA adapter for a model of config `config` (the whole
/// model's, or a pipeline stage's with stage_lora_adapter's adapter), for that rank's
/// shard_model_file: the rows of B where the weight is split by rows (attn_q / attn_k / attn_v
/// by heads — KV heads replicated as the weight's —, ffn_gate / ffn_up by FFN columns), the
/// columns of A where it is split by columns (attn_output, ffn_down); the rank's partial
/// B · (A_r · x_r) then joins the weight's all-reduce. size 1 returns it as is. Errors:
/// kInvalidArgument (rank outside [0, size), a split dimension not divisible by size).
Expected<LoraAdapter> shard_lora_adapter(const LoraAdapter& full, const ModelConfig& config, int rank, int size);

}  // namespace peregrine
