// peregrine bench: the JSON keys, the table, and bad arguments, on the bundled stories260K.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_cli.h"

namespace peregrine {
namespace {

TEST(CliBench, JsonHasTheStableKeys) {
  const auto r = test::run_cli({"bench", "-p", "8", "-n", "4", "-r", "2", "-t", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"model", "dtype", "threads", "pp_tps", "tg_tps", "pp_sd", "tg_sd", "gbps", "gflops"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["model"], "stories260K.bin");
  EXPECT_EQ(j["dtype"], "f32");
  EXPECT_EQ(j["threads"], 1);
  EXPECT_GT(j["pp_tps"].get<double>(), 0.0);
  EXPECT_GT(j["tg_tps"].get<double>(), 0.0);
  EXPECT_GT(j["gbps"].get<double>(), 0.0);
  EXPECT_GT(j["gflops"].get<double>(), 0.0);
}

TEST(CliBench, TablePrintsOneRowPerTestAndTheRoofline) {
  const auto r = test::run_cli({"bench", "-p", "8", "-n", "4", "-r", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| pp8 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tg4 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("roofline"), std::string::npos) << r.out;
}

TEST(CliBench, ProfilePrintsWhereTheForwardTimeGoes) {
  const auto table = test::run_cli({"bench", "-p", "8", "-n", "4", "-r", "1", "--profile"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (const char* line : {"prefill profile (pp8", "decode profile (tg4", "| qkv projection ", "| attention ", "| ffn down ",
                           "| lm head ", "| other ", "| forward (total)    |", "100.0%"}) {
    EXPECT_NE(table.out.find(line), std::string::npos) << line << "\n" << table.out;
  }
  const auto json = test::run_cli({"bench", "-p", "8", "-n", "4", "-r", "1", "--profile", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  ASSERT_TRUE(j["tg_profile"].is_array());
  const auto& total = j["tg_profile"].back();
  EXPECT_EQ(total["op"], "forward (total)");
  EXPECT_DOUBLE_EQ(total["share"].get<double>(), 1.0);
  double shares = 0.0;
  for (const auto& row : j["tg_profile"]) shares += row["op"] == "forward (total)" ? 0.0 : row["share"].get<double>();
  EXPECT_NEAR(shares, 1.0, 1e-9);  // the op kinds and "other" add up to the forward
  EXPECT_GT(j["pp_profile"].size(), 3u);
}

TEST(CliBench, RooflineAloneNeedsNoModel) {
  const auto r = test::run_cli({"bench", "--roofline", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GB/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GFLOP/s"), std::string::npos) << r.out;
}

TEST(CliBench, BadArgumentsGiveOneClearError) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"bench", "-r", "0"}, {"bench", "-t", "0"}, {"bench", "-p", "0", "-n", "0"},
           {"bench", "-p", "100000"}, {"bench", "-m", "/nonexistent/model.gguf"}}) {
    const auto r = test::run_cli(args);
    EXPECT_NE(r.exit_code, 0) << args[1];
    EXPECT_NE(r.err.find("peregrine: error:"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace peregrine
