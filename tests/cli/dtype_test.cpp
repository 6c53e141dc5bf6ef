// `--dtype` on generate/inspect: weights converted on load; an already quantized model decoded
// to f32; bad values and re-quantizing an already quantized model give one clean error line.
#include <gtest/gtest.h>

#include "run_cli.h"
#include "test_paths.h"

namespace peregrine::test {
namespace {

TEST(Dtype, GenerateConvertsOnLoadAndNotesTheF16Fallback) {
  const CliResult r = run_cli({"generate", "-n", "30", "--temp", "0", "--dtype", "q8_0", "--no-echo"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("--dtype q8_0: 5 matrices whose rows do not fit its blocks stay f16 (blk.0.ffn_down.weight, ...)"),
            std::string::npos) << r.err;
  EXPECT_EQ(r.out.rfind(", there was a little girl", 0), 0u) << r.out;
}

// NF4 (QLoRA's NormalFloat-4, a run-time type): matrices whose rows are multiples of 64 convert,
// the 172-wide ffn_down rows stay f16, the model runs; a file cannot hold it.
TEST(Dtype, Nf4ConvertsOnLoadAndRuns) {
  const CliResult shown = run_cli({"inspect", "--dtype", "nf4"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(line_starting_with(shown.out, "blk.0.attn_q.weight ").find(" nf4 "), std::string::npos) << shown.out;
  EXPECT_NE(line_starting_with(shown.out, "blk.0.ffn_down.weight ").find(" f16 "), std::string::npos) << shown.out;
  const CliResult r = run_cli({"generate", "-n", "30", "--temp", "0", "--dtype", "nf4", "--no-echo"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("--dtype nf4: 5 matrices whose rows do not fit its blocks stay f16"), std::string::npos) << r.err;
  EXPECT_GT(r.out.size(), 30u) << r.out;
}

TEST(Dtype, InspectShowsTheConvertedDtypes) {
  const CliResult r = run_cli({"inspect", "--dtype", "bf16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(line_starting_with(r.out, "blk.0.attn_q.weight ").find(" bf16 "), std::string::npos) << r.out;
  EXPECT_NE(line_starting_with(r.out, "blk.0.attn_norm.weight ").find(" f32 "), std::string::npos) << r.out;
}

TEST(Dtype, BadValueIsAnError) {
  expect_clean_error(run_cli({"generate", "-n", "4", "--dtype", "q3_k"}), "--dtype 'q3_k' is not one of f32, f16, bf16, q8_0, q4_0");
}

TEST(Dtype, BadBf16ActivationsIsAnError) {
  expect_clean_error(run_cli({"generate", "-n", "4", "--dtype", "bf16", "--bf16-activations", "f16"}),
                     "--bf16-activations: f16 not in {bf16,f32}");
}

TEST(Dtype, AlreadyQuantizedModelIsRefused) {
  const std::string path = make_temp_dir() + "/q.gguf";
  ASSERT_EQ(run_cli({"synth", "--shape", "stories260k", "-o", path, "--dtype", "q4_0"}).exit_code, 0);
  expect_clean_error(run_cli({"generate", "-m", path, "-n", "4", "--dtype", "f16"}), "is already quantized");
}

TEST(Dtype, KQuantModelDecodesToF32) {
  const std::string path = shared_dir() + "/models/kquant-test/tiny-llama-256.Q4_K_M.gguf";
  const CliResult r = run_cli({"inspect", "-m", path, "--dtype", "f32"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(line_starting_with(r.out, "blk.1.ffn_down.weight ").find(" f32 "), std::string::npos) << r.out;
  EXPECT_NE(line_starting_with(r.out, "token_embd.weight ").find(" f32 "), std::string::npos) << r.out;
  EXPECT_EQ(line_starting_with(r.out, "by dtype: "), "by dtype: f32 21 (7345152 bytes)") << r.out;
}

TEST(Dtype, KQuantModelIsNotReQuantized) {
  const std::string path = shared_dir() + "/models/kquant-test/tiny-llama-256.IQ4_XS.gguf";
  for (const char* lossy : {"f16", "bf16", "q8_0", "q4_0"}) {
    const CliResult r = run_cli({"inspect", "-m", path, "--dtype", lossy});
    expect_clean_error(r, "is already quantized (tensor 'blk.0.attn_k.weight' is iq4_xs): converting to " + std::string(lossy));
    EXPECT_NE(r.err.find("f32 decodes it exactly"), std::string::npos) << r.err;
  }
}

TEST(Dtype, FormatsThatOnlyLoadAreNotConversionTargets) {
  for (const char* name : {"q4_k", "iq4_xs", "int", "i8", "f8_e4m3"}) {
    expect_clean_error(run_cli({"inspect", "--dtype", name}), "--dtype '" + std::string(name) + "' is not one of f32, f16, bf16, q8_0, q4_0");
  }
}

}  // namespace
}  // namespace peregrine::test
