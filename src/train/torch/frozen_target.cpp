#include "train/torch/frozen_target.h"

#include "peregrine/train/target_features.h"
#include "train/torch/llama_student.h"

namespace peregrine::train {

Status start_head_run(const FloatModel& target_f32, std::int64_t seq, std::size_t text_tokens, std::uint64_t seed, ThreadPool& pool) {
  PEREGRINE_RETURN_IF_ERROR(check_student_support_impl(target_f32));
  const std::int64_t context = target_f32.config().max_seq_len;
  if (seq > context) {
    return invalid_argument("--seq " + std::to_string(seq) + " is longer than the target's context (" + std::to_string(context) + ")");
  }
  if (static_cast<std::int64_t>(text_tokens) < seq + 1) {
    return invalid_argument("the training text holds " + std::to_string(text_tokens) + " tokens, fewer than --seq + 1 = " +
                            std::to_string(seq + 1));
  }
  torch::manual_seed(seed);
  torch::set_num_threads(static_cast<int>(pool.n_threads()));
  return Status::ok();
}

Expected<torch::Tensor> target_features_batch(const LlamaModel& target, const torch::Tensor& tokens, ThreadPool& pool) {
  const std::int64_t B = tokens.size(0), T = tokens.size(1), dim = target.config().dim;
  torch::Tensor out = torch::empty({B, T, dim}, torch::kFloat32);
  const auto ids = tokens.accessor<std::int64_t, 2>();
  std::vector<std::int32_t> row(static_cast<std::size_t>(T));
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t i = 0; i < T; ++i) row[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(ids[b][i]);
    PEREGRINE_ASSIGN_OR_RETURN(const std::vector<float> f, target_features(target, row, pool));
    std::copy(f.begin(), f.end(), out[b].data_ptr<float>());
  }
  return out;
}

torch::Tensor tensor_of(const FloatModel& m, const std::string& name) {
  const auto v = m.tensor(name);
  return torch::from_blob(const_cast<float*>(v.data()), m.shape(name), torch::kFloat32).clone();
}

torch::Tensor lm_head_of(const FloatModel& m) {
  return tensor_of(m, m.config().tied_embeddings ? "token_embd.weight" : "output.weight");
}

std::vector<float> values_of(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

}  // namespace peregrine::train
