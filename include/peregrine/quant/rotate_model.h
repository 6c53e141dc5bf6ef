// Random Hadamard rotation of the residual stream (QuaRot, Ashkboos et al. 2024; SpinQuant, Liu
// et al. 2024): an orthogonal Q applied to the hidden states leaves the model's function unchanged
// once RMSNorm weights are folded into the following linears, and spreads activation outliers
// over all channels, which makes low-bit weights and int8 activations (W4A8) accurate.
#pragma once

#include <cstdint>

#include "peregrine/core/status.h"
#include "peregrine/quant/float_model.h"

namespace peregrine {

/// Rotates `m` in place with Q = diag(±1, seeded by `seed`) · H_dim (H of kernels/cpu/elementwise/hadamard.h,
/// block-diagonal orthonormal for dims that are not powers of two):
/// 1. folds every RMSNorm weight into the linears reading its output (W ← W·diag(o + g), g ← 1 - o
///    for norms applied as o + g, o = config().norm_weight_offset;
///    the final norm into the LM head, untying a tied head: output.weight is added and
///    config().tied_embeddings cleared);
/// 2. token_embd ← E·Q; attn_q/k/v, ffn_gate/up, output ← W·Q (readers of the residual);
///    attn_output, ffn_down ← Qᵀ·W (writers to the residual);
/// 3. ffn_down ← ffn_down·H_ffn and config().ffn_down_hadamard = true, so the forward rotates
///    the SwiGLU output online (fused where the residual stream allows, online where not).
/// The rotated model's logits equal the original's up to f32 rounding.
/// Errors: kInvalidArgument (already rotated: config().ffn_down_hadamard set); kUnsupported (a
/// model with post-block norms, Gemma 2: RMSNorm of a rotated block output is not the rotated norm).
Status rotate_model_hadamard(FloatModel& m, std::uint64_t seed);

}  // namespace peregrine
