// The training library's entry point: the TrainApi table (train/train_api.h) over the libtorch
// implementations, and the two helpers the tests reach through it.
#include "train/train_api.h"
#include "train/torch/distill_impl.h"
#include "train/torch/eagle_impl.h"
#include "train/torch/finetune_impl.h"
#include "train/torch/kd_loss.h"
#include "train/torch/llama_student.h"
#include "train/torch/medusa_impl.h"

namespace peregrine::train {
namespace {

Expected<std::vector<float>> student_logits_impl(const FloatModel& m, std::span<const std::int32_t> tokens) {
  PEREGRINE_ASSIGN_OR_RETURN(const LlamaStudent s, LlamaStudent::from(m));
  if (tokens.empty() || static_cast<std::int64_t>(tokens.size()) > m.config().max_seq_len) {
    return invalid_argument("student_logits: between 1 and the context's tokens");
  }
  std::vector<std::int64_t> ids(tokens.begin(), tokens.end());
  const torch::NoGradGuard no_grad;
  const torch::Tensor logits = s.forward(torch::tensor(ids).view({1, -1})).contiguous();
  return std::vector<float>(logits.data_ptr<float>(), logits.data_ptr<float>() + logits.numel());
}

Expected<double> kd_loss_value_impl(KdLoss loss, std::span<const float> student, std::span<const float> teacher,
                                    std::span<const std::int64_t> targets, std::int64_t vocab, float temperature) {
  if (vocab < 1 || student.size() % static_cast<std::size_t>(vocab) != 0 || teacher.size() != student.size() ||
      targets.size() != student.size() / static_cast<std::size_t>(vocab)) {
    return invalid_argument("kd_loss_value: logits must be [N, vocab] each and targets [N]");
  }
  const auto n = static_cast<std::int64_t>(targets.size());
  const auto as_tensor = [&](std::span<const float> v) {
    return torch::from_blob(const_cast<float*>(v.data()), {n, vocab}, torch::kFloat32).clone();
  };
  const torch::Tensor t = torch::from_blob(const_cast<std::int64_t*>(targets.data()), {n}, torch::kInt64).clone();
  return kd_loss(loss, as_tensor(student), as_tensor(teacher), t, temperature).item<double>();
}

constexpr TrainApi kApi{check_student_support_impl, initial_student_impl, distill_impl, student_logits_impl, kd_loss_value_impl,
                        train_medusa_impl,          train_eagle_impl,     eagle_reference_impl, finetune_impl,
                        lora_reference_logits_impl};

}  // namespace
}  // namespace peregrine::train

extern "C" __attribute__((visibility("default"))) const peregrine::train::TrainApi* peregrine_train_api() {
  return &peregrine::train::kApi;
}
