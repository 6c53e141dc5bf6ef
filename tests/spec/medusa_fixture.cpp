#include "spec/medusa_fixture.h"

#include <gtest/gtest.h>

#include "peregrine/model/final_hidden.h"
#include "test_models.h"

namespace peregrine::test {

Features target_features(const LlamaModel& target, const std::vector<std::int32_t>& tokens, ThreadPool& pool) {
  KvCache cache = make_kv_cache(target.config(), static_cast<std::int64_t>(tokens.size()));
  Batch batch;
  for (std::size_t i = 0; i < tokens.size(); ++i) batch.add(tokens[i], static_cast<std::int32_t>(i), 0, true);
  FinalHiddenCapture capture(target.config().n_layers);
  Features f;
  EXPECT_TRUE(target.forward(batch, cache, f.logits, pool, 0, &capture).is_ok());
  f.features = capture.values();
  target.output_norm(f.features, f.features);
  return f;
}

}  // namespace peregrine::test
