// `peregrine inspect`: the per-tensor table (name, dtype, shape, bytes) and the totals on a
// llama.cpp K-quant mix, whose Q4_K_M puts three matrices in q6_k.
#include <gtest/gtest.h>

#include <sstream>

#include "run_cli.h"
#include "test_paths.h"

namespace peregrine::test {
namespace {

std::string kquant(const std::string& type) {
  return shared_dir() + "/models/kquant-test/tiny-llama-256." + type + ".gguf";
}

/// The table line of `tensor`, split into its columns (name, dtype, shape, bytes).
std::vector<std::string> columns(const std::string& out, const std::string& tensor) {
  const std::string line = line_starting_with(out, tensor + " ");
  const std::size_t shape = line.find('['), shape_end = line.find(']');
  if (line.empty() || shape == std::string::npos || shape_end == std::string::npos) return {};
  std::istringstream head(line.substr(0, shape)), tail(line.substr(shape_end + 1));
  std::string name, dtype, bytes;
  head >> name >> dtype;
  tail >> bytes;
  return {name, dtype, line.substr(shape, shape_end + 1 - shape), bytes};
}

TEST(Inspect, KQuantMixShowsEachTensorsDtype) {
  const CliResult r = run_cli({"inspect", "-m", kquant("Q4_K_M")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  using Row = std::vector<std::string>;
  EXPECT_EQ(columns(r.out, "blk.0.attn_v.weight"), (Row{"blk.0.attn_v.weight", "q4_k", "[128, 256]", "18432"})) << r.out;
  EXPECT_EQ(columns(r.out, "blk.1.attn_v.weight"), (Row{"blk.1.attn_v.weight", "q6_k", "[128, 256]", "26880"})) << r.out;
  EXPECT_EQ(columns(r.out, "blk.1.ffn_down.weight"), (Row{"blk.1.ffn_down.weight", "q6_k", "[256, 768]", "161280"}));
  EXPECT_EQ(columns(r.out, "output.weight"), (Row{"output.weight", "q6_k", "[512, 256]", "107520"}));
  EXPECT_EQ(columns(r.out, "token_embd.weight"), (Row{"token_embd.weight", "q4_k", "[512, 256]", "73728"}));
  EXPECT_EQ(columns(r.out, "output_norm.weight"), (Row{"output_norm.weight", "f32", "[256]", "1024"}));
  EXPECT_NE(r.out.find("\n21 tensors, 1130240 bytes\n"), std::string::npos) << r.out;
  // The README's "F32 5, Q6_K 3, Q4_K 13".
  EXPECT_EQ(line_starting_with(r.out, "by dtype: "),
            "by dtype: f32 5 (5120 bytes), q4_k 13 (829440 bytes), q6_k 3 (295680 bytes)");
  EXPECT_NE(r.out.find("tokenizer: spm, 512 tokens"), std::string::npos) << r.out;
}

TEST(Inspect, EveryKQuantFileLoads) {
  for (const std::string type : {"Q2_K", "Q3_K_M", "Q5_K_S", "Q6_K", "IQ4_NL", "IQ4_XS", "Q4_1", "Q5_0", "Q5_1"}) {
    const CliResult r = run_cli({"inspect", "-m", kquant(type)});
    ASSERT_EQ(r.exit_code, 0) << type << ": " << r.err;
    EXPECT_NE(r.out.find("\n21 tensors, "), std::string::npos) << type;
  }
  const CliResult xs = run_cli({"inspect", "-m", kquant("IQ4_XS")});
  EXPECT_EQ(columns(xs.out, "blk.0.ffn_up.weight"), (std::vector<std::string>{"blk.0.ffn_up.weight", "iq4_xs", "[768, 256]", "104448"}));
}

}  // namespace
}  // namespace peregrine::test
