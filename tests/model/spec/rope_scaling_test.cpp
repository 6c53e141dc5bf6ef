// The scaled-RoPE rules of model/spec/rope_scaling.h that follow the sequence length, checked on
// values worked out by hand from HF's modeling_rope_utils.py (_compute_longrope_parameters,
// _compute_dynamic_ntk_parameters).
#include "peregrine/model/spec/rope_scaling.h"

#include <gtest/gtest.h>

#include <cmath>

namespace peregrine {
namespace {

RopeScaling longrope() {
  RopeScaling s;
  s.kind = RopeScaling::Kind::kLongRope;
  s.factor = 4.0f;
  s.original_context = 64;
  s.short_factor = {1.0f, 1.5f};
  s.long_factor = {1.0f, 4.0f};
  return s;
}

RopeScaling dynamic_ntk() {
  RopeScaling s;
  s.kind = RopeScaling::Kind::kDynamic;
  s.factor = 2.0f;
  s.original_context = 64;
  return s;
}

// The short factors up to the original context, the long ones past it; the attention factor
// sqrt(1 + ln(factor) / ln(original)) unless given, 1 for a factor <= 1.
TEST(RopeScaling, LongRopeSwitchesPastTheOriginalContext) {
  const RopeScaling s = longrope();
  EXPECT_TRUE(rope_scaling_follows_length(s));
  EXPECT_EQ(rope_freq_factors(s, 4, 1e4f, 1), s.short_factor);
  EXPECT_EQ(rope_freq_factors(s, 4, 1e4f, 64), s.short_factor);
  EXPECT_EQ(rope_freq_factors(s, 4, 1e4f, 65), s.long_factor);
  EXPECT_FLOAT_EQ(rope_attention_factor(s), std::sqrt(1.0f + std::log(4.0f) / std::log(64.0f)));
  RopeScaling given = s;
  given.attention_factor = 1.25f;
  EXPECT_EQ(rope_attention_factor(given), 1.25f);
  RopeScaling shrunk = s;
  shrunk.factor = 0.5f;
  EXPECT_EQ(rope_attention_factor(shrunk), 1.0f);
  EXPECT_EQ(rope_scaling_error(shrunk, 4), "");  // max_position_embeddings below the original context
}

// theta' / theta = (factor · n / L − (factor − 1))^(d / (d − 2)), pair i divided by its 2i/d
// power; nothing changes up to L. head_dim 4, factor 2, L 64, n 128: (4 − 1)^2 = 9, so [1, 3].
TEST(RopeScaling, DynamicNtkGrowsTheBaseWithTheLength) {
  const RopeScaling s = dynamic_ntk();
  EXPECT_TRUE(rope_scaling_follows_length(s));
  EXPECT_EQ(rope_freq_factors(s, 4, 1e4f, 64), (std::vector<float>{1.0f, 1.0f}));
  const auto f = rope_freq_factors(s, 4, 1e4f, 128);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[1], 3.0f);
  EXPECT_EQ(rope_attention_factor(s), 1.0f);
  RopeScaling linear;
  linear.kind = RopeScaling::Kind::kLinear;
  EXPECT_FALSE(rope_scaling_follows_length(linear));
}

TEST(RopeScaling, ErrorsNameTheField) {
  RopeScaling s = longrope();
  EXPECT_EQ(rope_scaling_error(s, 4), "");
  EXPECT_NE(rope_scaling_error(s, 8).find("short_factor has 2 values, expected head_dim / 2 = 4"), std::string::npos);
  s.long_factor[1] = NAN;
  EXPECT_NE(rope_scaling_error(s, 4).find("long_factor[1]"), std::string::npos);
  s = longrope();
  s.original_context = 0;
  EXPECT_NE(rope_scaling_error(s, 4).find("original_max_position_embeddings must be positive"), std::string::npos);
  s.original_context = 1;  // ln(1) = 0 under the default attention factor
  EXPECT_NE(rope_scaling_error(s, 4).find("original_max_position_embeddings > 1"), std::string::npos);
  s.attention_factor = 1.0f;
  EXPECT_EQ(rope_scaling_error(s, 4), "");
  RopeScaling d = dynamic_ntk();
  EXPECT_EQ(rope_scaling_error(d, 4), "");
  d.factor = 0.5f;
  EXPECT_NE(rope_scaling_error(d, 4).find("factor must be >= 1"), std::string::npos);
}

}  // namespace
}  // namespace peregrine
