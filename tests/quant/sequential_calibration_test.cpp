// SequentialCalibration (quant/calibration.h) on stories260K and real TinyStories text: its
// statistics of each layer equal calibrate()'s through the whole prefix of layers, bit for bit
// (the same layer computations, one layer per step).
#include <gtest/gtest.h>

#include "peregrine/quant/calibration.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

std::vector<std::vector<std::int32_t>> chunks(const LlamaModel& model) {
  auto tok = load_tokenizer(model.file());
  EXPECT_TRUE(tok) << tok.status().message();
  auto c = calibration_chunks(**tok, test::shared_dir() + "/data/tinystories/tinystories_sample.txt", 300, 128);
  EXPECT_TRUE(c) << c.status().message();
  return *c;
}

void expect_same_stats(const LayerStats& a, const LayerStats& b, std::int64_t layer) {
  for (std::size_t in = 0; in < a.size(); ++in) {
    SCOPED_TRACE("layer " + std::to_string(layer) + " input " + std::to_string(in));
    EXPECT_EQ(a[in].n_rows, b[in].n_rows);
    EXPECT_EQ(a[in].abs_max, b[in].abs_max);
    EXPECT_EQ(a[in].sq_sum, b[in].sq_sum);
    EXPECT_EQ(a[in].sample, b[in].sample);
    EXPECT_EQ(a[in].hessian(), b[in].hessian());
  }
}

TEST(SequentialCalibration, EveryLayerMatchesCalibratingThroughThePrefix) {
  auto model = test::load_stories260k();
  const auto c = chunks(*model);
  ASSERT_EQ(c.size(), 3u);  // 300 tokens in chunks of 128, later ones led by BOS
  ThreadPool pool(2);
  auto seq = SequentialCalibration::start(c);
  ASSERT_TRUE(seq) << seq.status().message();
  const CalibrationOptions o{true, 64};
  for (std::int64_t l = 0; l < model->config().n_layers; ++l) {
    ASSERT_EQ(seq->layer(), l);
    auto one = seq->stats(*model, o, pool);
    ASSERT_TRUE(one) << one.status().message();
    auto prefix = calibrate(*model, l, l, c, o, pool);
    ASSERT_TRUE(prefix) << prefix.status().message();
    EXPECT_GT((*one)[0].n_rows, 0);
    expect_same_stats(*one, prefix->front(), l);
    ASSERT_TRUE(seq->advance(*model, pool));
  }
}

TEST(SequentialCalibration, RejectsNoChunksAndEmptyChunks) {
  EXPECT_EQ(SequentialCalibration::start({}).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(SequentialCalibration::start({{1, 2}, {}}).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace peregrine
