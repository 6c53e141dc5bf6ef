// `peregrine lora synth` end to end on stories260K: the PEFT folder it writes loads back as
// model/synth_lora.h's adapter of the same seed, the same seed writes the same bytes, --target
// picks the projections, `generate --lora` loads it and prints another text than the base's,
// and bad requests give one clean error line.
#include <gtest/gtest.h>

#include "peregrine/model/lora_adapter.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/model/synth_lora.h"
#include "run_cli.h"
#include "test_paths.h"

namespace peregrine::test {
namespace {

std::string stories_path() { return shared_dir() + "/models/stories260K/stories260K.bin"; }

TEST(LoraSynth, WritesTheSeededAdapterThatChangesTheText) {
  auto base = load_model_file(stories_path());
  ASSERT_TRUE(base) << base.status().message();
  const std::string dir = make_temp_dir();
  const CliResult r = run_cli({"lora", "synth", "-o", dir + "/a", "--rank", "4", "--alpha", "8", "--seed", "3", "--stddev", "0.1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rank 4"), std::string::npos) << r.out;
  auto loaded = load_lora_adapter(dir + "/a", *base);
  ASSERT_TRUE(loaded) << loaded.status().message();
  auto expected = synth_lora_adapter(*base, {4, 8.0f, lora_target_names(), 3, 0.1f});
  ASSERT_TRUE(expected);
  EXPECT_EQ(loaded->rank, 4);
  EXPECT_EQ(loaded->alpha, 8.0f);
  ASSERT_EQ(loaded->tensors.size(), static_cast<std::size_t>(7 * base->config.n_layers));
  for (const auto& [name, p] : expected->tensors) {
    ASSERT_TRUE(loaded->tensors.contains(name)) << name;
    EXPECT_EQ(loaded->tensors.at(name).a, p.a) << name;
    EXPECT_EQ(loaded->tensors.at(name).b, p.b) << name;
  }

  ASSERT_EQ(run_cli({"lora", "synth", "-o", dir + "/again", "--rank", "4", "--alpha", "8", "--seed", "3", "--stddev", "0.1"}).exit_code, 0);
  ASSERT_EQ(run_cli({"lora", "synth", "-o", dir + "/other", "--rank", "4", "--alpha", "8", "--seed", "4", "--stddev", "0.1"}).exit_code, 0);
  const std::string st = "/adapter_model.safetensors";
  EXPECT_EQ(read_file(dir + "/a" + st), read_file(dir + "/again" + st));
  EXPECT_NE(read_file(dir + "/a" + st), read_file(dir + "/other" + st));

  ASSERT_EQ(run_cli({"lora", "synth", "-o", dir + "/qv", "--rank", "2", "--target", "q,v_proj"}).exit_code, 0);
  auto qv = load_lora_adapter(dir + "/qv", *base);
  ASSERT_TRUE(qv) << qv.status().message();
  EXPECT_EQ(qv->tensors.size(), static_cast<std::size_t>(2 * base->config.n_layers));
  EXPECT_TRUE(qv->tensors.contains("blk.0.attn_v.weight"));

  const std::vector<std::string> gen = {"generate", "-p", "Once upon a time", "-n", "40", "--temp", "0", "--no-echo"};
  std::vector<std::string> with_lora = gen;
  with_lora.insert(with_lora.end(), {"--lora", dir + "/a"});
  const CliResult plain = run_cli(gen), adapted = run_cli(with_lora);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(adapted.exit_code, 0) << adapted.err;
  EXPECT_NE(adapted.out, plain.out);
}

TEST(LoraSynth, BadRequestsGiveOneErrorLine) {
  const std::string dir = make_temp_dir();
  expect_clean_error(run_cli({"lora", "synth", "-o", dir + "/a", "--rank", "0"}), "rank");
  expect_clean_error(run_cli({"lora", "synth", "-o", dir + "/a", "--target", "q,lm_head"}), "lm_head");
  expect_clean_error(run_cli({"lora", "synth", "-o", dir + "/a", "--stddev", "-1"}), "stddev");
  expect_clean_error(run_cli({"lora", "synth", "-m", dir + "/missing.gguf", "-o", dir + "/a"}), "missing.gguf");
}

}  // namespace
}  // namespace peregrine::test
