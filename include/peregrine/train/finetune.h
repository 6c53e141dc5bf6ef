// LoRA and QLoRA fine-tuning of a dense Llama through libtorch (train/distill.h says how the
// training library loads).
//   LoRA (Hu et al. 2022): every targeted projection W [out, in] of every layer gets
//   y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ with A [r, in] drawn as PEFT draws it (kaiming_uniform_ with
//   a = √5: U(±1/√in)), B [out, r] zero (so training starts at the base model), s = alpha / r;
//   only A and B train (lora_dropout 0, no bias), the base is frozen in f32.
//   QLoRA (Dettmers et al. 2023): the same, on a base whose seven projections of every layer are
//   NF4 with double-quantized absmaxes (quant/nf4.h), kept as uint8 codes and dequantized in every
//   forward (no f32 copy of those weights is kept); embedding, norms and LM head stay f32.
// Loss: causal-LM cross-entropy of every position's next token on windows of `seq` tokens of the
// text (no BOS inserted: the windows are cut from the token stream as it is, as `eval ppl` cuts
// its windows), starts drawn from (seed, step); AdamW (β 0.9 / 0.999, weight decay 0, as Hugging
// Face's Trainer defaults), linear warm-up and cosine decay (train/torch/training_steps.h).
// Deterministic for a seed at a given thread count. The result is a LoraAdapter laid out for the
// base (model/lora_adapter.h: canonical names, B's Q/K rows in the base's RoPE pairing), which
// save_peft_adapter writes as a PEFT folder that `generate --lora`, `lora merge` and Hugging
// Face PEFT load.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/model/lora_adapter.h"
#include "peregrine/quant/float_model.h"
#include "peregrine/train/distill.h"

namespace peregrine::train {

/// The --target names and the projection each adapts: q attn_q, k attn_k, v attn_v, o attn_output,
/// gate ffn_gate, up ffn_up, down ffn_down.
inline constexpr std::string_view kLoraTargetNames[] = {"q", "k", "v", "o", "gate", "up", "down"};

/// The canonical tensor suffix ("attn_q") of a --target name ("q"). Errors: kInvalidArgument
/// naming the target and listing the valid ones.
Expected<std::string> lora_target_tensor(std::string_view target);

/// "q,k,v" → {"q", "k", "v"}. Errors: kInvalidArgument (an empty list or entry, an unknown or
/// repeated name).
Expected<std::vector<std::string>> parse_lora_targets(std::string_view spec);

struct FinetuneOptions {
  std::int64_t rank = 8;            // r
  float alpha = 16.0f;              // s = alpha / r
  std::vector<std::string> targets = {"q", "k", "v", "o", "gate", "up", "down"};
  bool qlora = false;               // NF4 base (quant/nf4.h)
  std::int64_t steps = 200;         // optimizer steps
  std::int64_t batch = 8;           // windows per step
  std::int64_t seq = 128;           // tokens per window, <= the base's context
  float lr = 2e-3f;                 // AdamW peak learning rate
  std::int64_t warmup = 10;         // linear warm-up steps, then cosine decay to lr / 10
  std::uint64_t seed = 0;
  /// Errors: kInvalidArgument naming the field (--lora-r, --lora-alpha, --target, --steps, ...).
  Status validate() const;
};

struct FinetuneReport {
  std::int64_t steps = 0;
  double first_loss = 0.0, last_loss = 0.0;  // nats per token; last: the mean of the last 10 steps
  double seconds = 0.0;
  std::int64_t trainable = 0;                // LoRA parameters (A and B values)
  double base_bits_per_weight = 32.0;        // of the projections: 32, or NF4's 4.127
  // Held-out perplexity (eval text given): the frozen base (NF4 under QLoRA) before, + the
  // adapter after; windows of `seq` tokens, each token scored once (eval/eval_windows.h with
  // stride = seq), exp(mean NLL).
  std::int64_t eval_tokens = 0;              // tokens scored; 0: no eval text
  double eval_ppl_before = 0.0, eval_ppl_after = 0.0;
};

/// Trains a LoRA adapter (or QLoRA with o.qlora) for `base`, the f32 copy of a model
/// check_student_support covers (under QLoRA its projections' f32 buffers are released once
/// quantized; a copy of a FloatModel shares its buffers, so a caller's copy keeps them), on `text`
/// (token ids of the base's vocabulary, at least seq + 1 of them); with `eval_text` (empty: none;
/// else at least 2 tokens) measures the held-out perplexity before and after into `report`.
/// `progress` is called after every step. The adapter's path is empty; arch / rope_style /
/// head_dim are the base's. Errors: kInvalidArgument (options, a text too short, seq longer than
/// the context, a token outside the vocabulary), kUnsupported (the base's family or features),
/// kUnavailable (no training library).
Expected<LoraAdapter> finetune(FloatModel base, std::span<const std::int32_t> text, std::span<const std::int32_t> eval_text,
                               const FinetuneOptions& o, ThreadPool& pool, FinetuneReport* report = nullptr,
                               const DistillProgress& progress = {});

/// Logits [tokens.size(), vocab] f32 of `base` + `adapter` (its scale alpha / r, or rsLoRA's) at
/// positions 0..n−1, computed by the libtorch module finetune trains (with `qlora`, on the NF4
/// base): the reference the engine's unmerged LoRA forward is checked against. `adapter` must be
/// laid out for `base` (load_lora_adapter / finetune). Errors: kInvalidArgument (no tokens, more
/// than the context, a token outside the vocabulary, an adapter tensor the base has no
/// projection for or of another shape, another RoPE pairing), kUnsupported, kUnavailable.
Expected<std::vector<float>> lora_reference_logits(const FloatModel& base, const LoraAdapter& adapter, bool qlora,
                                                   std::span<const std::int32_t> tokens);

}  // namespace peregrine::train
