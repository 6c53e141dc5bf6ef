// The divergences of knowledge distillation between a teacher's and a student's next-token
// distributions, differentiable in the student's logits (libtorch autograd). p = softmax(teacher /
// T), q = softmax(student / T), both over the vocabulary, per position; the result is the mean
// over positions. Forward KL is Hinton et al. 2015's soft-target loss (× T² so gradients keep
// their scale across temperatures); reverse KL is MiniLLM's (Gu et al. 2024) mode-seeking one,
// token-level; JSD and TVD are DistillSpec's (Zhou et al. 2024) alternatives.
#pragma once

#include <torch/torch.h>

#include "peregrine/train/distill.h"

namespace peregrine::train {

/// student_logits, teacher_logits: [N, vocab] f32 (the teacher's without gradient). targets:
/// [N] int64 next-token ids, read by kCrossEntropy only (−1 skips a position). Returns the
/// scalar mean loss over the N positions (kCrossEntropy: over the non-skipped ones; its
/// temperature is 1), as distill.h's KdLoss defines it.
torch::Tensor kd_loss(KdLoss loss, const torch::Tensor& student_logits, const torch::Tensor& teacher_logits,
                      const torch::Tensor& targets, float temperature);

}  // namespace peregrine::train
