#include "peregrine/model/spec/rope_scaling.h"

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
    case RopeScaling::Kind::kLongRope: return "longrope";
    case RopeScaling::Kind::kDynamic: return "dynamic";
  }
  return "none";
}

bool rope_scaling_follows_length(const RopeScaling& s) {
  return s.kind == RopeScaling::Kind::kLongRope || s.kind == RopeScaling::Kind::kDynamic;
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

// Dynamic NTK's divisors at `seq_len` positions: theta' / theta =
// (factor · max(seq_len, L) / L − (factor − 1))^(d / (d − 2)), pair i divided by its 2i/d power.
std::vector<float> dynamic_ntk_factors(const RopeScaling& s, std::int64_t head_dim, std::int64_t seq_len) {
  const double dim = static_cast<double>(head_dim), context = static_cast<double>(s.original_context);
  const double length = std::max(static_cast<double>(seq_len), context);
  const double base_ratio = std::pow(s.factor * length / context - (s.factor - 1.0), dim / (dim - 2.0));
  std::vector<float> out(static_cast<std::size_t>(head_dim / 2));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(std::pow(base_ratio, 2.0 * static_cast<double>(i) / dim));
  return out;
}

// Why a longrope factor list is invalid for heads of `head_dim` ("" when valid).
std::string longrope_list_error(const std::vector<float>& factors, const char* name, std::int64_t head_dim) {
  if (static_cast<std::int64_t>(factors.size()) != head_dim / 2) {
    return std::string("rope_scaling longrope ") + name + " has " + std::to_string(factors.size()) + " values, expected head_dim / 2 = " +
           std::to_string(head_dim / 2);
  }
  for (std::size_t i = 0; i < factors.size(); ++i) {
    if (!std::isfinite(factors[i]) || !(factors[i] > 0.0f)) {
      return std::string("rope_scaling longrope ") + name + "[" + std::to_string(i) + "] = " + std::to_string(factors[i]) +
             " (each must be positive and finite)";
    }
  }
  return "";
}

std::string longrope_error(const RopeScaling& s, std::int64_t head_dim) {
  if (s.attention_factor == 0.0f && s.factor > 1.0f && s.original_context < 2) {  // its default divides by ln(L)
    return "rope_scaling longrope's default attention_factor needs original_max_position_embeddings > 1";
  }
  if (std::string e = longrope_list_error(s.short_factor, "short_factor", head_dim); !e.empty()) return e;
  return longrope_list_error(s.long_factor, "long_factor", head_dim);
}

}  // namespace

float rope_attention_factor(const RopeScaling& s) {
  if (s.kind != RopeScaling::Kind::kYarn && s.kind != RopeScaling::Kind::kLongRope) return 1.0f;
  if (s.attention_factor > 0.0f) return s.attention_factor;
  if (s.factor <= 1.0f) return 1.0f;
  const double ln_factor = std::log(static_cast<double>(s.factor));
  if (s.kind == RopeScaling::Kind::kYarn) return static_cast<float>(0.1 * ln_factor + 1.0);
  return static_cast<float>(std::sqrt(1.0 + ln_factor / std::log(static_cast<double>(s.original_context))));
}

std::vector<float> rope_freq_factors(const RopeScaling& s, std::int64_t head_dim, float theta, std::int64_t seq_len) {
  switch (s.kind) {
    case RopeScaling::Kind::kNone: return {};
    case RopeScaling::Kind::kYarn: return yarn_factors(s, head_dim, theta);
    case RopeScaling::Kind::kLongRope: return seq_len > s.original_context ? s.long_factor : s.short_factor;
    case RopeScaling::Kind::kDynamic: return dynamic_ntk_factors(s, head_dim, seq_len);
    case RopeScaling::Kind::kLinear:
    case RopeScaling::Kind::kLlama3: break;
  }
  std::vector<float> out(static_cast<std::size_t>(head_dim / 2));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double freq = std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    const double f = s.kind == RopeScaling::Kind::kLinear ? s.factor : llama3_factor(s, 2.0 * std::numbers::pi / freq);
    out[i] = static_cast<float>(f);
  }
  return out;
}

std::string rope_scaling_error(const RopeScaling& s, std::int64_t head_dim) {
  if (s.kind == RopeScaling::Kind::kNone) return "";
  const float min_factor = s.kind == RopeScaling::Kind::kLongRope ? 0.0f : 1.0f;
  if (!std::isfinite(s.factor) || !(s.factor >= min_factor) || !(s.factor > 0.0f)) {
    return std::string("rope_scaling factor must be ") + (min_factor > 0.0f ? ">= 1" : "positive") + ", got " + std::to_string(s.factor);
  }
  if (s.kind == RopeScaling::Kind::kLinear) return "";
  if (s.original_context <= 0) return "rope_scaling original_max_position_embeddings must be positive";
  if (s.kind == RopeScaling::Kind::kDynamic) return "";
  if (!std::isfinite(s.attention_factor) || s.attention_factor < 0.0f) return "rope_scaling attention_factor must be >= 0";
  if (s.kind == RopeScaling::Kind::kLongRope) return longrope_error(s, head_dim);
  if (s.kind == RopeScaling::Kind::kYarn) {
    if (!std::isfinite(s.beta_fast) || !(s.beta_slow > 0.0f) || !(s.beta_fast > s.beta_slow)) {
      return "rope_scaling yarn needs beta_fast > beta_slow > 0, got " + std::to_string(s.beta_fast) + " and " +
             std::to_string(s.beta_slow);
    }
    return "";
  }
  if (!std::isfinite(s.high_freq_factor) || !(s.low_freq_factor > 0.0f) || !(s.low_freq_factor < s.high_freq_factor)) {
    return "rope_scaling needs 0 < low_freq_factor < high_freq_factor, got " + std::to_string(s.low_freq_factor) + " and " +
           std::to_string(s.high_freq_factor);
  }
  return "";
}

}  // namespace peregrine
