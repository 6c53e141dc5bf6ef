// `peregrine pareto` end to end on a real model (SmolLM2-135M) and real text (WikiText-2): a
// small sweep writes its JSON / CSV / PNG plots, orders the configurations as their bits do,
// recommends within a budget, resumes without re-running finished points, and refuses bad
// input with one clear error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "real_models.h"
#include "run_cli.h"

namespace peregrine::test {
namespace {

class ParetoCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() / ("pareto_cli_" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// A small sweep: 256 tokens in windows of 128, short timings.
  std::vector<std::string> args(const std::string& model, const std::string& configs) const {
    return {"pareto", "-m", model, "-o", dir_, "--configs", configs, "--eval-tokens", "256", "--ctx", "128",
            "-p", "32", "-n", "8", "-r", "1"};
  }
  std::string dir_;
};

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f, nullptr, false);
}

bool is_png(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[8] = {};
  f.read(magic, 8);
  return f && std::string(magic, 8) == "\x89PNG\r\n\x1a\n";
}

TEST_F(ParetoCli, SweepsPlotsRecommendsAndResumes) {
  const RealModelEntry model = real_model("smollm2-135m-instruct");
  PEREGRINE_REQUIRE_REAL_MODEL(model);
  auto a = args(model.path, "q8_0,q4_0,kv-q8_0");
  a.insert(a.end(), {"--max-kld", "0.02"});
  const CliResult r = run_cli(a);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto j = read_json(dir_ + "/pareto.json");
  ASSERT_FALSE(j.is_discarded());
  ASSERT_EQ(j["points"].size(), 4u) << j.dump(1);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& p : j["points"]) by_name[p["name"]] = p;
  // The reference against its own logits: exactly 0; then more bits, less divergence.
  EXPECT_EQ(by_name["f32"]["kld"].get<double>(), 0.0);
  const double q8 = by_name["q8_0"]["kld"], q4 = by_name["q4_0"]["kld"], kv = by_name["kv-q8_0"]["kld"];
  std::printf("[ pareto ] SmolLM2-135M KLD: q8_0 %.5f  q4_0 %.5f  kv-q8_0 %.6f\n", q8, q4, kv);
  EXPECT_GT(q8, 0.0);
  EXPECT_LT(q8, q4);
  EXPECT_GT(kv, 0.0);
  EXPECT_LT(by_name["q4_0"]["weight_bytes"].get<double>(), by_name["q8_0"]["weight_bytes"].get<double>());
  EXPECT_GT(by_name["q8_0"]["decode_tps"].get<double>(), 0.0);
  EXPECT_GT(by_name["q8_0"]["prefill_tps"].get<double>(), 0.0);
  EXPECT_EQ(j["setup"]["eval_tokens"], 256);
  // Q8_0 is within 0.02 nats here (KLD ~0.004), F32 too; the faster of those is recommended.
  const std::string rec = by_name["q8_0"]["decode_tps"].get<double>() > by_name["f32"]["decode_tps"].get<double>() ? "q8_0" : "f32";
  EXPECT_NE(r.out.find("recommended within the budget (KLD <= 0.02 nats): " + rec + " "), std::string::npos) << r.out;
  EXPECT_TRUE(is_png(dir_ + "/pareto_speed.png"));
  EXPECT_TRUE(is_png(dir_ + "/pareto_size.png"));
  std::ifstream csv(dir_ + "/pareto.csv");
  std::string line;
  int rows = 0;
  while (std::getline(csv, line)) ++rows;
  EXPECT_EQ(rows, 5);  // header + 4 points

  // The same settings with one more configuration: only that one runs.
  const CliResult again = run_cli(args(model.path, "q8_0,q4_0,kv-q8_0,q6_k"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("4 of the 5 configurations were measured earlier"), std::string::npos) << again.out;
  EXPECT_NE(again.err.find("[1/1] q6_k"), std::string::npos) << again.err;
  EXPECT_EQ(read_json(dir_ + "/pareto.json")["points"].size(), 5u);

  // Other settings in the same folder: refused, not mixed.
  auto other = args(model.path, "q8_0");
  other[8] = "320";  // --eval-tokens
  const CliResult mixed = run_cli(other);
  EXPECT_EQ(mixed.exit_code, 1);
  EXPECT_NE(mixed.err.find("holds a run of other settings"), std::string::npos) << mixed.err;
}

TEST_F(ParetoCli, BadInputGetsOneClearError) {
  const std::string stories = shared_dir() + "/models/stories260K/stories260K.bin";
  struct Case {
    std::vector<std::string> extra;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--configs", "q4_0,q9_k"}, "unknown configuration 'q9_k'"},
      {{"--max-kld", "-1"}, "--max-kld must be >= 0"},
      {{"--eval-tokens", "10"}, "--eval-tokens must be >= 64"},
      {{"--ctx", "4096", "--eval-tokens", "4096"}, "longer than the model's context 512"},
      {{"--eval-text", "/nonexistent/text.txt"}, "/nonexistent/text.txt"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> a = {"pareto", "-m", stories, "-o", dir_, "--no-plot"};
    a.insert(a.end(), c.extra.begin(), c.extra.end());
    const CliResult r = run_cli(a);
    EXPECT_EQ(r.exit_code, 1) << c.message;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
  }
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ + "/pareto.json") << "[1, 2";
  const CliResult r = run_cli({"pareto", "-m", stories, "-o", dir_, "--configs", "q8_0", "--eval-tokens", "64", "--ctx", "32"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("remove the file to start over"), std::string::npos) << r.err;
}

TEST(ParetoCliList, ListsEveryConfiguration) {
  const CliResult r = run_cli({"pareto", "--list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"f32 ", "q4_k_m ", "gptq-w4-g32 ", "smoothquant-w8a8 ", "sparsegpt-2:4 ", "layer-drop-10% ", "kv-q8_0 "}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name << "\n" << r.out;
  }
}

}  // namespace
}  // namespace peregrine::test
