// The module LoRA / QLoRA fine-tuning trains (train/finetune.h): a frozen dense Llama base — its
// projections f32, or NF4 (nf4_weight.h) under QLoRA — with a LoRA pair on the targeted
// projections, y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ (PEFT's lora.Linear forward, dropout 0), run through the
// decoder forward the distillation student uses (llama_blocks.h decoder_forward). Only A and B
// require gradients. Tensors are canonical (formats/model_file.h), B's Q/K rows in the base's
// RoPE pairing, as LoraAdapter keeps them.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/model/lora_adapter.h"
#include "peregrine/quant/float_model.h"
#include "train/torch/llama_blocks.h"
#include "train/torch/nf4_weight.h"

namespace peregrine::train {

/// A new adapter for `base`: a pair on `tensors` (canonical suffixes, "attn_q") of every layer,
/// A [rank, in] ~ U(±1/√in) from libtorch's generator (PEFT: kaiming_uniform_(a=√5)), B zero;
/// alpha, and the base's arch / rope_style / head_dim.
LoraAdapter initial_lora_adapter(const FloatModel& base, const std::vector<std::string>& tensors, std::int64_t rank, float alpha);

class LoraModel {
 public:
  /// The base's tensors (f32 views into `base`'s buffers, which must outlive the module; the
  /// projections quantized to NF4 instead when `nf4`, after which `base` may drop them) and `adapter`'s pairs as trainable tensors.
  /// Errors: check_student_support's; kInvalidArgument (an adapter tensor that is not a
  /// projection of the base or not of its shape, another RoPE pairing, rank < 1), nf4_quantize's.
  static Expected<LoraModel> create(const FloatModel& base, const LoraAdapter& adapter, bool nf4);

  /// Logits [B, T, vocab] f32 of `tokens` [B, T] int64 at positions 0..T−1.
  torch::Tensor forward(const torch::Tensor& tokens) const;

  /// A and B of every pair (the optimizer's parameters), in canonical-name order.
  std::vector<torch::Tensor> parameters() const;

  /// The adapter with the current A and B values.
  LoraAdapter adapter() const;

  /// Whether the base tensor `name` is held as NF4 (the module reads no f32 values of it).
  bool quantized(const std::string& name) const { return nf4_.contains(name); }

  /// Bits per stored weight of the base's projections (32, or NF4's).
  double base_bits_per_weight() const { return bits_per_weight_; }

 private:
  struct Pair {
    torch::Tensor a, b;  // [r, in], [out, r]
  };
  torch::Tensor project(const std::string& name, const torch::Tensor& x) const;

  ModelConfig config_;
  Rope rope_;
  std::map<std::string, torch::Tensor> frozen_;   // embedding, norms, LM head; the projections unless NF4
  std::map<std::string, Nf4Weight> nf4_;          // the projections under QLoRA
  std::map<std::string, Pair> pairs_;
  LoraAdapter layout_;                            // the adapter's fields, without tensor values
  float scale_ = 0.0f;
  double bits_per_weight_ = 32.0;
};

}  // namespace peregrine::train
