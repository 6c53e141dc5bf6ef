// The pieces of `peregrine pareto` that need no model: the fronts, the recommendation within a
// quality budget, the configuration catalogue and its selection, and the resumable store.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "peregrine/eval/pareto_configs.h"
#include "peregrine/eval/pareto_front.h"
#include "peregrine/eval/pareto_store.h"

namespace peregrine {
namespace {

ParetoPoint point(const std::string& name, double kld, double tps, double bytes, double ppl = 10.0) {
  ParetoPoint p;
  p.name = name;
  p.technique = "gguf";
  p.kld = kld;
  p.decode_tps = tps;
  p.weight_bytes = bytes;
  p.ppl = ppl;
  p.ref_ppl = 10.0;
  return p;
}

std::vector<std::string> names(const std::vector<ParetoPoint>& pts, const std::vector<std::size_t>& idx) {
  std::vector<std::string> out;
  for (std::size_t i : idx) out.push_back(pts[i].name);
  return out;
}

// Shaped like SmolLM2-135M's sweep: F32 slow and exact, Q8_0 fast and close, a 4-bit mix faster
// still, a dominated RTN point (worse and slower than the mix), and an F16 copy of F32's quality
// but slower than Q8_0 and bigger than it.
std::vector<ParetoPoint> sweep_like() {
  return {point("f32", 0.0, 86.0, 538e6, 10.0), point("f16", 0.0, 150.0, 270e6, 10.0), point("q8_0", 0.004, 310.0, 143e6, 10.05),
          point("q4_k_m", 0.058, 330.0, 104e6, 10.4), point("rtn-w4-g32", 0.42, 278.0, 116e6, 13.2)};
}

TEST(ParetoFront, KeepsOnlyUndominatedPointsFromTheBestQualityUp) {
  const auto pts = sweep_like();
  EXPECT_EQ(names(pts, pareto_front(pts, ParetoAxis::kSpeed)), (std::vector<std::string>{"f16", "q8_0", "q4_k_m"}));
  EXPECT_EQ(names(pts, pareto_front(pts, ParetoAxis::kSize)), (std::vector<std::string>{"f16", "q8_0", "q4_k_m"}));
}

TEST(ParetoFront, EqualPointsAreBothKeptAndOneBetterOnOneAxisDominates) {
  std::vector<ParetoPoint> pts = {point("a", 0.1, 100, 1e6), point("b", 0.1, 100, 1e6), point("c", 0.1, 101, 1e6)};
  EXPECT_EQ(names(pts, pareto_front(pts, ParetoAxis::kSpeed)), (std::vector<std::string>{"c"}));
  EXPECT_EQ(names(pts, pareto_front(pts, ParetoAxis::kSize)), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(pareto_front({}, ParetoAxis::kSpeed).empty());
}

TEST(ParetoRecommend, FastestWithinTheBudget) {
  const auto pts = sweep_like();
  EXPECT_EQ(pts[*recommend(pts, {0.01, std::nullopt})].name, "q8_0");
  EXPECT_EQ(pts[*recommend(pts, {0.1, std::nullopt})].name, "q4_k_m");
  EXPECT_EQ(pts[*recommend(pts, {std::nullopt, 1.0})].name, "q8_0");  // q4_k_m's ppl is +4%
  EXPECT_EQ(pts[*recommend(pts, {0.0, std::nullopt})].name, "f16");
  EXPECT_EQ(pts[*recommend(pts, {})].name, "q4_k_m");
  EXPECT_FALSE(recommend(pts, {-1.0, std::nullopt}).has_value());
  EXPECT_NEAR(pts[3].ppl_increase_pct(), 4.0, 1e-9);
}

TEST(ParetoConfigs, CatalogueNamesAreUniqueAndTheReferenceComesFirst) {
  const auto all = pareto_catalogue();
  ASSERT_GE(all.size(), 12u);
  EXPECT_EQ(all.front().name, "f32");
  EXPECT_EQ(all.front().recipe, ParetoRecipe::kReference);
  for (std::size_t i = 0; i < all.size(); ++i) {
    for (std::size_t j = i + 1; j < all.size(); ++j) EXPECT_NE(all[i].name, all[j].name);
    if (all[i].recipe == ParetoRecipe::kQuantize && !all[i].quant.gguf_type) {
      EXPECT_TRUE(all[i].quant.validate()) << all[i].name;
    }
  }
  auto quick = select_pareto_configs("quick");
  ASSERT_TRUE(quick);
  EXPECT_GE(quick->size(), 12u);
  for (const ParetoConfig& c : *quick) EXPECT_FALSE(c.needs_calibration()) << c.name;
  auto every = select_pareto_configs("all");
  ASSERT_TRUE(every);
  EXPECT_EQ(every->size(), all.size());
}

TEST(ParetoConfigs, SelectionByNameKeepsTheReferenceFirstAndRejectsUnknownNames) {
  auto some = select_pareto_configs("q4_k_m,gptq-w4-g32,q4_k_m,f32,wanda-2:4");
  ASSERT_TRUE(some) << some.status().message();
  std::vector<std::string> got;
  for (const ParetoConfig& c : *some) got.push_back(c.name);
  EXPECT_EQ(got, (std::vector<std::string>{"f32", "q4_k_m", "gptq-w4-g32", "wanda-2:4"}));
  EXPECT_TRUE((*some)[2].quant.act_order);
  EXPECT_TRUE((*some)[2].needs_calibration());
  auto bad = select_pareto_configs("q4_k_m,q4_k_x");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'q4_k_x'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("sparsegpt-2:4"), std::string::npos) << "lists the known names";
}

class ParetoStore : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() / ("pareto_store_" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ParetoStore, SavedRunLoadsBackWithFrontsAndCsv) {
  auto empty = load_pareto_run(dir_);
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->setup.is_null());
  ParetoRun run{{{"model", "m.gguf"}, {"eval_tokens", 2048}}, sweep_like()};
  run.points[2].describe = "llama-quantize's Q8_0, \"quoted\"";
  ASSERT_TRUE(save_pareto_run(dir_, run));
  auto back = load_pareto_run(dir_);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->setup, run.setup);
  ASSERT_EQ(back->points.size(), run.points.size());
  EXPECT_EQ(back->points[2].describe, run.points[2].describe);
  EXPECT_DOUBLE_EQ(back->points[3].kld, 0.058);
  std::ifstream json(dir_ + "/pareto.json");
  const auto j = nlohmann::json::parse(json);
  EXPECT_EQ(j["front_speed"], (std::vector<std::size_t>{1, 2, 3}));
  std::ifstream csv(dir_ + "/pareto.csv");
  std::string header, first;
  std::getline(csv, header);
  std::getline(csv, first);
  EXPECT_EQ(header.rfind("name,technique,kld,", 0), 0u) << header;
  EXPECT_EQ(first.rfind("f32,gguf,0,", 0), 0u) << first;
}

TEST_F(ParetoStore, ACorruptFileIsAClearError) {
  std::ofstream(dir_ + "/pareto.json") << "{\"setup\": {}, \"points\": [{\"name\": \"q8_0\"}]}";
  auto r = load_pareto_run(dir_);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().code(), ErrorCode::kCorruptFile);
  EXPECT_NE(r.status().message().find("remove the file"), std::string::npos) << r.status().message();
  std::ofstream(dir_ + "/pareto.json") << "{\"setup\": ";
  r = load_pareto_run(dir_);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().code(), ErrorCode::kCorruptFile);
}

}  // namespace
}  // namespace peregrine
