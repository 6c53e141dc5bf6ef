// The Mixture-of-Experts FFN of a decoder layer (sparse MoE, Shazeer et al. 2017; lecture 003):
// a router picks each token's top-k of n_experts SwiGLU FFNs and the layer's output is their
// router-weighted sum — Mixtral (Jiang et al. 2024, modeling_mixtral.py): softmax over the
// selected logits; Qwen2-MoE / OLMoE (modeling_qwen2_moe.py, modeling_olmoe.py): softmax over
// all experts, the top-k probabilities kept as they are; plus Qwen2-MoE's shared expert, an
// always-on SwiGLU FFN scaled by sigmoid(w_gate · x).
//
// The tokens of a batch are grouped by expert (a grouped GEMM, as vLLM's fused_moe and
// llama.cpp's mul_mat_id): each chosen expert runs one matmul per projection over all the
// tokens routed to it, so its weights are read once per forward however many tokens chose it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/model/forward_counters.h"

namespace peregrine {

/// One layer's MoE weights (views into the model file; model_file.h's canonical tensors).
struct MoeWeights {
  const TensorView* router = nullptr;          // ffn_gate_inp [n_experts, dim]
  std::vector<const TensorView*> gate, up;     // per expert: [eff, dim]
  std::vector<const TensorView*> down;         // per expert: [dim, eff]
  const TensorView* shared_gate = nullptr;     // ffn_gate_shexp [sff, dim], or null: no shared expert
  const TensorView* shared_up = nullptr;       // ffn_up_shexp [sff, dim]
  const TensorView* shared_down = nullptr;     // ffn_down_shexp [dim, sff]
  std::vector<float> shared_expert_gate;       // ffn_gate_inp_shexp [dim] f32 (empty without)
  std::int64_t top_k = 0;                      // experts per token, in [1, n_experts]
  bool normalize = false;                      // renormalize the top-k probabilities to sum 1
};

/// Layer `layer`'s MoE weights from a validated model file (model_file.h's names; the shared
/// expert's gate converted to f32); router null for a dense model.
MoeWeights moe_layer_weights(const ModelFile& f, std::int64_t layer);

/// Top-k routing of n tokens: for token t, the k experts of highest softmax probability over
/// its router logits [t, :] (ties to the lower index) in descending order, written to
/// expert[t·k + j], and their probabilities to weight[t·k + j], divided by their sum when
/// `normalize` (equal to a softmax over the selected logits). logits: [n, n_experts] f32.
/// Preconditions: 1 <= k <= n_experts, expert and weight hold n·k entries.
void route_top_k(std::span<const float> logits, std::int64_t n, std::int64_t n_experts, std::int64_t k, bool normalize,
                 std::span<std::int32_t> expert, std::span<float> weight);

/// out[t, :] = Σ_j weight_tj · FFN_{expert_tj}(x[t, :]) (+ sigmoid(shared_expert_gate · x[t, :])
/// · FFN_shared(x[t, :])), FFN(x) = down(silu(gate·x) ⊙ (up·x)). x: [n, dim] f32; out: [n, dim]
/// f32 (overwritten). Every chosen expert's matrices are multiplied once over all its tokens
/// (matmul, any weight dtype); for one token (decode) all its experts' gate and up products
/// run as one matmul_fused call and their down products as another. `counters` (may be null) gets the weight bytes read and the
/// tokens per expert of `layer`. Preconditions: the shapes of model_file.h, out.size() ==
/// x.size() == n·dim.
void moe_ffn(const MoeWeights& w, std::span<const float> x, std::int64_t n, std::span<float> out, ThreadPool& pool,
             ForwardCounters* counters, std::int64_t layer);

/// Scalar single-threaded reference twin of moe_ffn: every token on its own, every product by
/// matmul_reference, the routing recomputed from the reference router logits. Tests compare
/// moe_ffn against it.
void moe_ffn_reference(const MoeWeights& w, std::span<const float> x, std::int64_t n, std::span<float> out);

}  // namespace peregrine
