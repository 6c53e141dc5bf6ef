// Speculative decoding inside the engine is lossless under greedy decoding: for every drafter
// (prompt lookup, a separate draft model, layer skip, a Q4_0 copy of the target, Medusa heads
// (untrained: the LM head's copies), an EAGLE head (passing the feature through)), chains, trees
// and the adaptive length, batched requests produce exactly the tokens of plain decoding, on
// stories260K and on a random-weight GQA model; drafts really happen (acceptance counters), the
// KV blocks come back, and requests for a drafter the engine lacks are refused.
#include <gtest/gtest.h>

#include <sstream>

#include "peregrine/engine/engine.h"
#include "peregrine/quant/convert_model.h"
#include "peregrine/spec/medusa_drafter.h"
#include "peregrine/spec/model_drafter.h"
#include "spec/medusa_fixture.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

std::unique_ptr<LlamaModel> load(const std::string& path, std::optional<DType> dtype = std::nullopt) {
  auto file = load_model_file(path);
  EXPECT_TRUE(file) << file.status().message();
  if (!file) return nullptr;
  if (dtype) {
    EXPECT_TRUE(convert_model_weights(*file, *dtype, nullptr));
  }
  auto model = LlamaModel::create(std::move(*file));
  EXPECT_TRUE(model) << model.status().message();
  return model ? std::make_unique<LlamaModel>(std::move(*model)) : nullptr;
}

/// Sentences of the TinyStories excerpt, tokenized with the stories260K tokenizer; one is
/// followed by its own first words so prompt lookup finds long matches.
std::vector<std::vector<std::int32_t>> story_prompts(const LlamaModel& model, std::size_t n) {
  auto tok = load_tokenizer(model.file());
  EXPECT_TRUE(tok);
  std::istringstream text(test::read_file(test::shared_dir() + "/data/tinystories/tinystories_valid_excerpt.txt"));
  std::vector<std::vector<std::int32_t>> out;
  for (std::string sentence; out.size() < n && std::getline(text, sentence, '.');) {
    if (sentence.size() < 30) continue;
    sentence = sentence.substr(sentence.find_first_not_of(" \n"));
    if (out.size() == 1) sentence += ". " + sentence.substr(0, 20);
    out.push_back((*tok)->encode(sentence, true));
  }
  return out;
}

struct Outcome {
  std::vector<std::vector<std::int32_t>> tokens;  // per request
  RequestResult total;                            // spec counters summed
};

/// Runs every prompt as one batch of concurrent greedy requests of `max_tokens` tokens.
Outcome run(const LlamaModel& model, const std::vector<std::vector<std::int32_t>>& prompts, const SpecParams& spec,
            Drafter* drafter, std::int32_t max_tokens, ThreadPool& pool) {
  EngineOptions o;
  o.kv = {256, 16, DType::kF32};
  o.max_batch_tokens = 128;
  o.drafter = drafter;
  auto engine = Engine::create(model, o, pool);
  EXPECT_TRUE(engine) << engine.status().message();
  Outcome out;
  out.tokens.resize(prompts.size());
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    RequestOptions r;
    r.prompt = prompts[i];
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0.0f;
    r.spec = spec;
    RequestCallbacks cb{[&out, i](const TokenEvent& e) {
                          out.tokens[i].push_back(e.token);
                          return true;
                        },
                        [&out](const RequestResult& res) {
                          out.total.spec_drafted += res.spec_drafted;
                          out.total.spec_accepted += res.spec_accepted;
                          out.total.spec_steps += res.spec_steps;
                          EXPECT_EQ(res.reason, FinishReason::kLength);
                        }};
    EXPECT_TRUE((*engine)->submit(std::move(r), std::move(cb)));
  }
  while ((*engine)->step()) {}
  const EngineMetrics m = (*engine)->metrics();
  EXPECT_EQ(m.kv_blocks_used, 0);  // every block back (the prefix cache may keep some evictable)
  EXPECT_EQ(m.spec_draft_tokens_total, out.total.spec_drafted);
  return out;
}

struct Case {
  const char* name;
  SpecParams spec;
  Drafter* drafter;
};

void expect_lossless(const LlamaModel& model, const std::vector<std::vector<std::int32_t>>& prompts,
                     const std::vector<Case>& cases, std::int32_t max_tokens, ThreadPool& pool) {
  const Outcome plain = run(model, prompts, SpecParams{}, nullptr, max_tokens, pool);
  for (const Case& c : cases) {
    const Outcome spec = run(model, prompts, c.spec, c.drafter, max_tokens, pool);
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(spec.tokens[i], plain.tokens[i]) << c.name << ", request " << i;
    }
    EXPECT_GT(spec.total.spec_steps, 0) << c.name;
    EXPECT_GT(spec.total.spec_accepted, 0) << c.name;
    EXPECT_LE(spec.total.spec_accepted, spec.total.spec_drafted) << c.name;
    std::printf("  %-22s drafted %4lld accepted %4lld steps %4lld (%.2f accepted/step)\n", c.name,
                static_cast<long long>(spec.total.spec_drafted), static_cast<long long>(spec.total.spec_accepted),
                static_cast<long long>(spec.total.spec_steps),
                static_cast<double>(spec.total.spec_accepted) / static_cast<double>(spec.total.spec_steps));
  }
}

SpecParams params(SpecMethod m, std::int32_t draft_max, std::int32_t branching = 1, bool adaptive = false) {
  return SpecParams{m, draft_max, branching, adaptive};
}

TEST(SpeculativeEngine, GreedyIsTokenIdenticalForEveryDrafterOnStories260K) {
  ThreadPool pool(2);
  auto target = load(test::stories260k_path());
  auto quant = load(test::stories260k_path(), DType::kQ4_0);
  auto draft = load(test::shared_dir() + "/models/aidreams260K/aidreams260K.bin");  // vocab 512, other tokenizer
  ASSERT_TRUE(target && quant && draft);
  auto layerskip = test::make_model_drafter(*target, target->config(), SpecMethod::kLayerSkip, 2);
  auto quantized = test::make_model_drafter(*quant, target->config(), SpecMethod::kQuant);
  auto separate = test::make_model_drafter(*draft, target->config(), SpecMethod::kDraft);
  auto medusa = MedusaDrafter::create(test::untrained_medusa_heads(*target, 4), target->config());
  ASSERT_TRUE(medusa) << medusa.status().message();
  auto eagle_layer = EagleLayer::create(test::identity_eagle_head(*target), *target);
  ASSERT_TRUE(eagle_layer) << eagle_layer.status().message();
  ModelDrafterOptions eo;
  eo.method = SpecMethod::kEagle;
  eo.kv_blocks = 512;
  auto eagle = ModelDrafter::create_eagle(**eagle_layer, target->config(), eo);
  ASSERT_TRUE(eagle) << eagle.status().message();
  const auto prompts = story_prompts(*target, 4);
  expect_lossless(*target, prompts,
                  {{"pld chain k=4", params(SpecMethod::kPld, 4), nullptr},
                   {"pld tree b=3 n=12", params(SpecMethod::kPld, 12, 3), nullptr},
                   {"layerskip 2 chain k=3", params(SpecMethod::kLayerSkip, 3), layerskip.get()},
                   {"layerskip 2 tree b=2", params(SpecMethod::kLayerSkip, 8, 2), layerskip.get()},
                   {"quant q4_0 chain k=5", params(SpecMethod::kQuant, 5), quantized.get()},
                   {"quant q4_0 adaptive", params(SpecMethod::kQuant, 8, 1, true), quantized.get()},
                   {"draft aidreams k=2", params(SpecMethod::kDraft, 2), separate.get()},
                   {"medusa chain k=3", params(SpecMethod::kMedusa, 3), medusa->get()},
                   {"medusa tree b=4 n=16", params(SpecMethod::kMedusa, 16, 4), medusa->get()},
                   {"eagle chain k=3", params(SpecMethod::kEagle, 3), eagle->get()},
                   {"eagle-2 tree b=4 n=16", params(SpecMethod::kEagle, 16, 4), eagle->get()}},
                  40, pool);
}

TEST(SpeculativeEngine, GreedyIsTokenIdenticalOnARandomWeightGqaModel) {
  ThreadPool pool(2);
  auto target = load(test::testdata_dir() + "/llama2c-gqa-untied.bin");
  auto draft = load(test::testdata_dir() + "/llama2c-mha-tied.bin");
  ASSERT_TRUE(target && draft);
  auto separate = test::make_model_drafter(*draft, target->config(), SpecMethod::kDraft);
  auto layerskip = test::make_model_drafter(*target, target->config(), SpecMethod::kLayerSkip, 1);
  // Random weights loop quickly: the repeated tokens give prompt lookup matches.
  const std::vector<std::vector<std::int32_t>> prompts = {{1, 403, 407, 261, 378}, {1, 17, 17, 499, 300, 128}, {1, 5}};
  expect_lossless(*target, prompts,
                  {{"pld chain k=6", params(SpecMethod::kPld, 6), nullptr},
                   {"pld tree b=2 n=8", params(SpecMethod::kPld, 8, 2), nullptr},
                   {"draft k=3", params(SpecMethod::kDraft, 3), separate.get()},
                   {"draft tree b=2 n=6", params(SpecMethod::kDraft, 6, 2), separate.get()},
                   {"layerskip 1 k=4", params(SpecMethod::kLayerSkip, 4), layerskip.get()}},
                  48, pool);
}

TEST(SpeculativeEngine, RequestsForAMissingDrafterAreRefused) {
  ThreadPool pool(1);
  auto target = load(test::stories260k_path());
  ASSERT_TRUE(target);
  EngineOptions o;
  o.kv = {64, 16, DType::kF32};
  auto engine = Engine::create(*target, o, pool);
  ASSERT_TRUE(engine);
  EXPECT_TRUE((*engine)->check_spec(params(SpecMethod::kPld, 4)).is_ok());
  const Status st = (*engine)->check_spec(params(SpecMethod::kLayerSkip, 4));
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("available: pld"), std::string::npos) << st.message();
  RequestOptions r;
  r.prompt = {1, 403};
  r.spec = params(SpecMethod::kDraft, 4);
  EXPECT_EQ((*engine)->submit(r, {}).status().code(), ErrorCode::kInvalidArgument);
  r.spec = params(SpecMethod::kPld, 0);
  EXPECT_EQ((*engine)->submit(r, {}).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace peregrine
