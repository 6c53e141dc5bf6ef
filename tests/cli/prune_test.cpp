// `peregrine prune` end to end on stories260K: a SparseGPT 2:4 + q4 GGUF and a Wanda folder that
// load and generate, a layer-drop model with fewer layers, the summary line, and one clean error
// line for each bad request (issue #19 item 5).
#include <gtest/gtest.h>

#include <filesystem>

#include "run_cli.h"
#include "test_paths.h"

namespace peregrine::test {
namespace {

std::string stories() { return shared_dir() + "/models/stories260K/stories260K.bin"; }
std::string calib() { return shared_dir() + "/data/tinystories/tinystories_sample.txt"; }

TEST(Prune, SparseGptTwoFourFourBitGgufLoadsAndGenerates) {
  const std::string out = make_temp_dir() + "/sgpt.gguf";
  const CliResult p = run_cli({"prune", "-m", stories(), "-o", out, "--method", "sparsegpt", "--pattern", "2:4", "--quantize", "q4",
                               "--calib", calib()});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("sparsegpt 2:4 + q4, 35 linears pruned"), std::string::npos) << p.out;
  EXPECT_NE(p.err.find("prune: 5/5 sparsegpt layers"), std::string::npos) << p.err;
  const CliResult i = run_cli({"inspect", "-m", out});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("blk.0.attn_q.weight                  q4_0"), std::string::npos) << i.out;
  const CliResult g = run_cli({"generate", "-m", out, "-p", "Once upon a time", "-n", "12", "--temp", "0"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(g.out.rfind("Once upon a time", 0), 0u) << g.out;
}

TEST(Prune, WandaFolderAndLayerDrop) {
  const std::string dir = make_temp_dir();
  const CliResult w = run_cli({"prune", "-m", stories(), "-o", dir + "/wanda", "--method", "wanda", "--sparsity", "0.5", "--calib", calib()});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_NE(w.out.find("wanda 50%, 35 linears pruned, 50.0% of their weights zero"), std::string::npos) << w.out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/wanda/model.safetensors"));
  const CliResult d = run_cli({"prune", "-m", stories(), "-o", dir + "/drop.gguf", "--method", "layer-drop", "--drop", "1", "--calib", calib()});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(d.out.find("dropped blocks "), std::string::npos) << d.out;
  const CliResult i = run_cli({"inspect", "-m", dir + "/drop.gguf"});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("blk.3.attn_q.weight"), std::string::npos) << i.out;
  EXPECT_EQ(i.out.find("blk.4.attn_q.weight"), std::string::npos) << i.out;
}

TEST(Prune, BadRequestsGiveOneCleanErrorLine) {
  const std::string out = make_temp_dir() + "/x.gguf";
  const auto prune = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"prune", "-m", stories(), "-o", out};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  expect_clean_error(prune({"--sparsity", "1.5"}), "sparsity 1.500000 is outside (0, 1)");
  expect_clean_error(prune({"--sparsity", "0"}), "is outside (0, 1)");
  expect_clean_error(prune({"--pattern", "4:4"}), "N must be below M");
  expect_clean_error(prune({"--pattern", "two:four"}), "is not N:M");
  expect_clean_error(prune({"--method", "wanda", "--sparsity", "0.5", "--calib", calib(), "--calib-tokens", "50000"}),
                     "fewer than --calib-tokens 50000");
  expect_clean_error(prune({"--method", "sparsegpt", "--sparsity", "0.5"}), "needs calibration text (--calib FILE)");
  expect_clean_error(prune({"--method", "magnitude"}), "needs --sparsity F or --pattern N:M");
  expect_clean_error(prune({"--method", "snip", "--sparsity", "0.5"}), "is not one of magnitude, wanda, sparsegpt");
  expect_clean_error(prune({"--sparsity", "0.5", "--quantize", "q3"}), "is not q4 or q8");
  expect_clean_error(prune({"--method", "layer-drop", "--drop", "5", "--calib", calib()}), "must leave at least one");
  const std::string q8 = make_temp_dir() + "/q8.gguf";
  ASSERT_EQ(run_cli({"quantize", "-m", stories(), "-o", q8, "--method", "rtn", "--bits", "8", "--group", "32"}).exit_code, 0);
  expect_clean_error(run_cli({"prune", "-m", q8, "-o", out, "--sparsity", "0.5"}), "is already q8_0");
}

}  // namespace
}  // namespace peregrine::test
