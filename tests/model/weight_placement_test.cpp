// LlamaModel's WeightPlacement: the weight matrices copied into huge pages (Q4_0 and F16 / BF16
// packed there) or read in place, for stories260K as stored (f32) and converted on load to f16,
// q8_0 and q4_0 (whose 172-long ffn_down rows are no whole blocks: kept in F16), on a prompt
// forward and the decode steps after it. The same bytes through the same kernels give
// bit-identical logits (f32; Q4_0 is packed in both placements); F16 matrices go through the
// packed GEMV in huge pages and the row-major one in place, which sum in another order: those
// logits agree to f32 rounding.
#include <gtest/gtest.h>

#include "peregrine/kernels/cpu/matmul/half_packed.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/quant/convert_model.h"
#include "formats/test_files.h"
#include "test_models.h"

namespace peregrine {
namespace {

// Logits of a 6-token prompt forward, then of 4 decode steps, in one vector.
std::vector<float> logits_of(DType dtype, WeightPlacement placement, ThreadPool& pool) {
  auto file = load_model_file(test::shared_dir() + "/models/stories260K/stories260K.bin");
  EXPECT_TRUE(file) << file.status().message();
  if (dtype != DType::kF32) {
    EXPECT_TRUE(convert_model_weights(*file, dtype, &pool));
  }
  auto model = LlamaModel::create(std::move(*file), placement);
  EXPECT_TRUE(model) << model.status().message();
  const std::vector<std::int32_t> tokens = {1, 403, 407, 261, 378, 280, 300, 310, 320, 330};
  KvCache cache = test::make_kv_cache(model->config(), static_cast<std::int64_t>(tokens.size()));
  std::vector<float> all, logits;
  Batch batch;
  for (std::int32_t i = 0; i < 6; ++i) batch.add(tokens[i], i, 0, true);
  EXPECT_TRUE(model->forward(batch, cache, logits, pool));
  all = logits;
  for (std::int32_t i = 6; i < static_cast<std::int32_t>(tokens.size()); ++i) {
    batch.clear();
    batch.add(tokens[i], i, 0, true);
    EXPECT_TRUE(model->forward(batch, cache, logits, pool));
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

TEST(WeightPlacement, HugePagesAndInPlaceGiveTheSameLogits) {
  ThreadPool pool(2);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0}) {
    const std::vector<float> huge = logits_of(dtype, WeightPlacement::kHugePages, pool);
    const std::vector<float> in_place = logits_of(dtype, WeightPlacement::kInPlace, pool);
    ASSERT_EQ(huge.size(), in_place.size());
    ASSERT_FALSE(huge.empty());
    if (dtype == DType::kF32 || !half_packed_gemv_available()) {
      EXPECT_EQ(huge, in_place) << dtype_name(dtype);
      continue;
    }
    for (std::size_t i = 0; i < huge.size(); ++i) {
      // Logits of magnitude ~10 after 5 layers of f32 products of 64 and 172 terms.
      ASSERT_NEAR(huge[i], in_place[i], 1e-4) << dtype_name(dtype) << " logit " << i;
    }
  }
}

}  // namespace
}  // namespace peregrine
