// `peregrine distill` end to end on stories260K: a 2-layer student distilled with forward KL for
// a few steps, written as GGUF, loads and generates; the summary and progress lines; one clean
// error line for each bad request (issue #20: missing data file, unknown loss, student options).
#include <gtest/gtest.h>

#include "run_cli.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine::test {
namespace {

TEST(Distill, TwoLayerStudentLoadsAndGenerates) {
  if (!training_library_built()) GTEST_SKIP() << "built without libtorch (no libperegrine_train.so)";
  const std::string out = make_temp_dir() + "/student.gguf";
  const CliResult d = run_cli({"distill", "-m", stories260k_path(), "--student-shape", "layers=2", "-o", out, "--data",
                               training_text_path(), "--loss", "rkl", "--steps", "6", "--batch", "2", "--seq", "32"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(d.out.find("2-layer student (dim 64), rkl loss"), std::string::npos) << d.out;
  EXPECT_NE(d.err.find("distill: step 6/6"), std::string::npos) << d.err;
  const CliResult i = run_cli({"inspect", "-m", out});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("blk.1.ffn_down.weight"), std::string::npos) << i.out;
  EXPECT_EQ(i.out.find("blk.2.ffn_down.weight"), std::string::npos) << i.out;
  const CliResult g = run_cli({"generate", "-m", out, "-p", "Once upon a time", "-n", "8", "--temp", "0"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(g.out.rfind("Once upon a time", 0), 0u) << g.out;
}

TEST(Distill, BadRequestsGiveOneCleanErrorLine) {
  const std::string text = training_text_path();
  if (!training_library_built()) {
    expect_clean_error(run_cli({"distill", "-m", stories260k_path(), "--student-shape", "layers=2", "-o", "/tmp/x.gguf", "--data", text}),
                       "no training library");
    return;
  }
  const std::string out = make_temp_dir() + "/x.gguf";
  const auto distill = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"distill", "-m", stories260k_path(), "-o", out};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  expect_clean_error(distill({"--student-shape", "layers=2", "--data", "/nonexistent/text.txt"}), "/nonexistent/text.txt");
  expect_clean_error(distill({"--student-shape", "layers=2", "--data", text, "--loss", "mse"}), "is not one of fkl, rkl, jsd, tvd, ce");
  expect_clean_error(distill({"--data", text}), "give one of --student FILE and --student-shape SPEC");
  expect_clean_error(distill({"--student-shape", "layers=9", "--data", text}), "more than the teacher's 5");
  expect_clean_error(distill({"--student-shape", "depth=2", "--data", text}), "'depth=2' is not one of");
  expect_clean_error(distill({"--student-shape", "layers=2", "--data", text, "--temperature", "0"}), "--temperature must be > 0");
  expect_clean_error(distill({"--student-shape", "layers=2", "--data", text, "--seq", "4096"}), "longer than a model's context");
  expect_clean_error(distill({"--student", testdata_dir() + "/gguf-f32-mixtral.gguf", "--data", text}), "Mixture-of-Experts");
}

}  // namespace
}  // namespace peregrine::test
