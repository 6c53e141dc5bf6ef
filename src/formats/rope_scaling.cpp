#include "peregrine/formats/rope_scaling.h"

#include <cmath>
#include <numbers>

namespace peregrine {

const char* rope_scaling_name(RopeScaling::Kind k) {
  switch (k) {
    case RopeScaling::Kind::kNone: return "none";
    case RopeScaling::Kind::kLinear: return "linear";
    case RopeScaling::Kind::kLlama3: return "llama3";
  }
  return "none";
}

namespace {

// The llama3 divisor of a pair whose RoPE wavelength is `wavelength` positions.
double llama3_factor(const RopeScaling& s, double wavelength) {
  const double context = static_cast<double>(s.original_context);
  if (wavelength < context / s.high_freq_factor) return 1.0;
  if (wavelength > context / s.low_freq_factor) return s.factor;
  const double smooth = (context / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return 1.0 / ((1.0 - smooth) / s.factor + smooth);
}

}  // namespace

std::vector<float> rope_freq_factors(const RopeScaling& s, std::int64_t head_dim, float theta) {
  if (s.kind == RopeScaling::Kind::kNone) return {};
  std::vector<float> out(static_cast<std::size_t>(head_dim / 2));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double freq = std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    const double f = s.kind == RopeScaling::Kind::kLinear ? s.factor : llama3_factor(s, 2.0 * std::numbers::pi / freq);
    out[i] = static_cast<float>(f);
  }
  return out;
}

std::string rope_scaling_error(const RopeScaling& s) {
  if (s.kind == RopeScaling::Kind::kNone) return "";
  if (!std::isfinite(s.factor) || !(s.factor >= 1.0f)) return "rope_scaling factor must be >= 1, got " + std::to_string(s.factor);
  if (s.kind != RopeScaling::Kind::kLlama3) return "";
  if (s.original_context <= 0) return "rope_scaling original_max_position_embeddings must be positive";
  if (!std::isfinite(s.high_freq_factor) || !(s.low_freq_factor > 0.0f) || !(s.low_freq_factor < s.high_freq_factor)) {
    return "rope_scaling needs 0 < low_freq_factor < high_freq_factor, got " + std::to_string(s.low_freq_factor) + " and " +
           std::to_string(s.high_freq_factor);
  }
  return "";
}

}  // namespace peregrine
