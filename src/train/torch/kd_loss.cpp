#include "train/torch/kd_loss.h"

namespace peregrine::train {
namespace {

// Σ_v exp(log_a) · (log_a − log_b) per row, for log-probabilities [N, V].
torch::Tensor kl_rows(const torch::Tensor& log_a, const torch::Tensor& log_b) {
  return (log_a.exp() * (log_a - log_b)).sum(-1);
}

}  // namespace

torch::Tensor kd_loss(KdLoss loss, const torch::Tensor& student_logits, const torch::Tensor& teacher_logits,
                      const torch::Tensor& targets, float temperature) {
  if (loss == KdLoss::kCrossEntropy) {
    return torch::nn::functional::cross_entropy(student_logits, targets,
                                                torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1));
  }
  const double t = temperature;
  const torch::Tensor log_q = torch::log_softmax(student_logits / t, -1);
  const torch::Tensor log_p = torch::log_softmax(teacher_logits.detach() / t, -1);
  switch (loss) {
    case KdLoss::kForwardKl:
      return kl_rows(log_p, log_q).mean() * (t * t);
    case KdLoss::kReverseKl:
      return kl_rows(log_q, log_p).mean() * (t * t);
    case KdLoss::kJsd: {
      const torch::Tensor log_m = torch::logsumexp(torch::stack({log_p, log_q}), 0) - std::log(2.0);
      return 0.5 * (kl_rows(log_p, log_m) + kl_rows(log_q, log_m)).mean() * (t * t);
    }
    default:  // kTvd
      return 0.5 * (log_p.exp() - log_q.exp()).abs().sum(-1).mean();
  }
}

}  // namespace peregrine::train
