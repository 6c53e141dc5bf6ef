#include "train/torch/training_steps.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>
#include <random>

namespace peregrine::train {

float cosine_learning_rate(float lr, std::int64_t warmup, std::int64_t steps, std::int64_t step) {
  if (step < warmup) return lr * static_cast<float>(step + 1) / static_cast<float>(warmup);
  const double span = static_cast<double>(std::max<std::int64_t>(1, steps - warmup));
  const double progress = static_cast<double>(step - warmup) / span;
  const double lo = lr / 10.0;
  return static_cast<float>(lo + 0.5 * (lr - lo) * (1.0 + std::cos(std::numbers::pi * progress)));
}

torch::Tensor text_windows(std::span<const std::int32_t> text, std::int32_t bos, std::int64_t batch, std::int64_t seq,
                           std::uint64_t seed, std::int64_t step) {
  std::mt19937_64 rng(seed * 1000003u + static_cast<std::uint64_t>(step));
  const std::int64_t body = bos >= 0 ? seq - 1 : seq;
  std::uniform_int_distribution<std::int64_t> start(0, static_cast<std::int64_t>(text.size()) - body);
  torch::Tensor tokens = torch::empty({batch, seq}, torch::kInt64);
  auto acc = tokens.accessor<std::int64_t, 2>();
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t s = start(rng);
    std::int64_t i = 0;
    if (bos >= 0) acc[b][i++] = bos;
    for (std::int64_t j = 0; j < body; ++j) acc[b][i++] = text[static_cast<std::size_t>(s + j)];
  }
  return tokens;
}

double LossLog::last() const {
  const std::size_t tail = std::min<std::size_t>(10, losses.size());
  double sum = 0.0;
  for (std::size_t i = losses.size() - tail; i < losses.size(); ++i) sum += losses[i];
  return tail > 0 ? sum / static_cast<double>(tail) : 0.0;
}

Expected<StepsDone> run_steps(torch::optim::AdamW& opt, float lr, std::int64_t warmup, std::int64_t steps,
                              std::int64_t tokens_per_step, const std::function<Expected<torch::Tensor>(std::int64_t)>& loss_of,
                              const DistillProgress& progress, const std::function<void()>& before_update) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  StepsDone done;
  for (std::int64_t step = 0; step < steps; ++step) {
    for (auto& group : opt.param_groups()) {
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(cosine_learning_rate(lr, warmup, steps, step));
    }
    PEREGRINE_ASSIGN_OR_RETURN(const torch::Tensor loss, loss_of(step));
    opt.zero_grad();
    loss.backward();
    if (before_update) before_update();
    opt.step();
    done.log.losses.push_back(loss.item<double>());
    if (progress) {
      progress(step + 1, steps, done.log.losses.back(), static_cast<double>((step + 1) * tokens_per_step) / std::max(seconds(), 1e-9));
    }
  }
  done.seconds = seconds();
  return done;
}

}  // namespace peregrine::train
