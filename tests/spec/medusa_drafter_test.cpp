// MedusaDrafter on stories260K: its heads read the target's feature at the root's parent
// position (an untrained head, i.e. the LM head, drafts the root's own argmax), ResBlocks are
// applied as Medusa's y + SiLU(W y + b) (checked against a hand computation), trees follow the
// node budget, stale or missing features give no draft, and the engine hands every committed
// position's feature over exactly once, equal to a plain forward's.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "peregrine/engine/engine.h"
#include "peregrine/spec/medusa_drafter.h"
#include "spec/medusa_fixture.h"
#include "test_models.h"

namespace peregrine {
namespace {

std::int32_t argmax(std::span<const float> v) {
  return static_cast<std::int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

SamplingParams greedy() {
  SamplingParams s;
  s.temperature = 0.0f;
  return s;
}

struct Fixture {
  ThreadPool pool{1};
  std::unique_ptr<LlamaModel> target = test::load_stories260k();
  std::vector<std::int32_t> prompt = {1, 403, 407, 261, 378, 275, 262, 291, 346, 270};
};

std::unique_ptr<MedusaDrafter> make(MedusaHeads heads, const ModelConfig& c) {
  auto d = MedusaDrafter::create(std::move(heads), c);
  EXPECT_TRUE(d) << d.status().message();
  return d ? std::move(*d) : nullptr;
}

TEST(MedusaDrafter, UntrainedHeadsDraftTheRootsArgmaxFromItsParentsFeature) {
  Fixture s;
  ASSERT_TRUE(s.target);
  const std::int64_t dim = s.target->config().dim;
  const std::int64_t vocab = s.target->config().vocab_size;
  const test::Features f = test::target_features(*s.target, s.prompt, s.pool);
  const auto m = static_cast<std::int64_t>(s.prompt.size());
  std::vector<std::int32_t> tokens = s.prompt;
  tokens.push_back(argmax(std::span(f.logits).subspan(static_cast<std::size_t>((m - 1) * vocab), static_cast<std::size_t>(vocab))));
  auto drafter = make(test::untrained_medusa_heads(*s.target, 3), s.target->config());
  ASSERT_TRUE(drafter);
  const SamplingParams g = greedy();
  DraftRequest r{7, tokens, 3, 1, &g, nullptr, f.features, 0};
  std::vector<DraftTree> trees;
  ASSERT_TRUE(drafter->draft(std::span(&r, 1), trees, s.pool).is_ok());
  ASSERT_EQ(trees.size(), 1u);
  ASSERT_EQ(trees[0].size(), 3);  // every head is the LM head on the same feature: the root thrice
  EXPECT_TRUE(trees[0].is_chain());
  for (const DraftNode& n : trees[0].nodes) EXPECT_EQ(n.token, tokens.back());

  // The feature is kept: the next call (no new features) drafts again for the same root; a
  // request one token further has no feature of its parent and gets no draft.
  DraftRequest again{7, tokens, 2, 1, &g, nullptr, {}, 0};
  ASSERT_TRUE(drafter->draft(std::span(&again, 1), trees, s.pool).is_ok());
  EXPECT_EQ(trees[0].size(), 2);
  std::vector<std::int32_t> longer = tokens;
  longer.push_back(5);
  DraftRequest stale{7, longer, 2, 1, &g, nullptr, {}, 0};
  ASSERT_TRUE(drafter->draft(std::span(&stale, 1), trees, s.pool).is_ok());
  EXPECT_TRUE(trees[0].empty());
  drafter->release(7);
  ASSERT_TRUE(drafter->draft(std::span(&again, 1), trees, s.pool).is_ok());
  EXPECT_TRUE(trees[0].empty());  // released: the feature is gone

  const std::vector<float> ragged(static_cast<std::size_t>(dim + 1), 0.0f);
  DraftRequest bad{7, tokens, 2, 1, &g, nullptr, ragged, 0};
  EXPECT_EQ(drafter->draft(std::span(&bad, 1), trees, s.pool).code(), ErrorCode::kInvalidArgument);
}

TEST(MedusaDrafter, ResBlocksMatchAHandComputation) {
  Fixture s;
  ASSERT_TRUE(s.target);
  const ModelConfig& c = s.target->config();
  const auto dim = static_cast<std::size_t>(c.dim), vocab = static_cast<std::size_t>(c.vocab_size);
  MedusaHeads heads = test::untrained_medusa_heads(*s.target, 4);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  for (auto& [name, values] : heads.tensors) {
    if (name.find("linear") != std::string::npos) {
      for (float& v : values) v = normal(rng);
    }
  }
  const test::Features f = test::target_features(*s.target, s.prompt, s.pool);
  const std::vector<float> h(f.features.end() - static_cast<std::ptrdiff_t>(dim), f.features.end());
  std::vector<std::int32_t> expected;  // head k's argmax of lm_head · (h + SiLU(W h + b)), in f64
  for (std::int64_t k = 0; k < 4; ++k) {
    const std::string p = std::to_string(k) + ".";
    const auto& w = heads.tensors.at(p + "0.linear.weight");
    const auto& b = heads.tensors.at(p + "0.linear.bias");
    const auto& head = heads.tensors.at(p + "1.weight");
    std::vector<double> y(dim);
    for (std::size_t i = 0; i < dim; ++i) {
      double z = b[i];
      for (std::size_t j = 0; j < dim; ++j) z += static_cast<double>(w[i * dim + j]) * h[j];
      y[i] = h[i] + z / (1.0 + std::exp(-z));
    }
    std::vector<float> logits(vocab);
    for (std::size_t t = 0; t < vocab; ++t) {
      double l = 0;
      for (std::size_t i = 0; i < dim; ++i) l += static_cast<double>(head[t * dim + i]) * y[i];
      logits[t] = static_cast<float>(l);
    }
    expected.push_back(argmax(logits));
  }
  auto drafter = make(std::move(heads), c);
  ASSERT_TRUE(drafter);
  std::vector<std::int32_t> tokens = s.prompt;
  tokens.push_back(42);  // any root: the heads read only its parent's feature
  const SamplingParams g = greedy();
  DraftRequest r{0, tokens, 4, 1, &g, nullptr, f.features, 0};
  std::vector<DraftTree> trees;
  ASSERT_TRUE(drafter->draft(std::span(&r, 1), trees, s.pool).is_ok());
  ASSERT_EQ(trees[0].size(), 4);
  for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(trees[0].nodes[k].token, expected[k]) << "head " << k;
}

TEST(MedusaDrafter, TreesKeepTheBudgetAndExpandTheBestCandidatesPerHead) {
  Fixture s;
  ASSERT_TRUE(s.target);
  const test::Features f = test::target_features(*s.target, s.prompt, s.pool);
  auto drafter = make(test::untrained_medusa_heads(*s.target, 3), s.target->config());
  ASSERT_TRUE(drafter);
  std::vector<std::int32_t> tokens = s.prompt;
  tokens.push_back(42);
  const SamplingParams g = greedy();
  DraftRequest r{0, tokens, 9, 3, &g, nullptr, f.features, 0};
  std::vector<DraftTree> trees;
  ASSERT_TRUE(drafter->draft(std::span(&r, 1), trees, s.pool).is_ok());
  const DraftTree& t = trees[0];
  ASSERT_EQ(t.size(), 9);
  EXPECT_FALSE(t.is_chain());
  std::map<std::int32_t, int> children;
  for (std::int64_t i = 0; i < t.size(); ++i) {
    const DraftNode& n = t.nodes[static_cast<std::size_t>(i)];
    EXPECT_LT(n.parent, i);  // parents first
    EXPECT_LE(t.depth(i), 3);
    EXPECT_LE(++children[n.parent], 3);
    if (n.parent >= 0) {
      EXPECT_LE(n.log_q, t.nodes[static_cast<std::size_t>(n.parent)].log_q);
    }
  }
  EXPECT_EQ(children[-1], 3);  // the root's three most probable children
}

TEST(MedusaDrafter, RefusesHeadsOfAnotherShape) {
  Fixture s;
  ASSERT_TRUE(s.target);
  MedusaHeads wrong_hidden = test::untrained_medusa_heads(*s.target, 2);
  wrong_hidden.hidden += 1;
  auto a = MedusaDrafter::create(std::move(wrong_hidden), s.target->config());
  ASSERT_FALSE(a);
  EXPECT_EQ(a.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("hidden size"), std::string::npos) << a.status().message();
  MedusaHeads missing = test::untrained_medusa_heads(*s.target, 2);
  missing.tensors.erase("1.0.linear.bias");
  EXPECT_FALSE(MedusaDrafter::create(std::move(missing), s.target->config()));
}

/// Records what the engine hands over, then drafts with the wrapped drafter.
class RecordingDrafter final : public Drafter {
 public:
  explicit RecordingDrafter(Drafter& inner) : inner_(inner) {}
  SpecMethod method() const override { return inner_.method(); }
  bool needs_features() const override { return true; }
  Status draft(std::span<const DraftRequest> requests, std::vector<DraftTree>& trees, ThreadPool& pool) override {
    for (const DraftRequest& r : requests) {
      const auto dim = static_cast<std::int64_t>(dim_);
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(r.features.size()) / dim; ++i) {
        auto& row = seen[r.seq][r.features_begin + i];
        EXPECT_TRUE(row.empty()) << "position " << r.features_begin + i << " handed over twice";
        row.assign(r.features.begin() + i * dim, r.features.begin() + (i + 1) * dim);
      }
    }
    return inner_.draft(requests, trees, pool);
  }
  void release(std::int32_t seq) override { inner_.release(seq); }
  std::size_t dim_ = 0;
  std::map<std::int32_t, std::map<std::int64_t, std::vector<float>>> seen;  // seq → position → feature

 private:
  Drafter& inner_;
};

TEST(MedusaDrafter, EngineHandsOverEveryCommittedPositionsFeature) {
  Fixture s;
  ASSERT_TRUE(s.target);
  auto medusa = make(test::untrained_medusa_heads(*s.target, 3), s.target->config());
  ASSERT_TRUE(medusa);
  RecordingDrafter recorder(*medusa);
  recorder.dim_ = static_cast<std::size_t>(s.target->config().dim);
  EngineOptions o;
  o.kv = {128, 16, DType::kF32};
  o.max_batch_tokens = 4;  // the prompts' prefill runs in chunks
  o.drafter = &recorder;
  auto engine = Engine::create(*s.target, o, s.pool);
  ASSERT_TRUE(engine);
  std::vector<std::vector<std::int32_t>> out(2);
  for (std::size_t i = 0; i < 2; ++i) {
    RequestOptions r;
    r.prompt = s.prompt;
    r.prompt.resize(s.prompt.size() - i * 3);
    r.max_tokens = 24;
    r.sampling = greedy();
    r.spec = SpecParams{SpecMethod::kMedusa, 3, i == 0 ? 1 : 2, false};
    out[i] = r.prompt;
    ASSERT_TRUE((*engine)->submit(std::move(r), {[&out, i](const TokenEvent& e) {
                                                  out[i].push_back(e.token);
                                                  return true;
                                                },
                                                {}}));
  }
  while ((*engine)->step()) {}
  ASSERT_EQ(recorder.seen.size(), 2u);
  const std::int64_t dim = s.target->config().dim;
  for (const auto& [seq, positions] : recorder.seen) {
    const std::vector<std::int32_t>& tokens = out[static_cast<std::size_t>(seq)];
    const test::Features ref = test::target_features(*s.target, tokens, s.pool);
    // Positions 0 .. up to the last draft's root parent, each once (checked in draft()).
    EXPECT_EQ(positions.begin()->first, 0);
    EXPECT_EQ(positions.rbegin()->first, static_cast<std::int64_t>(positions.size()) - 1);
    EXPECT_GT(static_cast<std::int64_t>(positions.size()), static_cast<std::int64_t>(s.prompt.size()));
    for (const auto& [p, feature] : positions) {
      for (std::int64_t j = 0; j < dim; ++j) {
        ASSERT_NEAR(feature[static_cast<std::size_t>(j)], ref.features[static_cast<std::size_t>(p * dim + j)], 2e-4)
            << "sequence " << seq << " position " << p;
      }
    }
  }
}

}  // namespace
}  // namespace peregrine
