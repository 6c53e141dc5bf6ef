// Q/K projection rows between the two RoPE pairings (model_file.h RopeStyle): a file format
// fixes the pairing (GGUF / llama2.c interleaved, Hugging Face NeoX halves), so a writer
// reorders the Q/K rows of a model read in the other one. Spec: llama.cpp
// convert_hf_to_gguf.py's permute (HF → GGUF) and its inverse.
#pragma once

#include <cstdint>

#include "formats/owned_tensor.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

/// Tensor `t` of a model in pairing `from` as it must be written for pairing `to`: for
/// attn_q / attn_k with from != to, a copy (owned bytes) whose rows are reordered head by head
/// (`head_dim` rows each; interleaved dim 2i + h is NeoX dim i + h·head_dim/2); otherwise the
/// view itself (bytes null). Rows move whole, so any dtype with a row size works (block
/// formats, kInt, F8). Errors: kInvalidArgument when t's bytes do not match its shape and
/// dtype, or its rows are not whole heads; kUnsupported for Q/K biases and Q/K norm weights
/// (entries, not rows, indexed by head dim) when from != to.
Expected<OwnedTensor> in_rope_order(const TensorView& t, std::int64_t head_dim, RopeStyle from, RopeStyle to);

}  // namespace peregrine
