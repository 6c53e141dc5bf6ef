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
