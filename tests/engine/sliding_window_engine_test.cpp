// Sliding-window KV blocks freed in a real serving run (gemma3-270m, real weights and text):
// five of every six Gemma 3 layers see only the last `sliding_window` positions. Past the
// window, the engine frees each window group's blocks that left it, so a long generation holds
// at most window / block_size + 1 blocks per window group (beside the full-attention group's
// blocks of every position); with --swa-full (EngineOptions::swa_full) it keeps them all. The
// greedy tokens are the same either way, and a second request for the same prompt is served
// from the prefix cache — whose window blocks the first request offered before freeing them —
// with the same tokens again.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "peregrine/engine/engine.h"
#include "peregrine/kv/kv_layer_groups.h"
#include "real_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

constexpr std::int32_t kBlock = 16;
constexpr std::int32_t kNew = 24;

struct WindowRun {
  std::vector<std::int32_t> tokens;
  std::int64_t most_blocks_over_bound = 0;  // max over steps of used blocks − the window bound
  std::int64_t cached_prompt_tokens = 0;
};

// Generates kNew greedy tokens for `prompt` (twice in one engine when `twice`: the second run's
// figures are reported), checking after every step how many KV blocks are in use against what
// freeing allows: the full-attention groups' blocks of every position so far plus
// window / block_size + 1 per window group.
WindowRun generate(const LlamaModel& model, const std::vector<std::int32_t>& prompt, bool swa_full, bool prefix_caching, bool twice,
             ThreadPool& pool) {
  const KvLayerGroups groups = kv_layer_groups(model.config().kv_shape());
  const auto n_window = std::count_if(groups.group_windows.begin(), groups.group_windows.end(), [](std::int64_t w) { return w > 0; });
  const std::int64_t n_full = groups.n_groups() - n_window, window = model.config().sliding_window;
  EngineOptions o;
  o.kv = {static_cast<std::int32_t>(2 * (prompt.size() + kNew) / kBlock + 4), kBlock, DType::kF32};
  o.max_batch_tokens = 256;
  o.swa_full = swa_full;
  o.prefix_caching = prefix_caching;
  auto engine = Engine::create(model, o, pool);
  EXPECT_TRUE(engine) << engine.status().message();
  WindowRun out;
  for (int round = 0; engine && round < (twice ? 2 : 1); ++round) {
    out = {};
    std::int64_t computed = 0;  // positions of the sequence so far (an upper bound)
    RequestOptions r;
    r.prompt = prompt;
    r.max_tokens = kNew;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    RequestCallbacks cb{[&](const TokenEvent& e) {
                          out.tokens.push_back(e.token);
                          return true;
                        },
                        [&](const RequestResult& res) {
                          EXPECT_EQ(res.reason, FinishReason::kLength) << res.error.message();
                          out.cached_prompt_tokens = res.cached_prompt_tokens;
                        }};
    EXPECT_TRUE((*engine)->submit(std::move(r), std::move(cb)));
    while ((*engine)->step()) {
      computed = static_cast<std::int64_t>(prompt.size() + out.tokens.size());
      const EngineMetrics m = (*engine)->metrics();
      const std::int64_t in_use = m.kv_blocks_total - m.kv_blocks_free;
      const std::int64_t bound = n_full * blocks_for_tokens(computed, kBlock) + n_window * (window / kBlock + 1);
      out.most_blocks_over_bound = std::max(out.most_blocks_over_bound, in_use - bound);
    }
  }
  return out;
}

TEST(SlidingWindowEngine, Gemma3FreesBlocksThatLeftTheWindowWithTheSameTokens) {
  const test::RealModelEntry entry = test::real_model("gemma3-270m");
  PEREGRINE_REQUIRE_REAL_MODEL(entry);
  const test::LoadedRealModel loaded = test::load_manifest_model(entry);
  ASSERT_TRUE(loaded.model && loaded.tokenizer);
  const LlamaModel& model = *loaded.model;
  const std::int64_t window = model.config().sliding_window;
  ASSERT_GT(window, 0) << "gemma3-270m's GGUF names a sliding window";
  ASSERT_EQ(window % kBlock, 0);
  const std::string text = test::read_file(test::shared_dir() + "/data/tinystories/tinystories_sample.txt");
  std::vector<std::int32_t> prompt = loaded.tokenizer->encode(text, true);
  ASSERT_GT(static_cast<std::int64_t>(prompt.size()), window + 3 * kBlock) << "the prompt must pass the window";
  // Past the window, and a whole number of blocks: the cached run then computes the last block's
  // 16 tokens (the prefix cache keeps at least one token to compute), which run the row-panel
  // kernels as the whole prompt does — a suffix of up to 8 tokens takes the GEMV, whose f32 sums
  // part from the panels' in their last bits and so the greedy text at a near tie.
  prompt.resize(static_cast<std::size_t>((window + 200) / kBlock * kBlock + kBlock));
  ThreadPool pool(2);

  const WindowRun full = generate(model, prompt, true, false, false, pool);
  const WindowRun freed = generate(model, prompt, false, false, false, pool);
  ASSERT_EQ(full.tokens.size(), static_cast<std::size_t>(kNew));
  EXPECT_EQ(freed.tokens, full.tokens);
  EXPECT_LE(freed.most_blocks_over_bound, 0) << "a window group held more than window / block_size + 1 blocks";
  EXPECT_GT(full.most_blocks_over_bound, 0) << "--swa-full keeps the blocks the bound excludes";

  const WindowRun cached = generate(model, prompt, false, true, true, pool);
  std::printf("[ swa ] window %lld, %zu prompt tokens: most blocks over the bound freed %lld, --swa-full %lld; "
              "cached prompt tokens %lld\n",
              static_cast<long long>(window), prompt.size(), static_cast<long long>(freed.most_blocks_over_bound),
              static_cast<long long>(full.most_blocks_over_bound), static_cast<long long>(cached.cached_prompt_tokens));
  EXPECT_GT(cached.cached_prompt_tokens, window) << "the second request reuses the first one's prompt blocks";
  EXPECT_EQ(cached.tokens, full.tokens);
}

}  // namespace
}  // namespace peregrine
