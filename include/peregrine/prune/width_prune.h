// Width pruning: keep the most important FFN channels and attention head groups of every layer
// and write a smaller dense model (the structured masks of LLM-Pruner, Ma et al. 2023, and
// Sheared LLaMA, Xia et al. 2024, chosen here by activation × weight importance, without their
// gradients or the retraining that follows).
#pragma once

#include <cstdint>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/quant/calibration.h"
#include "peregrine/quant/float_model.h"

namespace peregrine {

/// What stays in every layer: indices in increasing order, the same count in each layer (the
/// config's widths are per model).
struct WidthPlan {
  std::vector<std::vector<std::int64_t>> ffn_channels;  // [n_layers][kept FFN channels]
  std::vector<std::vector<std::int64_t>> kv_heads;      // [n_layers][kept KV heads]; each keeps
                                                        // its n_heads / n_kv_heads query heads
};

/// Importance of FFN channel k of layer l: ‖X_k‖₂ · ‖W_down[:, k]‖₂ with X the input of ffn_down
/// (Wanda's |W|·‖X‖ summed over the channel's output column); of a KV head group: the same
/// quantity summed over the attn_output input columns of the group's query heads. Keeps
/// max(1, round(keep · count)) of each, the highest.
/// stats: calibrate()'s statistics of every layer of fm (quant/calibration.h), in layer order.
/// Errors: kInvalidArgument (stats not one per layer or without the inputs' norms), kUnsupported
/// (Q/K norms over the whole projection, OLMoE's, which mix heads; a MoE layer).
Expected<WidthPlan> choose_width(const FloatModel& fm, const std::vector<LayerStats>& stats, double ffn_keep,
                                 double heads_keep);

/// Cuts every layer of fm to `plan`: rows of attn_q / attn_k / attn_v (and their biases) and of
/// ffn_gate / ffn_up, columns of attn_output and ffn_down; config n_heads, n_kv_heads and ffn_dim
/// follow (head_dim unchanged). Errors: kInvalidArgument (a plan not matching fm's layers).
Status apply_width(FloatModel& fm, const WidthPlan& plan);

}  // namespace peregrine
