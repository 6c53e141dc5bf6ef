#include "peregrine/quant/scale_folding.h"

#include <cmath>
#include <string>

namespace peregrine {
namespace {

// Width of the activation `input` reads.
std::int64_t input_width(const ModelConfig& c, LinearInput input) {
  switch (input) {
    case LinearInput::kAttention:
    case LinearInput::kFfn: return c.dim;
    case LinearInput::kAttentionOutput: return c.n_heads * c.head_dim;
    case LinearInput::kFfnDown: return c.ffn_dim;
  }
  return 0;
}

// W[:, j] *= s_j for a row-major matrix w [rows, s.size()].
void scale_columns(std::span<float> w, std::span<const float> s) {
  for (std::size_t i = 0; i < w.size(); ++i) w[i] *= s[i % s.size()];
}

// Row r (or, for a vector, element r) of w [s.size(), cols] divided by s_r.
void divide_rows(std::span<float> w, std::span<const float> s) {
  const std::size_t cols = w.size() / s.size();
  for (std::size_t i = 0; i < w.size(); ++i) w[i] /= s[i / cols];
}

// The tensor that produces `input` (and is divided by s): a norm weight or a Linear's rows.
const char* producer_name(LinearInput input) {
  switch (input) {
    case LinearInput::kAttention: return "attn_norm";
    case LinearInput::kFfn: return "ffn_norm";
    case LinearInput::kAttentionOutput: return "attn_v";
    case LinearInput::kFfnDown: return "ffn_up";
  }
  return "";
}

const char* input_name(LinearInput input) {
  switch (input) {
    case LinearInput::kAttention: return "attention input";
    case LinearInput::kFfn: return "FFN input";
    case LinearInput::kAttentionOutput: return "attention output";
    case LinearInput::kFfnDown: return "ffn_down input";
  }
  return "";
}

Status check_scales(const FloatModel& m, std::int64_t layer, LinearInput input, std::span<const float> s) {
  if (layer < 0 || layer >= m.config().n_layers) {
    return invalid_argument("scale folding: layer " + std::to_string(layer) + " outside [0, " +
                            std::to_string(m.config().n_layers) + ")");
  }
  const std::int64_t width = input_width(m.config(), input);
  if (static_cast<std::int64_t>(s.size()) != width) {
    return invalid_argument("scale folding: " + std::to_string(s.size()) + " scales for the " +
                            input_name(input) + " of width " + std::to_string(width));
  }
  for (std::size_t j = 0; j < s.size(); ++j) {
    if (!std::isfinite(s[j]) || s[j] <= 0.0f) {
      return invalid_argument("scale folding: scale " + std::to_string(j) + " is " + std::to_string(s[j]) +
                              " (must be finite and > 0)");
    }
  }
  return Status::ok();
}

}  // namespace

bool can_fold_input_scales(const FloatModel& m, LinearInput input) {
  switch (input) {
    case LinearInput::kAttention:
    case LinearInput::kFfn: return true;
    case LinearInput::kAttentionOutput: return m.config().n_heads == m.config().n_kv_heads;
    case LinearInput::kFfnDown: return !m.config().ffn_down_hadamard;
  }
  return false;
}

Status fold_input_scales(FloatModel& m, std::int64_t layer, LinearInput input, std::span<const float> s) {
  if (!can_fold_input_scales(m, input)) {
    return unsupported(std::string("scale folding: the ") + input_name(input) + " cannot absorb scales " +
                       (input == LinearInput::kAttentionOutput ? "with grouped-query attention (n_heads != n_kv_heads)"
                                                               : "after the online Hadamard rotation"));
  }
  PEREGRINE_RETURN_IF_ERROR(check_scales(m, layer, input, s));
  for (const char* reader : linear_names(input)) scale_columns(m.tensor(layer_tensor_name(layer, reader)), s);
  const std::span<float> producer = m.tensor(layer_tensor_name(layer, producer_name(input)));
  const bool norm = input == LinearInput::kAttention || input == LinearInput::kFfn;
  const float offset = norm ? m.config().norm_weight_offset : 0.0f;  // a norm applied as offset + g
  for (float& g : producer) g += offset;
  divide_rows(producer, s);
  for (float& g : producer) g -= offset;
  // A producing Linear's bias (Qwen2's attn_v) is part of its output rows: divided alike.
  const std::string bias = "blk." + std::to_string(layer) + "." + producer_name(input) + ".bias";
  if (m.has(bias)) divide_rows(m.tensor(bias), s);
  return Status::ok();
}

}  // namespace peregrine
