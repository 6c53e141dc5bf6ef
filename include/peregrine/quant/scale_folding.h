// Per-input-channel scaling of a decoder layer's linear inputs, folded into the operation that
// produces the input so that the model computes the same function (SmoothQuant, Xiao et al. 2023;
// AWQ, Lin et al. 2024): the matrices reading the input get W[:, j] *= s_j and the producer
// divides channel j by s_j.
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/status.h"
#include "peregrine/model/activation_observer.h"
#include "peregrine/quant/float_model.h"

namespace peregrine {

/// Applies s [width of `input`] to layer `layer` of `m`: columns of linear_names(input) are
/// multiplied by s; the producer is divided: kAttention → attn_norm weight, kFfn → ffn_norm
/// weight (a norm applied as o + g, o = config().norm_weight_offset, becomes (o + g) / s - o),
/// kFfnDown → rows of ffn_up (act(g)·u is linear in u), kAttentionOutput → rows of
/// attn_v and its bias when it has one (only without GQA, n_heads == n_kv_heads; attention
/// output channel j is a convex combination of V channel j).
/// Errors: kInvalidArgument (s of the wrong size or with values <= 0 / non-finite, layer out of
/// range); kUnsupported (kAttentionOutput with GQA; kFfnDown when config().ffn_down_hadamard).
Status fold_input_scales(FloatModel& m, std::int64_t layer, LinearInput input, std::span<const float> s);

/// Whether fold_input_scales supports `input` for m.
bool can_fold_input_scales(const FloatModel& m, LinearInput input);

}  // namespace peregrine
