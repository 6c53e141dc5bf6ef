// `peregrine quantize` end to end on stories260K: a GPTQ folder and a Q4_0 GGUF that load, generate
// and score close to the F32 model (eval kld), the progress line, and one clean error line for
// each bad request; `--gguf-type` on the kquant-test model: the bytes llama-quantize wrote.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "peregrine/formats/gguf/gguf.h"
#include "run_cli.h"
#include "test_paths.h"

namespace peregrine::test {
namespace {

std::string stories() { return shared_dir() + "/models/stories260K/stories260K.bin"; }
std::string calib() { return shared_dir() + "/data/tinystories/tinystories_sample.txt"; }
std::string excerpt() { return shared_dir() + "/data/tinystories/tinystories_valid_excerpt.txt"; }
std::string kquant(const std::string& type) { return shared_dir() + "/models/kquant-test/tiny-llama-256." + type + ".gguf"; }

double kld_against_f32(const std::string& model) {
  const CliResult r = run_cli({"eval", "kld", "-m", model, "--ref", stories(), "-f", excerpt(), "--max-tokens", "2000", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out)["kld"].get<double>();
}

TEST(Quantize, GptqFolderLoadsGeneratesAndStaysClose) {
  const std::string out = make_temp_dir() + "/gptq4";
  const CliResult q = run_cli({"quantize", "-m", stories(), "-o", out, "--method", "gptq", "--bits", "4", "--group", "32", "--calib", calib()});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_NE(q.out.find("gptq, 35 linears quantized"), std::string::npos) << q.out;
  EXPECT_NE(q.err.find("quantize: 5/5 gptq layers"), std::string::npos) << q.err;
  for (const char* f : {"config.json", "model.safetensors", "quantize_config.json", "tokenizer.bin"}) {
    EXPECT_TRUE(std::filesystem::exists(out + "/" + f)) << f;
  }
  const CliResult g = run_cli({"generate", "-m", out, "-p", "Once upon a time", "-n", "16", "--temp", "0"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(g.out.rfind("Once upon a time", 0), 0u) << g.out;
  const double kld = kld_against_f32(out);
  std::printf("[ quantize ] gptq 4-bit g32 KLD vs F32 on 2000 tokens: %.4f\n", kld);
  EXPECT_GT(kld, 0.0);
  EXPECT_LT(kld, 0.5);  // 4-bit: measured 0.12 over the whole excerpt (3-bit RTN: 1.2)
}

TEST(Quantize, Q4_0GgufForLlamaCpp) {
  const std::string out = make_temp_dir() + "/q4.gguf";
  const CliResult q = run_cli({"quantize", "-m", stories(), "-o", out, "--method", "rtn", "--bits", "4", "--group", "32"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  const CliResult i = run_cli({"inspect", "-m", out});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("blk.0.attn_q.weight                  q4_0"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("blk.0.ffn_down.weight                f16"), std::string::npos) << i.out;  // 172-wide rows
  EXPECT_LT(kld_against_f32(out), 0.5);
}

TEST(Quantize, GroupWiseW4A8WithHadamardRoundTripsThroughTheGptqLayout) {
  const std::string out = make_temp_dir() + "/w4a8";
  const CliResult q = run_cli({"quantize", "-m", stories(), "-o", out, "--bits", "4", "--group", "32", "--act-bits", "8", "--rotate", "hadamard"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  const CliResult i = run_cli({"inspect", "-m", out});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("blk.0.attn_q.weight                  int4 g32 a8"), std::string::npos) << i.out;
  EXPECT_LT(kld_against_f32(out), 0.5);
}

// Gemma 2 through `peregrine quantize`, from its F32 GGUF test model (window 6, soft-caps, norms
// stored as 1 + w): a Q8_0 GGUF (llama-quantize's type) and an 8-bit GPTQ folder (config.json's
// Gemma2ForCausalLM form, norms as w) load and stay close to it; an HWQ rotation is refused.
TEST(Quantize, Gemma2RoundTripsThroughGgufAndGptqFolder) {
  const std::string f32 = testdata_dir() + "/gguf-f32-gemma2.gguf", dir = make_temp_dir();
  const std::vector<std::pair<std::string, std::vector<std::string>>> outputs = {
      {dir + "/q8.gguf", {"--gguf-type", "Q8_0"}}, {dir + "/gptq8", {"--method", "rtn", "--bits", "8", "--group", "32"}}};
  for (const auto& [out, flags] : outputs) {
    std::vector<std::string> args = {"quantize", "-m", f32, "-o", out};
    args.insert(args.end(), flags.begin(), flags.end());
    const CliResult q = run_cli(args);
    ASSERT_EQ(q.exit_code, 0) << q.err;
    const CliResult r = run_cli({"eval", "kld", "-m", out, "--ref", f32, "-f", excerpt(), "--max-tokens", "400", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    std::printf("[ quantize ] gemma2 %s: KLD vs F32 %.2e, top-1 %.3f\n", out.c_str(), j["kld"].get<double>(), j["top1"].get<double>());
    EXPECT_LT(j["kld"].get<double>(), 1e-3) << out;
  }
  expect_clean_error(run_cli({"quantize", "-m", f32, "-o", dir + "/rot", "--rotate", "hadamard"}), "post-block RMSNorms");
}

TEST(Quantize, BadRequestsGiveOneCleanError) {
  const std::string dir = make_temp_dir();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--method", "nf4"}, "--method 'nf4' is not one of"},
      {{"--bits", "5"}, "--bits 5 is not one of 2, 3, 4, 8"},
      {{"--method", "gptq"}, "gptq needs calibration text (--calib FILE)"},
      {{"--method", "gptq", "--calib", "/nonexistent.txt"}, "cannot read file /nonexistent.txt"},
      {{"--method", "awq", "--group", "0", "--calib", calib()}, "--group 0 (per-tensor) is available for rtn and fp8 only"},
      {{"--method", "smoothquant", "--bits", "4"}, "smoothquant quantizes to 8 bits"},
      {{"--rotate", "random"}, "--rotate 'random' is not 'hadamard'"},
      {{"--method", "gptq", "--bits", "8", "--smooth", "--calib", calib()}, "--smooth applies to gptq with --act-bits 8"},
      {{"--sym", "--asym"}, "--sym and --asym exclude each other"},
  };
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> args = {"quantize", "-m", stories(), "-o", dir + "/out"};
    args.insert(args.end(), flags.begin(), flags.end());
    expect_clean_error(run_cli(args), message);
  }
  expect_clean_error(run_cli({"quantize", "-m", stories(), "-o", dir + "/x.gguf", "--bits", "3"}), "a GGUF file holds rtn");
  const std::string q = dir + "/q";
  ASSERT_EQ(run_cli({"quantize", "-m", stories(), "-o", q}).exit_code, 0);
  expect_clean_error(run_cli({"quantize", "-m", q, "-o", dir + "/again"}), "is already int4 g128");
  // Phi-3's HF folders fuse projections: a quantized one is refused before any work, no folder left.
  expect_clean_error(run_cli({"quantize", "-m", testdata_dir() + "/gguf-f32-phi3.gguf", "-o", dir + "/phi3", "--method", "rtn"}),
                     "quantize into a .gguf instead");
  EXPECT_FALSE(std::filesystem::exists(dir + "/phi3"));
}

TEST(Quantize, GgufTypeWritesWhatLlamaQuantizeWrites) {
  for (const std::string type : {"Q4_K_M", "IQ4_XS"}) {
    const std::string out = make_temp_dir() + "/t.gguf";
    const CliResult q = run_cli({"quantize", "-m", kquant("f32"), "-o", out, "--gguf-type", type});
    ASSERT_EQ(q.exit_code, 0) << q.err;
    EXPECT_NE(q.out.find("rtn " + type + ", 16 tensors quantized"), std::string::npos) << q.out;
    auto mine = GgufFile::open(out);
    auto ref = GgufFile::open(kquant(type));
    ASSERT_TRUE(mine.has_value() && ref.has_value());
    EXPECT_EQ(*mine->get_int("general.file_type"), *ref->get_int("general.file_type"));
    ASSERT_EQ(mine->tensors().size(), ref->tensors().size());
    for (const TensorView& r : ref->tensors()) {
      const auto t = std::find_if(mine->tensors().begin(), mine->tensors().end(), [&](const TensorView& v) { return v.name == r.name; });
      ASSERT_NE(t, mine->tensors().end()) << r.name;
      EXPECT_EQ(t->dtype, r.dtype) << type << " " << r.name;
      ASSERT_EQ(t->nbytes, r.nbytes) << type << " " << r.name;
      EXPECT_EQ(std::memcmp(t->data, r.data, r.nbytes), 0) << type << " " << r.name;
    }
  }
}

TEST(Quantize, BadGgufTypeRequestsGiveOneCleanError) {
  const std::string dir = make_temp_dir();
  const std::string f32 = kquant("f32");
  expect_clean_error(run_cli({"quantize", "-m", f32, "-o", dir + "/x.gguf", "--gguf-type", "Q4_K_X"}),
                     "--gguf-type 'Q4_K_X' is not one of F32, F16, BF16, Q4_0");
  expect_clean_error(run_cli({"quantize", "-m", f32, "-o", dir + "/folder", "--gguf-type", "Q4_K_M"}),
                     "--gguf-type writes a GGUF file: -o must end in .gguf");
  expect_clean_error(run_cli({"quantize", "-m", kquant("Q4_0"), "-o", dir + "/x.gguf", "--gguf-type", "Q4_K_M"}),
                     "is already q4_0");
  expect_clean_error(run_cli({"quantize", "-m", f32, "-o", dir + "/x.gguf", "--gguf-type", "Q4_K_M", "--method", "fp8"}),
                     "--gguf-type Q4_K_M is llama-quantize's round-to-nearest: use --method rtn (got fp8)");
  expect_clean_error(run_cli({"quantize", "-m", f32, "-o", dir + "/x.gguf", "--gguf-type", "Q4_K_M", "--bits", "4"}),
                     "drop --bits / --group");
}

}  // namespace
}  // namespace peregrine::test
