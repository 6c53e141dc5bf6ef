// `-d/--device` and `bench --batch` from the command line: batched decode rows on the CPU, and
// the CUDA backend's absence (no library or no GPU) as one clean error line.
#include <gtest/gtest.h>

#include "peregrine/backend/cuda_forward.h"
#include "run_cli.h"

namespace peregrine {
namespace {

TEST(CliDevice, BenchBatchDecodesSeveralSequences) {
  const auto r = test::run_cli({"bench", "-p", "0", "-n", "4", "-r", "1", "--batch", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| tg4b3 "), std::string::npos) << r.out;
  test::expect_clean_error(test::run_cli({"bench", "-n", "4", "--batch", "0"}), "--batch");
}

TEST(CliDevice, CudaWithoutADeviceIsOneCleanError) {
  std::string why;
  if (cuda_device_available(&why)) GTEST_SKIP() << "a CUDA device is present";
  for (const char* verb : {"generate", "bench"}) {
    test::expect_clean_error(test::run_cli({verb, "-d", "cuda", "-n", "4"}), why);
  }
  test::expect_clean_error(test::run_cli({"serve", "-d", "cuda", "--port", "0"}), why);
}

TEST(CliDevice, UnknownDeviceIsACommandLineError) {
  const auto r = test::run_cli({"generate", "-d", "tpu", "-n", "4"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--device"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace peregrine
