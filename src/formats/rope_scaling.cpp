#include "peregrine/formats/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace peregrine {

const char* rope_scaling_name(RopeScaling::Kind k) {
  switch (k) {
    case RopeScaling::Kind::kNone: return "none";
    case RopeScaling::Kind::kLinear: return "linear";
    case RopeScaling::Kind::kLlama3: return "llama3";
    case RopeScaling::Kind::kYarn: return "yarn";
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

// YaRN's divisor of every pair: interpolation by `factor` blended with extrapolation by the
// ramp between the pairs turning beta_fast and beta_slow times over the original context.
std::vector<float> yarn_factors(const RopeScaling& s, std::int64_t head_dim, float theta) {
  const double dim = static_cast<double>(head_dim), context = static_cast<double>(s.original_context);
  const auto pair_of = [&](double rotations) {
    return dim * std::log(context / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(static_cast<double>(theta)));
  };
  const double low = std::max(std::floor(pair_of(s.beta_fast)), 0.0);
  double high = std::min(std::ceil(pair_of(s.beta_slow)), dim - 1.0);
  if (high == low) high += 0.001;
  std::vector<float> out(static_cast<std::size_t>(head_dim / 2));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double extrapolation = 1.0 - std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    out[i] = static_cast<float>(1.0 / ((1.0 - extrapolation) / s.factor + extrapolation));
  }
  return out;
}

}  // namespace

float rope_attention_factor(const RopeScaling& s) {
  if (s.kind != RopeScaling::Kind::kYarn) return 1.0f;
  if (s.attention_factor > 0.0f) return s.attention_factor;
  return s.factor <= 1.0f ? 1.0f : static_cast<float>(0.1 * std::log(static_cast<double>(s.factor)) + 1.0);
}

std::vector<float> rope_freq_factors(const RopeScaling& s, std::int64_t head_dim, float theta) {
  if (s.kind == RopeScaling::Kind::kNone) return {};
  if (s.kind == RopeScaling::Kind::kYarn) return yarn_factors(s, head_dim, theta);
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
  if (s.kind == RopeScaling::Kind::kLinear) return "";
  if (s.original_context <= 0) return "rope_scaling original_max_position_embeddings must be positive";
  if (s.kind == RopeScaling::Kind::kYarn) {
    if (!std::isfinite(s.beta_fast) || !(s.beta_slow > 0.0f) || !(s.beta_fast > s.beta_slow)) {
      return "rope_scaling yarn needs beta_fast > beta_slow > 0, got " + std::to_string(s.beta_fast) + " and " +
             std::to_string(s.beta_slow);
    }
    if (!std::isfinite(s.attention_factor) || s.attention_factor < 0.0f) return "rope_scaling attention_factor must be >= 0";
    return "";
  }
  if (!std::isfinite(s.high_freq_factor) || !(s.low_freq_factor > 0.0f) || !(s.low_freq_factor < s.high_freq_factor)) {
    return "rope_scaling needs 0 < low_freq_factor < high_freq_factor, got " + std::to_string(s.low_freq_factor) + " and " +
           std::to_string(s.high_freq_factor);
  }
  return "";
}

}  // namespace peregrine
