// The target's features (final hidden states after its final norm) for the Medusa drafter
// tests; the heads themselves: test::untrained_medusa_heads (test_models.h).
#pragma once

#include <cstdint>
#include <vector>

#include "peregrine/model/llama_model.h"

namespace peregrine::test {

/// The target's features (final hidden states after its final norm) [tokens.size(), dim] of
/// one forward over `tokens`, and its logits [tokens.size(), vocab].
struct Features {
  std::vector<float> features, logits;
};
Features target_features(const LlamaModel& target, const std::vector<std::int32_t>& tokens, ThreadPool& pool);

}  // namespace peregrine::test
