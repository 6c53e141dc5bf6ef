// EAGLE-1 draft-head training (Li et al. 2024, "EAGLE: Speculative Sampling Requires Rethinking
// Feature Uncertainty"), after SafeAILab/EAGLE's eagle/model/cnets.py (the `Model` of the
// EAGLE-1 release, before commit bfeb532 "EAGLE-2") and eagle/train/main.py of the same release.
// The head autoregresses on the target's features: row i (RoPE position i) reads
//   fc(cat(embed(x_{i+1}), f_i))                  fc = Linear(2d, d, bias), embed the target's
// then one Llama decoder layer without its input_layernorm (cnets.py's layer index 0): causal
// attention over rows <= i, residual, post_attention_layernorm, SwiGLU MLP, residual; its output
// f̂_{i+1} (no final norm) predicts the target's next feature f_{i+1}, and the target's LM head
// (frozen, shared) on f̂_{i+1} gives the distribution of x_{i+2}. f_t is the target's last hidden
// state after its final norm (train/target_features.h, Peregrine's forward).
// Loss per row, averaged over the rows (main.py): v_w · mean_d SmoothL1(f̂, f) (β = 1) +
// p_w · CE(softmax(LM(f_{i+1})), log_softmax(LM(f̂_{i+1}))), v_w = 1, p_w = 0.1. Input features
// get main.py's AddUniformNoise: f_i + (U[0,1) − 0.5) · std · 512 / T, std = 0.2, T the
// sequence's length (the code divides by the sequence dimension of a [1, T, d] tensor); the
// regression and classification targets are clean. AdamW with betas (0.9, 0.95) and weight decay
// 0.01 (torch's default, which main.py keeps), gradients clipped to ±0.5 by value
// (clip_grad_value_), the learning rate warmed up linearly and decayed by a cosine
// (training_steps.h; main.py decays linearly over 800k steps). Weights start as PyTorch's
// nn.Linear does (U(±1/sqrt(fan_in)) for weight and bias), the norm at 1. Deterministic for a seed
// at a given thread count. Runs in the training library (train/distill.h says how it loads).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/spec/eagle_head.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/train/distill.h"

namespace peregrine::train {

struct EagleOptions {
  std::int64_t steps = 200, batch = 8, seq = 128, warmup = 10;
  float lr = 1e-2f;             // peak AdamW learning rate (main.py: 3e-5 for 7B+ targets)
  float noise = 0.2f;           // main.py's uniform noise "std" (amplitude std · 512 / seq); 0: none
  float cls_weight = 0.1f;      // p_w: weight of the cross-entropy against the target's distribution
  float reg_weight = 1.0f;      // v_w: weight of the SmoothL1 feature regression
  float grad_clip = 0.5f;       // clip gradients to ±grad_clip by value; 0: none
  bool bias = true;             // fc has a bias (EAGLE's default)
  std::uint64_t seed = 0;
  /// Errors: kInvalidArgument naming the out-of-range field.
  Status validate() const;
};

struct EagleReport {
  std::int64_t steps = 0;
  double first_loss = 0.0, last_loss = 0.0;  // v_w·regression + p_w·CE; last: mean of the last 10 steps
  double last_accuracy = 0.0;  // top-1 of the head = top-1 of the target on the training rows, mean of the last 10
  double seconds = 0.0;
};

/// Trains an EAGLE-1 head for `target` (a dense model check_student_support covers; the head
/// takes its dimensions, ε and RoPE θ) on windows of `text` (BOS first; starts from (seed, step)
/// as distill draws them), `target_f32` its f32 copy (final norm, embedding, LM head). The
/// result holds every tensor of spec/eagle_head.h, embed_tokens.weight included (the
/// target's). Errors: kInvalidArgument (options, text shorter than seq + 1 tokens, seq longer
/// than the context), kUnsupported (the target), kUnavailable (no training library), the forward's.
Expected<EagleHead> train_eagle(const LlamaModel& target, const FloatModel& target_f32, std::span<const std::int32_t> text,
                                std::int32_t bos, const EagleOptions& o, ThreadPool& pool, EagleReport* report = nullptr,
                                const DistillProgress& progress = {});

/// The head's outputs on one sequence, by the libtorch module training uses.
struct EagleReferenceOutput {
  std::int64_t rows = 0;        // T
  std::vector<float> features;  // [T, hidden]: row i is f̂_{i+1}
  std::vector<float> logits;    // [T, vocab]: the target's LM head on row i, the distribution of x_{i+2}
};

/// Runs `head` (its embedding and LM head: `target_f32`'s) on `tokens` x_0..x_T (T + 1 ids;
/// x_0 is not read) and `features` [T, hidden] f32 f_0..f_{T−1} (the target's, after its final
/// norm), rows at RoPE positions 0..T−1, no noise. Errors: kInvalidArgument (sizes, T < 1 or
/// more than head.max_positions, a token outside the vocabulary, a head not of the target's
/// hidden size / vocabulary or missing a tensor), kUnsupported (the target), kUnavailable.
Expected<EagleReferenceOutput> eagle_reference(const EagleHead& head, const FloatModel& target_f32,
                                               std::span<const std::int32_t> tokens, std::span<const float> features);

}  // namespace peregrine::train
