// A hook into LlamaModel::forward that sees the input of every linear layer and the residual
// stream between layers: what calibration (GPTQ's Hessians, AWQ's and SmoothQuant's per-channel
// activation statistics, LLM.int8()'s outlier features, Wanda's and SparseGPT's inputs, the
// layer-drop distances) is measured from.
#pragma once

#include <cstdint>
#include <span>

namespace peregrine {

/// Which linear layers of a decoder layer read an activation.
enum class LinearInput : std::uint8_t {
  kAttention,        // attn_norm(x) → attn_q, attn_k, attn_v             (width dim)
  kAttentionOutput,  // attention output → attn_output                     (width n_heads*head_dim)
  kFfn,              // ffn_norm(x) → ffn_gate, ffn_up                     (width dim)
  kFfnDown,          // silu(gate) * up (after the online Hadamard, if any) → ffn_down (width ffn_dim)
};

/// The canonical tensor names (model_file.h, without "blk.L." and ".weight") reading `input`:
/// {"attn_q", "attn_k", "attn_v"}, {"attn_output"}, {"ffn_gate", "ffn_up"}, {"ffn_down"}.
std::span<const char* const> linear_names(LinearInput input);

class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  /// Called once per (layer, input) per forward, before the matmul, with x [n_rows, width] f32
  /// row-major (every row of the batch, in batch order). Runs on the forward's calling thread.
  virtual void observe(std::int64_t layer, LinearInput input, std::span<const float> x, std::int64_t n_rows) = 0;
  /// Called once per layer per forward with the residual stream h [n_rows, dim] f32 at the
  /// input of decoder layer `layer` (the embedding for layer 0), and once more with
  /// layer = the number of layers run and the output of the last one (before the final norm):
  /// what layer-drop pruning compares (prune/layer_drop.h). Default: ignored.
  virtual void observe_hidden(std::int64_t layer, std::span<const float> h, std::int64_t n_rows) {
    (void)layer, (void)h, (void)n_rows;
  }
};

}  // namespace peregrine
