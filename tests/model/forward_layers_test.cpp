// LlamaModel::forward_layers on stories260K and real TinyStories text: the layers run in two
// parts equal them in one call, bit for bit; bad layer ranges and stream sizes are errors.
#include <gtest/gtest.h>

#include "peregrine/model/llama_model.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

TEST(ForwardLayers, InTwoPartsEqualsOneCallAndChecksItsArguments) {
  auto model = test::load_stories260k();
  auto tok = load_tokenizer(model->file());
  ASSERT_TRUE(tok) << tok.status().message();
  std::vector<std::int32_t> ids = (*tok)->encode(test::read_file(test::shared_dir() + "/data/tinystories/tinystories_sample.txt"), true);
  ids.resize(100);
  const std::vector<std::vector<std::int32_t>> c = {ids};
  ThreadPool pool(2);
  const std::int64_t n = static_cast<std::int64_t>(c[0].size()), dim = model->config().dim, layers = model->config().n_layers;
  Batch batch;
  for (std::int64_t i = 0; i < n; ++i) batch.add(c[0][static_cast<std::size_t>(i)], static_cast<std::int32_t>(i), 0, false);
  std::vector<float> whole(static_cast<std::size_t>(n * dim)), parts(whole.size());
  KvCache a = test::make_kv_cache(model->config(), n), b = test::make_kv_cache(model->config(), n);
  ASSERT_TRUE(model->forward_layers(batch, a, whole, 0, layers, pool));
  ASSERT_TRUE(model->forward_layers(batch, b, parts, 0, 2, pool));
  EXPECT_NE(parts, whole);
  KvCache b2 = test::make_kv_cache(model->config(), n);
  ASSERT_TRUE(model->forward_layers(batch, b2, parts, 2, layers, pool));
  EXPECT_EQ(parts, whole);
  KvCache d = test::make_kv_cache(model->config(), n);
  EXPECT_EQ(model->forward_layers(batch, d, whole, 2, 2, pool).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(model->forward_layers(batch, d, whole, 0, layers + 1, pool).code(), ErrorCode::kInvalidArgument);
  std::vector<float> short_x(whole.size() - 1);
  EXPECT_EQ(model->forward_layers(batch, d, short_x, 0, 1, pool).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace peregrine
