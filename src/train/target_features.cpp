#include "peregrine/train/target_features.h"

#include "peregrine/eval/eval_windows.h"
#include "peregrine/kernels/cpu/elementwise.h"
#include "peregrine/model/activation_observer.h"

namespace peregrine::train {
namespace {

// The residual stream after the last block of one forward (before the final norm).
class FinalHidden final : public ActivationObserver {
 public:
  explicit FinalHidden(std::int64_t n_layers) : n_layers_(n_layers) {}
  void observe(std::int64_t, LinearInput, std::span<const float>, std::int64_t) override {}
  void observe_hidden(std::int64_t layer, std::span<const float> h, std::int64_t) override {
    if (layer == n_layers_) h_.assign(h.begin(), h.end());
  }
  std::vector<float>& values() { return h_; }

 private:
  std::int64_t n_layers_;
  std::vector<float> h_;
};

}  // namespace

Expected<std::vector<float>> target_features(const LlamaModel& target, const FloatModel& target_f32,
                                             std::span<const std::int32_t> tokens, ThreadPool& pool) {
  const ModelConfig& c = target.config();
  const auto T = static_cast<std::int64_t>(tokens.size());
  if (T < 1 || T > c.max_seq_len) {
    return invalid_argument("target_features: " + std::to_string(T) + " tokens; give between 1 and the context (" +
                            std::to_string(c.max_seq_len) + ")");
  }
  PEREGRINE_ASSIGN_OR_RETURN(KvCache cache, make_window_cache(c, T, DType::kF32));
  Batch batch;
  for (std::int64_t i = 0; i < T; ++i) batch.add(tokens[static_cast<std::size_t>(i)], static_cast<std::int32_t>(i), 0, i == T - 1);
  FinalHidden hidden(c.n_layers);
  std::vector<float> logits;
  PEREGRINE_RETURN_IF_ERROR(target.forward(batch, cache, logits, pool, 0, &hidden));
  std::vector<float> norm(target_f32.tensor("output_norm.weight").begin(), target_f32.tensor("output_norm.weight").end());
  for (float& w : norm) w += c.norm_weight_offset;
  std::vector<float>& f = hidden.values();
  for (std::int64_t i = 0; i < T; ++i) {
    float* row = &f[static_cast<std::size_t>(i * c.dim)];
    rmsnorm(row, norm.data(), row, c.dim, c.rms_eps);  // in place, as the forward before its LM head
  }
  return std::move(f);
}

}  // namespace peregrine::train
