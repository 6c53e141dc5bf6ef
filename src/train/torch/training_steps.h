// What every training loop of the library shares: the learning-rate schedule, the text windows of
// a step, and the loss log a report is made from.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/train/distill.h"

namespace peregrine::train {

/// Linear warm-up to `lr` over `warmup` steps, then cosine decay to lr / 10 at step `steps`.
float cosine_learning_rate(float lr, std::int64_t warmup, std::int64_t steps, std::int64_t step);

/// One step's sequences [batch, seq] int64: windows of `text` at starts drawn from (seed, step),
/// BOS first when bos >= 0. Precondition: text.size() >= seq.
torch::Tensor text_windows(std::span<const std::int32_t> text, std::int32_t bos, std::int64_t batch, std::int64_t seq,
                           std::uint64_t seed, std::int64_t step);

/// Per-step losses: the first, and the mean of the last min(10, n).
struct LossLog {
  std::vector<double> losses;
  double first() const { return losses.empty() ? 0.0 : losses.front(); }
  double last() const;
};

/// What a run of steps leaves: the losses and the wall time (s).
struct StepsDone {
  LossLog log;
  double seconds = 0.0;
};

/// The loop of a training run from step 0: per step the learning rate of cosine_learning_rate on
/// every parameter group of `opt`, `loss_of(step)` (a scalar holding its graph), backward,
/// `before_update` (e.g. gradient clipping; may be empty), the optimizer step, the loss log and
/// `progress` (tokens/s from tokens_per_step). Errors: those of loss_of, which end the run.
Expected<StepsDone> run_steps(torch::optim::AdamW& opt, float lr, std::int64_t warmup, std::int64_t steps,
                              std::int64_t tokens_per_step, const std::function<Expected<torch::Tensor>(std::int64_t)>& loss_of,
                              const DistillProgress& progress, const std::function<void()>& before_update = {});

}  // namespace peregrine::train
