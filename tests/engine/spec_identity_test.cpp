// Greedy speculative decoding with draft chains emits exactly plain decoding's tokens on a real
// model, not merely up to a near tie: a verification chain of up to 7 rows runs the arithmetic of
// one-row decode steps (the K-quant GEMV's per-token sums, attention row by row through the decode
// kernel; model/llama_model.cpp kRowsAsDecode), so its logits equal the decode steps' bit for bit.
// Target: qwen2.5-coder-0.5b-instruct completing a held-out Python standard library file
// (eval/code_corpus.h). Drafters: prompt lookup (chains of 4 and adaptive), the target's first 12
// of 24 layers, and the target drafting for itself (nearly every draft accepted: nearly every
// step verifies a full chain of 5 rows), also seeing only the prompt's first 4 and last 64 tokens
// (ModelDrafterOptions::context_window): the same output.
#include <gtest/gtest.h>

#include "peregrine/core/text_file.h"
#include "peregrine/engine/generator.h"
#include "peregrine/eval/code_corpus.h"
#include "peregrine/spec/model_drafter.h"
#include "real_models.h"
#include "test_models.h"

namespace peregrine {
namespace {

constexpr std::int32_t kTokens = 40;

/// The first held-out standard library file's completion prompt of at most 2000 characters.
std::string held_out_code_prompt() {
  const std::string dir = default_python_source_dir();
  EXPECT_FALSE(dir.empty()) << "no /usr/lib/python3.N with the standard library's sources";
  auto corpus = split_code_corpus(dir);
  EXPECT_TRUE(corpus) << corpus.status().message();
  if (!corpus) return {};
  for (const std::string& path : corpus->eval) {
    auto text = read_text_file(path);
    if (!text) continue;
    if (std::string prompt = code_completion_prompt(*text, 600, 2000); !prompt.empty()) return prompt;
  }
  ADD_FAILURE() << "no held-out file of " << dir << " opens a function within 2000 characters";
  return {};
}

test::Generated run(const LlamaModel& model, const std::vector<std::int32_t>& prompt, SpecParams spec, Drafter* drafter,
                    ThreadPool& pool) {
  GenerateOptions o;
  o.max_new_tokens = kTokens;
  o.sampling.temperature = 0.0f;
  o.spec = spec;
  o.drafter = drafter;
  return test::generate_tokens(model, prompt, o, pool);
}

TEST(SpecIdentity, DraftChainsEmitPlainDecodingsTokensExactly) {
  const test::RealModelEntry entry = test::real_model("qwen2.5-coder-0.5b-instruct");
  PEREGRINE_REQUIRE_REAL_MODEL(entry);
  const test::LoadedRealModel loaded = test::load_manifest_model(entry);
  ASSERT_TRUE(loaded.model && loaded.tokenizer);
  const std::string text = held_out_code_prompt();
  ASSERT_FALSE(text.empty());
  const std::vector<std::int32_t> prompt = loaded.tokenizer->encode(text, loaded.tokenizer->add_bos_default());
  ThreadPool pool(2);
  const test::Generated plain = run(*loaded.model, prompt, {}, nullptr, pool);
  ASSERT_EQ(plain.tokens.size(), static_cast<std::size_t>(kTokens));
  const LlamaModel& model = *loaded.model;
  const std::unique_ptr<ModelDrafter> self = test::make_model_drafter(model, model.config(), SpecMethod::kDraft, 0, 256);
  const std::unique_ptr<ModelDrafter> early = test::make_model_drafter(model, model.config(), SpecMethod::kLayerSkip, 12, 256);
  const std::unique_ptr<ModelDrafter> windowed = test::make_model_drafter(model, model.config(), SpecMethod::kDraft, 0, 256, 64);
  ASSERT_TRUE(self && early && windowed);
  struct Case {
    const char* name;
    SpecParams spec;
    Drafter* drafter;
  };
  const Case cases[] = {{"pld chain k=4", {SpecMethod::kPld, 4, 1, false}, nullptr},
                        {"pld adaptive k<=6", {SpecMethod::kPld, 6, 1, true}, nullptr},
                        {"layer skip 12/24 chain k=4", {SpecMethod::kLayerSkip, 4, 1, false}, early.get()},
                        {"self-draft chain k=4", {SpecMethod::kDraft, 4, 1, false}, self.get()},
                        {"self-draft chain k=4, draft context 64", {SpecMethod::kDraft, 4, 1, false}, windowed.get()}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const test::Generated spec = run(*loaded.model, prompt, c.spec, c.drafter, pool);
    EXPECT_EQ(spec.tokens, plain.tokens);
    EXPECT_GT(spec.stats.drafted, 0);
    if (c.drafter == self.get()) {
      EXPECT_GE(10 * spec.stats.accepted, 9 * spec.stats.drafted);
    }
    std::cout << "  " << c.name << ": " << spec.stats.accepted << " of " << spec.stats.drafted << " drafts accepted\n";
  }
}

}  // namespace
}  // namespace peregrine
