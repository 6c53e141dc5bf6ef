// Phi-3's fused projections (model/spec/architecture.h fused_projections): Q/K/V stored as one
// attn_qkv [q_dim + 2·kv_dim, dim] (HF self_attn.qkv_proj) and the FFN's gate and up as one
// ffn_gate_up [2·ffn, dim] (HF mlp.gate_up_proj; gate rows first, as Phi3MLP's chunk(2) and
// llama.cpp's fused ffn_up under LLM_FFN_SWIGLU read them). The readers split them into
// zero-copy row views, so the rest of the engine sees the Llama layout; the writers fuse them back.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "formats/owned_tensor.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

/// Replaces every blk.L.attn_qkv.weight by row views blk.L.attn_{q,k,v}.weight and every
/// blk.L.ffn_gate_up.weight by blk.L.ffn_gate.weight + blk.L.ffn_up.weight (same dtype, bytes
/// in place). Errors: kCorruptFile naming the tensor (wrong shape for m.config, bytes that are
/// not whole rows of its dtype, or the fused and split forms both present).
Status split_fused_projections(ModelFile& m);

/// Replaces every stacked Mixture-of-Experts tensor blk.L.ffn_{gate,up,down}_exps.weight
/// ([n_experts, eff, dim] / [n_experts, dim, eff], llama.cpp's GGUF layout: expert E's rows
/// are rows [E·eff, (E+1)·eff) of the 2-D view) by per-expert row views
/// blk.L.ffn_{gate,up,down}.E.weight (model_file.h). Errors: kCorruptFile naming the tensor
/// (a shape other than the config's — an expert count other than n_experts included — bytes
/// that are not whole rows, or the stacked and per-expert forms both present).
Status split_expert_tensors(ModelFile& m);

/// For an expert matrix "blk.L.<proj>.E.weight": the stacked GGUF tensor it goes into,
/// "blk.L.<proj>_exps.weight", and E; nullopt for any other name.
std::optional<std::pair<std::string, std::int64_t>> stacked_expert_name(std::string_view name);

/// The per-expert tensors of stacked tensor `stacked` ("blk.L.<proj>_exps.weight"), experts
/// 0 … n_experts-1 in order (nullptr for a missing one).
std::vector<const TensorView*> expert_parts(const ModelFile& m, const std::string& stacked);

/// llama.cpp's Phi-3 GGUF calls its fused gate/up tensor blk.L.ffn_up.weight: renames every
/// one to blk.L.ffn_gate_up.weight, for split_fused_projections (walks the tensors present).
void name_gguf_fused_gate_up(ModelFile& m);

/// Whether `parts` can be written as one tensor called `name`: same dtype, quant params and row
/// length, whole rows. Errors: kInvalidArgument naming the part that differs (or is missing).
Status check_concat_rows(const std::string& name, std::span<const TensorView* const> parts);

/// The rows of `parts` one after the other, as one owned tensor called `name`.
/// Errors: those of check_concat_rows.
Expected<OwnedTensor> concat_rows(const std::string& name, std::span<const TensorView* const> parts);

}  // namespace peregrine
