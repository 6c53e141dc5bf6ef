// A dense Llama decoder as libtorch tensors with autograd: the trainable copy of a Peregrine model
// (the student of knowledge distillation). Its forward is the one model/llama_model.cpp runs on
// the same canonical tensors — token embedding, per layer RMSNorm → Q/K/V → RoPE (the model's
// pairing and θ) → causal GQA attention → output projection → residual, RMSNorm → SwiGLU FFN →
// residual, then the final RMSNorm and the LM head (tied or not) — written with libtorch's
// differentiable ops, so training needs no hand-written backward pass. Weights move between the
// engine and libtorch through a FloatModel (quant/float_model.h), whose view() the engine runs.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/quant/float_model.h"
#include "train/torch/llama_blocks.h"

namespace peregrine::train {

/// train/distill.h's check_student_support: whether the student covers `m`: a dense model (no experts) with SwiGLU, no biases, no Q/K
/// norms, no sliding window, soft-caps, embedding scale, norm offset, RoPE scaling, RoPE
/// frequency tensor or online Hadamard rotation. Errors: kUnsupported naming the feature.
Status check_student_support_impl(const FloatModel& m);

class LlamaStudent {
 public:
  /// Copies every tensor of `m` (check_student_support_impl) into f32 torch tensors that require
  /// gradients. Errors: those of check_student_support.
  static Expected<LlamaStudent> from(const FloatModel& m);

  /// Logits [B, T, vocab] f32 of `tokens` [B, T] int64 (ids in [0, vocab), T <= max_seq_len),
  /// every sequence at positions 0..T−1.
  torch::Tensor forward(const torch::Tensor& tokens) const;

  /// The trainable tensors, in canonical-name order (the optimizer's parameter list).
  std::vector<torch::Tensor> parameters() const;

  /// Canonical name → tensor (shapes as in the model file: {out, in} for a Linear weight).
  const std::map<std::string, torch::Tensor>& named_parameters() const { return weights_; }

  /// Writes the current values into `m`'s tensors of the same names (m: the model this student
  /// was made from, or one of the same config).
  void write_to(FloatModel& m) const;

  const ModelConfig& config() const { return config_; }

 private:
  LlamaStudent(ModelConfig c, std::map<std::string, torch::Tensor> w);

  ModelConfig config_;
  std::map<std::string, torch::Tensor> weights_;
  Rope rope_;  // the model's pairing and θ, positions up to max_seq_len
};

}  // namespace peregrine::train
