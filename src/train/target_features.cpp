#include "peregrine/train/target_features.h"

#include "peregrine/eval/eval_windows.h"
#include "peregrine/model/final_hidden.h"

namespace peregrine::train {

Expected<std::vector<float>> target_features(const LlamaModel& target, std::span<const std::int32_t> tokens, ThreadPool& pool) {
  const ModelConfig& c = target.config();
  const auto T = static_cast<std::int64_t>(tokens.size());
  if (T < 1 || T > c.max_seq_len) {
    return invalid_argument("target_features: " + std::to_string(T) + " tokens; give between 1 and the context (" +
                            std::to_string(c.max_seq_len) + ")");
  }
  PEREGRINE_ASSIGN_OR_RETURN(KvCache cache, make_window_cache(c, T, DType::kF32));
  Batch batch;
  for (std::int64_t i = 0; i < T; ++i) batch.add(tokens[static_cast<std::size_t>(i)], static_cast<std::int32_t>(i), 0, i == T - 1);
  FinalHiddenCapture hidden(c.n_layers);
  std::vector<float> logits;
  PEREGRINE_RETURN_IF_ERROR(target.forward(batch, cache, logits, pool, 0, &hidden));
  std::vector<float> f = hidden.values();
  target.output_norm(f, f);  // as the forward before its LM head
  return f;
}

}  // namespace peregrine::train
