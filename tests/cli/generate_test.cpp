// End-to-end `peregrine generate` on the real stories260K model (the main job).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_cli.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine::test {
namespace {

std::string stories(const std::string& file) { return shared_dir() + "/models/stories260K/" + file; }

/// llama2.c's run.c greedy output (-t 0 -n 256) without its final newline.
std::string expected_greedy() {
  std::string s = read_file(stories("greedy_once_upon_a_time.txt"));
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

void expect_greedy_matches_llama2c(const std::vector<std::string>& model_args) {
  std::vector<std::string> args = {"generate", "-p", "Once upon a time", "-n", "300", "--temp", "0"};
  args.insert(args.end(), model_args.begin(), model_args.end());
  const CliResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string want = expected_greedy();
  ASSERT_GT(want.size(), 500u);
  EXPECT_EQ(r.out.substr(0, want.size()), want);
  EXPECT_NE(r.err.find("generated_tokens=300"), std::string::npos) << r.err;
}

TEST(Generate, GreedyMatchesLlama2cOnBin) { expect_greedy_matches_llama2c({"-m", stories("stories260K.bin")}); }
TEST(Generate, GreedyMatchesLlama2cOnGguf) { expect_greedy_matches_llama2c({"-m", stories("stories260K.gguf")}); }
TEST(Generate, BundledDefaultModelNeedsNoFlag) { expect_greedy_matches_llama2c({}); }
TEST(Generate, F16KvCacheKeepsTheGreedyText) { expect_greedy_matches_llama2c({"--kv-type", "f16"}); }

// Greedy speculative decoding prints llama2.c's text too, for every drafter.
TEST(Generate, SpeculativeGreedyKeepsTheText) {
  expect_greedy_matches_llama2c({"--spec", "pld", "--draft-max", "6", "--draft-adaptive"});
  expect_greedy_matches_llama2c({"--spec", "pld", "--draft-max", "8", "--draft-branching", "2"});
  expect_greedy_matches_llama2c({"--spec", "layerskip", "--draft-layers", "3"});
  expect_greedy_matches_llama2c({"--spec", "layerskip", "--draft-layers", "3", "--draft-context", "8"});
  expect_greedy_matches_llama2c({"--spec", "quant", "--draft-dtype", "q8_0", "--draft-max", "5"});
  expect_greedy_matches_llama2c({"--spec", "draft", "--draft-model", stories("stories260K.gguf"), "--draft-max", "4"});
}

/// A Medusa head folder for stories260K (untrained heads: test_models.h) in a fresh temp dir.
std::string medusa_heads_folder(std::int64_t hidden_offset = 0) {
  auto target = load_stories260k();
  EXPECT_TRUE(target);
  if (!target) return "";
  MedusaHeads heads = untrained_medusa_heads(*target, 3);
  if (hidden_offset != 0) {  // another model's heads: hidden size 64 + offset
    heads = MedusaHeads{3, 1, heads.hidden + hidden_offset, heads.vocab, "other", {}};
    for (const std::string& name : heads.names()) {
      std::int64_t n = 1;
      for (std::int64_t d : heads.shape(name)) n *= d;
      heads.tensors[name].assign(static_cast<std::size_t>(n), 0.0f);
    }
  }
  const std::string dir = make_temp_dir() + "/medusa";
  EXPECT_TRUE(save_medusa_heads(heads, dir).is_ok());
  return dir;
}

/// An EAGLE head folder for stories260K (test::identity_eagle_head; `hidden_offset` != 0: a
/// head of another hidden size) in a fresh temp dir.
std::string eagle_head_folder(std::int64_t hidden_offset = 0) {
  auto target = load_stories260k();
  EXPECT_TRUE(target);
  if (!target) return "";
  EagleHead head = identity_eagle_head(*target);
  if (hidden_offset != 0) {
    head.hidden += hidden_offset;
    head.tensors.clear();
    for (const std::string& name : head.names()) {
      std::int64_t n = 1;
      for (std::int64_t d : head.shape(name)) n *= d;
      head.tensors[name].assign(static_cast<std::size_t>(n), 0.0f);
    }
  }
  const std::string dir = make_temp_dir() + "/eagle";
  EXPECT_TRUE(save_eagle_head(head, dir).is_ok());
  return dir;
}

TEST(Generate, EagleHeadKeepsTheGreedyText) {
  const std::string head = eagle_head_folder();
  expect_greedy_matches_llama2c({"--spec", "eagle", "--draft-model", head, "--draft-max", "3"});
  expect_greedy_matches_llama2c({"--spec", "eagle", "--draft-model", head, "--draft-max", "12", "--draft-branching", "3"});
}

// Adapters applied unmerged (--lora, twice: they add up) print the text of the model they were
// merged into (lora merge), and change it.
TEST(Generate, UnmergedLoraPrintsTheMergedModelsText) {
  auto base = load_stories260k();
  ASSERT_TRUE(base);
  const std::string dir = make_temp_dir();
  const std::vector<std::string> all = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  ASSERT_TRUE(save_peft_adapter(random_lora_adapter(base->file(), 4, 8.0f, 1, all, 0.1f), dir + "/a", "stories260K").is_ok());
  ASSERT_TRUE(save_peft_adapter(random_lora_adapter(base->file(), 2, 4.0f, 2, {"attn_q", "ffn_up"}, 0.1f), dir + "/b", "stories260K").is_ok());
  const std::vector<std::string> loras = {"--lora", dir + "/a", "--lora", dir + "/b:0.5"};
  std::vector<std::string> merge = {"lora", "merge", "-o", dir + "/merged.gguf"};
  merge.insert(merge.end(), loras.begin(), loras.end());
  const CliResult merged = run_cli(merge);
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  const std::vector<std::string> gen = {"generate", "-p", "Once upon a time", "-n", "60", "--temp", "0", "--no-echo"};
  std::vector<std::string> unmerged_args = gen;
  unmerged_args.insert(unmerged_args.end(), loras.begin(), loras.end());
  std::vector<std::string> merged_args = gen;
  merged_args.insert(merged_args.end(), {"-m", dir + "/merged.gguf"});
  const CliResult unmerged = run_cli(unmerged_args), from_merged = run_cli(merged_args), plain = run_cli(gen);
  ASSERT_EQ(unmerged.exit_code, 0) << unmerged.err;
  ASSERT_EQ(from_merged.exit_code, 0) << from_merged.err;
  EXPECT_EQ(unmerged.out, from_merged.out);
  EXPECT_NE(unmerged.out, plain.out);
  for (const std::string& bad : {std::string("/nonexistent"), dir + "/a:x", dir + "/merged.gguf"}) {
    const CliResult r = run_cli({"generate", "-n", "4", "--lora", bad});
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(r.err.find("peregrine: error:"), std::string::npos) << r.err;
  }
}

TEST(Generate, MedusaHeadsKeepTheGreedyText) {
  const std::string heads = medusa_heads_folder();
  expect_greedy_matches_llama2c({"--spec", "medusa", "--draft-model", heads, "--draft-max", "3"});
  expect_greedy_matches_llama2c({"--spec", "medusa", "--draft-model", heads, "--draft-max", "8", "--draft-branching", "3"});
}

TEST(Generate, SpeculativeStatsInTheStderrLineAndJson) {
  const std::string path = make_temp_dir() + "/stats.json";
  const CliResult r = run_cli({"generate", "-n", "64", "--temp", "0", "--spec", "quant", "--draft-dtype", "q8_0", "--stats-json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("acceptance_rate="), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(read_file(path));
  for (const char* key : {"drafted", "accepted", "acceptance_rate", "mean_accepted_per_step"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    EXPECT_GT(j[key].get<double>(), 0.0) << key;
  }
  EXPECT_LE(j["accepted"].get<double>(), j["drafted"].get<double>());
}

TEST(Generate, BadSpeculativeOptionsAreClearErrors) {
  const std::vector<std::vector<std::string>> bad = {
      {"--spec", "medusa"},
      {"--spec", "draft"},                                   // no --draft-model
      {"--spec", "layerskip"},                               // no --draft-layers
      {"--spec", "layerskip", "--draft-layers", "5"},       // stories260K has 5 layers
      {"--spec", "pld", "--draft-max", "0"},
      {"--spec", "pld", "--draft-layers", "2"},              // an option pld does not use
      {"--spec", "draft", "--draft-model", "/nonexistent.gguf"},
      {"--spec", "medusa", "--draft-model", "/nonexistent"},
      {"--spec", "medusa", "--draft-model", medusa_heads_folder(8)},  // hidden size 72, not 64
      {"--spec", "layerskip", "--draft-layers", "2", "--draft-model", medusa_heads_folder()},
      {"--spec", "eagle"},                                   // no --draft-model
      {"--spec", "eagle", "--draft-model", medusa_heads_folder()},  // a Medusa folder: no model.safetensors
      {"--spec", "eagle", "--draft-model", eagle_head_folder(8)},   // hidden size 72, not 64
      {"--spec", "pld", "--draft-context", "64"},            // a model drafters' option
      {"--spec", "layerskip", "--draft-layers", "2", "--draft-context", "-1"},
  };
  for (const auto& extra : bad) {
    std::vector<std::string> args = {"generate", "-n", "4"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_cli(args);
    EXPECT_NE(r.exit_code, 0) << extra[1];
    EXPECT_NE(r.err.find("peregrine: error:"), std::string::npos) << r.err;
  }
}

TEST(Generate, SameSeedSameTextDifferentSeedDifferentText) {
  auto run = [](const char* seed) {
    return run_cli({"generate", "-n", "60", "--temp", "1.0", "--top-k", "0", "--top-p", "1", "--min-p", "0", "--seed", seed});
  };
  const CliResult a = run("7"), b = run("7"), c = run("8");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST(Generate, NoEchoPrintsOnlyTheContinuation) {
  const CliResult r = run_cli({"generate", "-p", "Once upon a time", "-n", "20", "--temp", "0", "--no-echo"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind(", there was a little girl", 0), 0u) << r.out;
}

TEST(Generate, StatsJsonHasTheDocumentedKeys) {
  const std::string path = make_temp_dir() + "/stats.json";
  const CliResult r = run_cli({"generate", "-n", "16", "--temp", "0", "--stats-json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(read_file(path));
  EXPECT_EQ(j["prompt_tokens"], 5);
  EXPECT_EQ(j["generated_tokens"], 16);
  for (const char* key : {"ttft_ms", "prefill_tps", "decode_tps"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    EXPECT_GT(j[key].get<double>(), 0.0) << key;
  }
  EXPECT_EQ(j["stop"], "max_tokens");
  // The stderr stats line is the last line.
  EXPECT_NE(r.err.find("stats: prompt_tokens=5 generated_tokens=16"), std::string::npos) << r.err;
}

TEST(Generate, StopsAtTheContextLimitAndSaysSo) {
  const CliResult r = run_cli({"generate", "-n", "100", "--temp", "0", "-c", "32"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("generated_tokens=28"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stop=context_full"), std::string::npos) << r.err;
}

TEST(Tokenize, IdsOfThePrompt) {
  const CliResult r = run_cli({"tokenize", "--ids", "Once upon a time"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[1, 403, 407, 261, 378]\n");
  const CliResult nobos = run_cli({"tokenize", "--ids", "--no-bos", "Once upon a time"});
  EXPECT_EQ(nobos.out, "[403, 407, 261, 378]\n");
}

TEST(Inspect, ShowsConfigTokenizerAndTensors) {
  const CliResult r = run_cli({"inspect", "-m", stories("stories260K.gguf")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("kv_heads 4 (GQA)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("512 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("blk.4.ffn_down.weight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("48 tensors"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace peregrine::test
