// What the draft-head trainers (medusa.cpp, eagle.cpp) take from their frozen target: its
// features for a batch of windows (train/target_features.h, Peregrine's forward) and its f32
// tensors — LM head, embedding — as torch tensors; and the way back from a trained tensor to
// the f32 values of a head file.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/quant/float_model.h"

namespace peregrine::train {

/// The start of a head trainer's run: the target must be one training covers
/// (check_student_support) and windows of `seq` tokens must fit its context and the text (at
/// least seq + 1 tokens); then libtorch's generator is seeded with `seed` and its threads set to
/// the pool's. Errors: kUnsupported (the target), kInvalidArgument naming --seq or the text's length.
Status start_head_run(const FloatModel& target_f32, std::int64_t seq, std::size_t text_tokens, std::uint64_t seed, ThreadPool& pool);

/// The features [B, T, dim] f32 of `tokens` [B, T] int64 (each row one sequence at positions
/// 0..T−1): the target's last hidden states after its final norm (train/target_features.h).
/// Errors: those of target_features.
Expected<torch::Tensor> target_features_batch(const LlamaModel& target, const torch::Tensor& tokens, ThreadPool& pool);

/// A copy of tensor `name` of `m` (shape as stored, {out, in} for a Linear weight), no gradient.
torch::Tensor tensor_of(const FloatModel& m, const std::string& name);

/// The target's LM head [vocab, dim]: output.weight, or token_embd.weight when tied.
torch::Tensor lm_head_of(const FloatModel& m);

/// The values of `t` (any shape), row-major f32.
std::vector<float> values_of(const torch::Tensor& t);

}  // namespace peregrine::train
