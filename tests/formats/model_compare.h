// Test-only checks that a model written and read back is the model that was written: config
// fields, tensors (Q/K rows mapped between the RoPE pairings), and prefill logits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "peregrine/formats/model_file.h"
#include "peregrine/model/llama_model.h"

namespace peregrine::test {

/// Every ModelConfig field but rope_style (which the file format fixes) is equal.
void expect_same_config(const ModelConfig& want, const ModelConfig& got);

/// The interleaved-order row (GGUF / llama2.c) that row j of a Q/K projection holds in Hugging
/// Face's NeoX order: within a head, NeoX dim h·hd/2 + i is interleaved dim 2i + h (written
/// here independently of the writers).
std::int64_t interleaved_row_of_neox_row(std::int64_t j, std::int64_t head_dim);

/// `got` holds exactly `want`'s tensors: same names, dtypes, shapes and QuantParams, and every
/// row the same bytes and the same decoded values (dequantize_row); rows of attn_q / attn_k are
/// matched through interleaved_row_of_neox_row when the two models' RoPE styles differ.
void expect_same_tensors(const ModelFile& want, const ModelFile& got);

/// The prefill logits [n_tokens, vocab] of a fixed stories260K prompt (the first 4 ids are
/// "<s> Once upon a time"-like, 12 fixed ones, then (37·i + 5) mod 512) run by LlamaModel on `m`; with `decode_to_f32` the
/// weights are first decoded to f32 (quant/float_model.h), so formats whose runtime kernels live
/// elsewhere are compared through exactly the values they hold; `placement` as LlamaModel::create
/// takes it (kInPlace leaves the weights unpacked).
std::vector<float> prefill_logits(const ModelFile& m, bool decode_to_f32, std::int32_t n_tokens = 4,
                                  WeightPlacement placement = WeightPlacement::kHugePages);

/// Largest |a[i] − b[i]| (a.size() == b.size() is expected, else +inf).
float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace peregrine::test
