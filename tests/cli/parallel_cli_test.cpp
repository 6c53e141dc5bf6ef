// `peregrine generate/bench --tp T --pp P` under `mpirun -np T·P` (Open MPI, dist/mpi_world.h):
// the same greedy text as one process on stories260K (--tp 2, --tp 4 over its 4 KV heads, --pp 2,
// --tp 2 --pp 2; with a LoRA adapter under --tp 2 and --pp 2), one clear error for a run that does not match, and no hang when a rank dies
// mid-run.
// Skipped, with a message, where mpirun is not installed (scripts/setup.sh installs it).
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <string>

#include "run_cli.h"
#include "test_paths.h"

namespace peregrine::test {
namespace {

#define SKIP_WITHOUT_MPIRUN()                                                               \
  if (mpirun_path().empty()) GTEST_SKIP() << "mpirun not found: install openmpi-bin (scripts/setup.sh)"

// Greedy stories260K, one thread per rank; 4-rank runs take 80 tokens (4 busy-polling ranks
// share CI's 2 cores).
const std::vector<std::string> kGreedy = {"generate", "-p", "Once upon a time", "-n", "300", "--temp", "0", "-t", "1"};
const std::vector<std::string> kGreedyShort = {"generate", "-p", "Once upon a time", "-n", "80", "--temp", "0", "-t", "1"};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(TensorParallelCli, TwoRanksPrintOneProcesssGreedyText) {
  SKIP_WITHOUT_MPIRUN();
  const CliResult one = run_cli(kGreedy);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const CliResult two = run_mpirun(2, with(kGreedy, {"--tp", "2"}));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.out, one.out);  // rank 0 prints; rank 1 is silent
  EXPECT_NE(two.err.find("generated_tokens=300"), std::string::npos) << two.err;
}

TEST(TensorParallelCli, FourRanksOverFourKvHeads) {
  SKIP_WITHOUT_MPIRUN();
  const CliResult one = run_cli(kGreedyShort);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const CliResult four = run_mpirun(4, with(kGreedyShort, {"--tp", "4"}));
  ASSERT_EQ(four.exit_code, 0) << four.err;
  EXPECT_EQ(four.out, one.out);
}

TEST(PipelineParallelCli, TwoStagesAndTwoByTwoPrintOneProcesssGreedyText) {
  SKIP_WITHOUT_MPIRUN();
  const CliResult one = run_cli(kGreedy);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const CliResult two = run_mpirun(2, with(kGreedy, {"--pp", "2"}));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.out, one.out);
  const CliResult one_short = run_cli(kGreedyShort);
  ASSERT_EQ(one_short.exit_code, 0) << one_short.err;
  const CliResult four = run_mpirun(4, with(kGreedyShort, {"--tp", "2", "--pp", "2"}));
  ASSERT_EQ(four.exit_code, 0) << four.err;
  EXPECT_EQ(four.out, one_short.out);
  expect_clean_error(run_cli(with(kGreedy, {"--tp", "2", "--pp", "2"})), "--tp 2 --pp 2 runs as 4 MPI ranks");
}

TEST(TensorParallelCli, LoraAdaptersGiveOneProcesssText) {
  SKIP_WITHOUT_MPIRUN();
  // A llama.cpp LoRA GGUF for stories260K (tools/make_test_models.py): each rank applies its part.
  const std::vector<std::string> lora = {"--lora", testdata_dir() + "/lora-42.gguf"};
  const CliResult base = run_cli(kGreedyShort), one = run_cli(with(kGreedyShort, lora));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out, base.out);  // the adapter changes the text
  for (const std::vector<std::string>& split : {std::vector<std::string>{"--tp", "2"}, std::vector<std::string>{"--pp", "2"}}) {
    const CliResult two = run_mpirun(2, with(with(kGreedyShort, split), lora));
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_EQ(two.out, one.out) << split[0];
  }
}

TEST(TensorParallelCli, BenchProfilesTheAllReduce) {
  SKIP_WITHOUT_MPIRUN();
  const CliResult r = run_mpirun(2, {"bench", "--tp", "2", "-t", "1", "-p", "16", "-n", "16", "-r", "1", "--profile"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| tg16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tp all-reduce"), std::string::npos) << r.out;
}

TEST(TensorParallelCli, RunNotMatchingTpIsOneClearError) {
  expect_clean_error(run_cli(with(kGreedy, {"--tp", "2"})), "start it with `mpirun -np 2");
  SKIP_WITHOUT_MPIRUN();
  // 3 ranks cannot split stories260K's 8 heads: every rank meets the error, it is printed once.
  const CliResult r = run_mpirun(3, with(kGreedy, {"--tp", "3"}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  const std::string line = "peregrine: error: tensor parallelism over 3 ranks needs n_heads (8) divisible by 3";
  EXPECT_NE(r.err.find(line), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("(rank "), std::string::npos) << r.err;
}

TEST(TensorParallelCli, DraftsTimedPerRankAreRefused) {
  SKIP_WITHOUT_MPIRUN();
  // Adaptive draft lengths follow each rank's own timings: ranks would build different batches.
  const CliResult r = run_mpirun(2, with(kGreedy, {"--tp", "2", "--spec", "pld", "--draft-adaptive"}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("peregrine: error: --draft-adaptive times the drafts on each rank"), std::string::npos) << r.err;
  // A quantized self-draft is a whole copy on every rank: lossless, as in one process.
  const CliResult one = run_cli(with(kGreedy, {"--spec", "quant", "--draft-dtype", "q8_0"}));
  const CliResult two = run_mpirun(2, with(kGreedy, {"--tp", "2", "--spec", "quant", "--draft-dtype", "q8_0"}));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.out, one.out);
}

TEST(TensorParallelCli, ARankKilledMidRunEndsTheRunWithoutAHang) {
  SKIP_WITHOUT_MPIRUN();
  // A long bench (thousands of tg128 repetitions): rank 1 is killed 2 s in; mpirun must end,
  // with an error, well within the 60 s limit, and take the other rank with it.
  std::vector<pid_t> ranks;
  const CliResult r = run_mpirun_killing_one_rank(2, {"bench", "--tp", "2", "-t", "1", "-p", "0", "-n", "128", "-r", "100000"}, 2.0,
                                                  60.0, ranks);
  ASSERT_NE(r.exit_code, -2) << "mpirun still running 60 s after a rank was killed: " << r.err;
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("signal 9"), std::string::npos) << r.err;  // mpirun names the killed rank
  for (pid_t pid : ranks) EXPECT_FALSE(process_running(pid)) << "rank process " << pid << " still running";
}

}  // namespace
}  // namespace peregrine::test
