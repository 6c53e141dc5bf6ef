// ModelDrafter on the real stories260K: its greedy chain as its own draft is its greedy
// continuation; layer skip equals forward with n_layers by hand; batched requests equal lone
// ones; tree nodes are the draft's most probable tokens with their path log-probabilities;
// sampled chains carry q; resync after partial acceptance; context and KV-pool limits give
// fewer nodes; blocks come back; option errors.
#include "peregrine/spec/model_drafter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <set>
#include <sstream>

#include "formats/test_files.h"
#include "peregrine/model/synth_model.h"
#include "peregrine/quant/convert_model.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

class ModelDrafterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::load_stories260k();
    ASSERT_NE(model_, nullptr);
    auto tok = load_tokenizer(model_->file());
    ASSERT_TRUE(tok) << tok.status().message();
    std::istringstream text(test::read_file(test::shared_dir() + "/data/tinystories/tinystories_valid_excerpt.txt"));
    for (std::string sentence; prompts_.size() < 4 && std::getline(text, sentence, '.');) {
      if (sentence.size() < 30) continue;
      prompts_.push_back((*tok)->encode(sentence.substr(sentence.find_first_not_of(" \n")), true));
    }
    ASSERT_EQ(prompts_.size(), 4u);
  }

  std::unique_ptr<ModelDrafter> make(ModelDrafterOptions o = {}) const {
    if (o.kv_blocks == 0) o.kv_blocks = 256;
    auto d = ModelDrafter::create(*model_, model_->config(), o);
    EXPECT_TRUE(d) << d.status().message();
    return d ? std::move(*d) : nullptr;
  }

  /// Logits [vocab] after `tokens`, one prefill in a fresh cache of the first n_layers layers.
  std::vector<float> logits_after(std::span<const std::int32_t> tokens, std::int64_t n_layers = 0) {
    KvCache cache = test::make_kv_cache(model_->config(), static_cast<std::int64_t>(tokens.size()));
    Batch batch;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      batch.add(tokens[i], static_cast<std::int32_t>(i), 0, i + 1 == tokens.size());
    }
    std::vector<float> logits;
    const Status st = model_->forward(batch, cache, logits, pool_, n_layers);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return logits;
  }

  /// k greedy tokens of `model` (default: stories260K) after `tokens` by plain step-by-step
  /// decoding of its first n_layers layers.
  std::vector<std::int32_t> greedy_by_hand(std::vector<std::int32_t> tokens, std::int32_t k, std::int64_t n_layers = 0,
                                           const LlamaModel* model = nullptr) {
    if (model == nullptr) model = model_.get();
    KvCache cache = test::make_kv_cache(model->config(), static_cast<std::int64_t>(tokens.size()) + k);
    Batch batch;
    for (std::size_t i = 0; i < tokens.size(); ++i) batch.add(tokens[i], static_cast<std::int32_t>(i), 0, i + 1 == tokens.size());
    std::vector<std::int32_t> out;
    std::vector<float> logits;
    for (std::int32_t step = 0; step < k; ++step) {
      EXPECT_TRUE(model->forward(batch, cache, logits, pool_, n_layers).is_ok());
      out.push_back(argmax(logits));
      batch.clear();
      batch.add(out.back(), static_cast<std::int32_t>(tokens.size() + out.size() - 1), 0, true);
    }
    return out;
  }

  static std::vector<std::int32_t> tokens_of(const DraftTree& t) {
    std::vector<std::int32_t> out;
    for (const DraftNode& n : t.nodes) out.push_back(n.token);
    return out;
  }

  /// `tokens` followed by the path root → node's parent: the context whose next-token logits
  /// gave `node`.
  static std::vector<std::int32_t> context_of(std::vector<std::int32_t> tokens, const DraftTree& t, std::size_t node) {
    const auto at = tokens.size();
    for (std::int32_t i = t.nodes[node].parent; i >= 0; i = t.nodes[static_cast<std::size_t>(i)].parent) {
      tokens.insert(tokens.begin() + static_cast<std::ptrdiff_t>(at), t.nodes[static_cast<std::size_t>(i)].token);
    }
    return tokens;
  }

  DraftTree draft_one(ModelDrafter& d, std::span<const std::int32_t> tokens, std::int32_t max_nodes,
                      std::int32_t branching = 1, std::int32_t seq = 0, const SamplingParams* sampling = &greedy_,
                      std::mt19937_64* rng = nullptr) {
    std::vector<DraftTree> trees;
    const DraftRequest r{seq, tokens, max_nodes, branching, sampling, rng};
    const Status st = d.draft({&r, 1}, trees, pool_);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return trees.empty() ? DraftTree{} : trees[0];
  }

  std::int64_t blocks_in_use(const ModelDrafter& d) const {
    return d.kv_cache().pool().n_blocks() - d.kv_cache().pool().n_free();
  }

  static void expect_same_tree(const DraftTree& a, const DraftTree& b) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.nodes.size(); ++i) {
      EXPECT_EQ(a.nodes[i].token, b.nodes[i].token) << i;
      EXPECT_EQ(a.nodes[i].parent, b.nodes[i].parent) << i;
      EXPECT_NEAR(a.nodes[i].log_q, b.nodes[i].log_q, 1e-4) << i;
    }
  }

  static inline const SamplingParams greedy_ = [] {
    SamplingParams p;
    p.temperature = 0.0f;
    return p;
  }();

  std::unique_ptr<LlamaModel> model_;
  std::vector<std::vector<std::int32_t>> prompts_;
  ThreadPool pool_{2};
};

/// log softmax(logits)[id] in f64.
double log_softmax_at(const std::vector<float>& logits, std::int32_t id) {
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(l - max);
  return logits[static_cast<std::size_t>(id)] - max - std::log(sum);
}

TEST_F(ModelDrafterTest, GreedyChainOfTheModelItselfIsItsGreedyContinuation) {
  auto d = make();
  const std::vector<std::int32_t>& prompt = prompts_[0];
  const std::vector<std::int32_t> expected = greedy_by_hand(prompt, 40);
  // Draft 4, accept them all plus the target's next token, as a verifier agreeing with the
  // draft would: the drafts stitch into the greedy continuation.
  std::vector<std::int32_t> tokens = prompt;
  while (tokens.size() < prompt.size() + 35) {
    const DraftTree t = draft_one(*d, tokens, 4);
    ASSERT_EQ(t.size(), 4);
    ASSERT_TRUE(t.is_chain());
    const std::size_t at = tokens.size() - prompt.size();
    EXPECT_EQ(tokens_of(t), std::vector<std::int32_t>(expected.begin() + static_cast<std::ptrdiff_t>(at),
                                                      expected.begin() + static_cast<std::ptrdiff_t>(at + 4)));
    double log_q = 0.0;
    for (std::size_t i = 0; i < t.nodes.size(); ++i) {
      log_q += log_softmax_at(logits_after(context_of(tokens, t, i)), t.nodes[i].token);
      EXPECT_NEAR(t.nodes[i].log_q, log_q, 1e-4);
      EXPECT_TRUE(t.nodes[i].q.empty());
    }
    const std::vector<std::int32_t> accepted = tokens_of(t);
    tokens.insert(tokens.end(), accepted.begin(), accepted.end());
    tokens.push_back(expected[tokens.size() - prompt.size()]);
    EXPECT_EQ(blocks_in_use(*d), blocks_for_tokens(static_cast<std::int64_t>(tokens.size()) - 5, kDefaultKvBlockSize));
  }
  EXPECT_EQ(d->method(), SpecMethod::kDraft);
}

TEST_F(ModelDrafterTest, LayerSkipEqualsForwardWithTwoLayersByHand) {
  ModelDrafterOptions o;
  o.method = SpecMethod::kLayerSkip;
  o.n_layers = 2;
  auto d = make(o);
  EXPECT_EQ(d->method(), SpecMethod::kLayerSkip);
  EXPECT_EQ(d->kv_cache().n_layers(), 2);
  std::int32_t differ_from_all_layers = 0;
  for (std::int32_t seq = 0; seq < 4; ++seq) {
    const std::vector<std::int32_t>& prompt = prompts_[static_cast<std::size_t>(seq)];
    const DraftTree t = draft_one(*d, prompt, 6, 1, seq);
    EXPECT_EQ(tokens_of(t), greedy_by_hand(prompt, 6, 2));
    differ_from_all_layers += tokens_of(t) != greedy_by_hand(prompt, 6) ? 1 : 0;
    const DraftTree tree = draft_one(*d, prompt, 5, 3, seq);
    const std::vector<float> logits = logits_after(prompt, 2);
    for (const DraftNode& n : tree.nodes) {
      if (n.parent == -1) {
        EXPECT_NEAR(n.log_q, log_softmax_at(logits, n.token), 1e-4);
      }
    }
  }
  EXPECT_GT(differ_from_all_layers, 0) << "two layers draft exactly as all five do";
}

TEST_F(ModelDrafterTest, TreeNodesAreTheDraftsMostProbableTokensWithTheirPathLogProbabilities) {
  auto d = make();
  const std::vector<std::int32_t>& prompt = prompts_[1];
  const std::int32_t b = 3;
  const DraftTree t = draft_one(*d, prompt, 12, b);
  ASSERT_EQ(t.size(), 12);
  EXPECT_FALSE(t.is_chain());
  // Root children: the top-b tokens by probability, most probable first.
  const std::vector<float> root = logits_after(prompt);
  std::vector<std::int32_t> top(root.size());
  std::iota(top.begin(), top.end(), 0);
  std::partial_sort(top.begin(), top.begin() + b, top.end(),
                    [&](std::int32_t x, std::int32_t y) { return root[static_cast<std::size_t>(x)] > root[static_cast<std::size_t>(y)]; });
  top.resize(b);
  std::vector<std::int32_t> root_children;
  for (const DraftNode& n : t.nodes) {
    if (n.parent == -1) root_children.push_back(n.token);
  }
  EXPECT_EQ(root_children, top);
  // Every node: parent first, log_q = parent's + log p(token | path) by hand, siblings by
  // decreasing log_q, among the b most probable tokens after its parent's path.
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    const DraftNode& n = t.nodes[i];
    ASSERT_LT(n.parent, static_cast<std::int32_t>(i));
    const std::vector<float> logits = logits_after(context_of(prompt, t, i));
    const double parent_q = n.parent < 0 ? 0.0 : t.nodes[static_cast<std::size_t>(n.parent)].log_q;
    EXPECT_NEAR(n.log_q, parent_q + log_softmax_at(logits, n.token), 1e-4) << i;
    const float own = logits[static_cast<std::size_t>(n.token)];
    EXPECT_LT(std::count_if(logits.begin(), logits.end(), [&](float l) { return l > own; }), b) << i;
    if (i > 0 && t.nodes[i - 1].parent == n.parent) {
      EXPECT_GE(t.nodes[i - 1].log_q, n.log_q) << i;
    }
  }
  EXPECT_EQ(blocks_in_use(*d), blocks_for_tokens(static_cast<std::int64_t>(prompt.size()), kDefaultKvBlockSize));
}

TEST_F(ModelDrafterTest, RequestsInOneCallGiveTheSameTreesAsAlone) {
  auto together = make();
  auto alone = make();
  std::vector<DraftRequest> reqs;
  for (std::int32_t i = 0; i < 4; ++i) {
    reqs.push_back(DraftRequest{100 + i, prompts_[static_cast<std::size_t>(i)], 8, i % 2 == 0 ? 2 : 1, &greedy_, nullptr});
  }
  for (int round = 0; round < 2; ++round) {
    std::vector<DraftTree> trees;
    ASSERT_TRUE(together->draft(reqs, trees, pool_).is_ok());
    ASSERT_EQ(trees.size(), reqs.size());
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      SCOPED_TRACE("request " + std::to_string(i) + " round " + std::to_string(round));
      expect_same_tree(trees[i], draft_one(*alone, reqs[i].tokens, 8, reqs[i].branching, reqs[i].seq));
      EXPECT_EQ(trees[i].size(), 8);
    }
    // Next round: each sequence has grown by its first drafted token and another.
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      prompts_[i].push_back(trees[i].nodes[0].token);
      prompts_[i].push_back(7);
      reqs[i].tokens = prompts_[i];
    }
  }
}

TEST_F(ModelDrafterTest, SampledChainNodesCarryTheirDistribution) {
  auto d = make();
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 30;
  p.top_p = 0.95f;
  p.min_p = 0.02f;
  p.repeat_penalty = 1.3f;
  const std::vector<std::int32_t>& prompt = prompts_[2];
  std::mt19937_64 rng(5);
  const DraftTree t = draft_one(*d, prompt, 6, 1, 0, &p, &rng);
  ASSERT_EQ(t.size(), 6);
  ASSERT_TRUE(t.is_chain());
  double log_q = 0.0;
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    const DraftNode& n = t.nodes[i];
    // q by hand: the logits after the path, the repetition penalty over prompt + path, then the
    // sampler's distribution.
    const std::vector<std::int32_t> context = context_of(prompt, t, i);
    std::vector<float> logits = logits_after(context);
    const auto window_size = std::min<std::ptrdiff_t>(p.repeat_last_n, static_cast<std::ptrdiff_t>(context.size()));
    const std::vector<std::int32_t> window(context.end() - window_size, context.end());
    for (std::int32_t id : std::set<std::int32_t>(window.begin(), window.end())) {
      float& l = logits[static_cast<std::size_t>(id)];
      l = l > 0.0f ? l / p.repeat_penalty : l * p.repeat_penalty;
    }
    const auto q = Sampler(p).distribution(logits);
    ASSERT_EQ(n.q.size(), q.size()) << i;
    float sum = 0.0f, q_token = 0.0f;
    for (std::size_t j = 0; j < q.size(); ++j) {
      EXPECT_EQ(n.q[j].first, q[j].first);
      EXPECT_NEAR(n.q[j].second, q[j].second, 1e-5);
      sum += n.q[j].second;
      if (n.q[j].first == n.token) q_token = n.q[j].second;
    }
    EXPECT_NEAR(sum, 1.0f, 1e-4);
    EXPECT_GT(q_token, 0.0f) << "node " << i << " token not in its q";
    log_q += std::log(static_cast<double>(q_token));
    EXPECT_NEAR(n.log_q, log_q, 1e-4);
  }
  // The same seed draws the same chain.
  std::mt19937_64 again(5);
  auto d2 = make();
  EXPECT_EQ(tokens_of(draft_one(*d2, prompt, 6, 1, 0, &p, &again)), tokens_of(t));
}

TEST_F(ModelDrafterTest, ResyncAfterPartialAcceptanceEqualsAFreshDrafter) {
  auto d = make();
  std::vector<std::int32_t> tokens = prompts_[3];
  const DraftTree first = draft_one(*d, tokens, 6);
  ASSERT_EQ(first.size(), 6);
  // The target accepted the first draft token and corrected the second.
  tokens.push_back(first.nodes[0].token);
  tokens.push_back((first.nodes[1].token + 1) % 512);
  expect_same_tree(draft_one(*d, tokens, 6), draft_one(*make(), tokens, 6));
  EXPECT_EQ(blocks_in_use(*d), blocks_for_tokens(static_cast<std::int64_t>(tokens.size()), kDefaultKvBlockSize));
  // A rewrite of older tokens (e.g. a preempted request recomputed differently), and the same
  // tokens twice (the root is fed again).
  tokens.resize(tokens.size() - 5);
  tokens.push_back(3);
  expect_same_tree(draft_one(*d, tokens, 6, 2), draft_one(*make(), tokens, 6, 2));
  expect_same_tree(draft_one(*d, tokens, 6, 2), draft_one(*make(), tokens, 6, 2));
}

TEST_F(ModelDrafterTest, ContextAndPoolLimitsDraftFewerNodes) {
  const std::int64_t max_seq_len = model_->config().max_seq_len;
  auto d = make();
  std::vector<std::int32_t> tokens;
  while (static_cast<std::int64_t>(tokens.size()) < max_seq_len - 2) tokens.insert(tokens.end(), prompts_[0].begin(), prompts_[0].end());
  tokens.resize(static_cast<std::size_t>(max_seq_len - 2));
  // The root sits at position max_seq_len - 3: nodes of depth <= 3 still fit.
  const DraftTree near_end = draft_one(*d, tokens, 8);
  EXPECT_EQ(near_end.size(), 3);
  tokens.resize(static_cast<std::size_t>(max_seq_len + 1));
  EXPECT_TRUE(draft_one(*d, tokens, 8, 1, 1).empty());
  // A pool with room for the context's blocks only: the chain stops where its last block fills.
  const std::vector<std::int32_t> context(tokens.begin(), tokens.begin() + 44);  // root at 43; block ends at 47
  ModelDrafterOptions o;
  o.kv_blocks = 3;
  auto small = make(o);
  const DraftTree t = draft_one(*small, context, 8);
  ASSERT_EQ(t.size(), 5);  // nodes fed at positions 44..47, the fifth from position 47's logits
  std::vector<std::int32_t> full = tokens_of(draft_one(*make(), context, 8));
  full.resize(5);
  EXPECT_EQ(tokens_of(t), full);
  // No room for the context at all: no draft, no error.
  const std::vector<std::int32_t> longer(tokens.begin(), tokens.begin() + 60);
  EXPECT_TRUE(draft_one(*small, longer, 8, 1, 2).empty());
}

TEST_F(ModelDrafterTest, ContextWindowDraftsFromTheSinksAndTheTail) {
  // Two sentences (over 4 + 8 + 1 tokens): the draft model sees the first kDraftSinkTokens and
  // the last 8 of the context before the root, renumbered from position 0, and keeps that
  // window start as the sequence grows.
  ModelDrafterOptions o;
  o.context_window = 8;
  auto d = make(o);
  std::vector<std::int32_t> tokens = prompts_[0];
  tokens.insert(tokens.end(), prompts_[1].begin(), prompts_[1].end());
  const auto start = static_cast<std::ptrdiff_t>(tokens.size()) - 1 - 8;
  ASSERT_GT(start, kDraftSinkTokens);
  std::vector<std::int32_t> view(tokens.begin(), tokens.begin() + kDraftSinkTokens);
  view.insert(view.end(), tokens.begin() + start, tokens.end());
  const std::vector<std::int32_t> expected = greedy_by_hand(view, 9);
  const DraftTree first = draft_one(*d, tokens, 4);
  EXPECT_EQ(tokens_of(first), std::vector<std::int32_t>(expected.begin(), expected.begin() + 4));
  EXPECT_EQ(blocks_in_use(*d), blocks_for_tokens(static_cast<std::int64_t>(view.size()), kDefaultKvBlockSize));
  tokens.insert(tokens.end(), expected.begin(), expected.begin() + 5);  // 4 accepted + the target's token
  EXPECT_EQ(tokens_of(draft_one(*d, tokens, 4)), std::vector<std::int32_t>(expected.begin() + 5, expected.end()));
  // A context within the window is drafted whole.
  o.context_window = 32;
  auto wide = make(o);
  const std::vector<std::int32_t>& whole = prompts_[2];
  ASSERT_LE(static_cast<std::int64_t>(whole.size()) - 1, kDraftSinkTokens + 32);
  EXPECT_EQ(tokens_of(draft_one(*wide, whole, 4)), greedy_by_hand(whole, 4));
  EXPECT_EQ(blocks_in_use(*wide), blocks_for_tokens(static_cast<std::int64_t>(whole.size()), kDefaultKvBlockSize));
}

TEST_F(ModelDrafterTest, EveryDraftBlockReturnsAfterRelease) {
  auto d = make();
  std::mt19937_64 rng(1);
  SamplingParams sampled;
  // A greedy chain, trees of 2 and 3 branches, a sampled chain.
  for (std::int32_t i = 0; i < 4; ++i) {
    const bool sample = i == 3;
    const DraftTree t = draft_one(*d, prompts_[static_cast<std::size_t>(i)], 8, sample ? 1 : i + 1, i,
                                  sample ? &sampled : &greedy_, sample ? &rng : nullptr);
    EXPECT_EQ(t.size(), 8);
  }
  std::int64_t context_blocks = 0;
  for (const auto& p : prompts_) context_blocks += blocks_for_tokens(static_cast<std::int64_t>(p.size()), kDefaultKvBlockSize);
  EXPECT_EQ(blocks_in_use(*d), context_blocks);
  d->release(42);  // unknown: no-op
  for (std::int32_t i = 0; i < 4; ++i) d->release(i);
  EXPECT_EQ(blocks_in_use(*d), 0);
}

TEST_F(ModelDrafterTest, MinConfidenceStopsExpandingUnlikelyPaths) {
  ModelDrafterOptions o;
  o.min_confidence = 0.5f;
  auto d = make(o);
  for (const auto& prompt : prompts_) {
    const DraftTree t = draft_one(*d, prompt, 16, 2);
    ASSERT_FALSE(t.empty());
    for (const DraftNode& n : t.nodes) {
      if (n.parent >= 0) {
        EXPECT_GE(std::exp(t.nodes[static_cast<std::size_t>(n.parent)].log_q), 0.5f);
      }
    }
    // Without the threshold the same prompt grows the full budget.
    EXPECT_EQ(draft_one(*make(), prompt, 16, 2).size(), 16);
  }
}

TEST_F(ModelDrafterTest, BadOptionsAndRequestsAreErrors) {
  // A draft model with another vocabulary (a random-weight tiny Llama of 128 tokens).
  test::TempDir dir;
  ModelShape shape;
  shape.name = "tiny";
  shape.config = model_->config();
  shape.config.vocab_size = 128;
  const std::string path = dir.file("tiny.gguf");
  ASSERT_TRUE(synth_gguf(shape, {}, path, pool_));
  auto file = load_model_file(path);
  ASSERT_TRUE(file) << file.status().message();
  auto other = LlamaModel::create(std::move(*file));
  ASSERT_TRUE(other) << other.status().message();
  ModelDrafterOptions o;
  o.kv_blocks = 8;
  auto mismatch = ModelDrafter::create(*other, model_->config(), o);
  ASSERT_FALSE(mismatch);
  EXPECT_EQ(mismatch.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("vocabulary"), std::string::npos) << mismatch.status().message();

  using Edit = void (*)(ModelDrafterOptions&);
  for (Edit bad : {Edit{[](ModelDrafterOptions& x) { x.n_layers = 6; }}, Edit{[](ModelDrafterOptions& x) { x.n_layers = -1; }},
                   Edit{[](ModelDrafterOptions& x) { x.method = SpecMethod::kPld; }},
                   Edit{[](ModelDrafterOptions& x) { x.min_confidence = 1.0f; }}, Edit{[](ModelDrafterOptions& x) { x.kv_blocks = 0; }},
                   Edit{[](ModelDrafterOptions& x) { x.context_window = -1; }}}) {
    ModelDrafterOptions b = o;
    bad(b);
    auto d = ModelDrafter::create(*model_, model_->config(), b);
    ASSERT_FALSE(d);
    EXPECT_EQ(d.status().code(), ErrorCode::kInvalidArgument) << d.status().message();
  }

  auto d = make();
  std::vector<DraftTree> trees;
  SamplingParams sampled;
  const DraftRequest no_rng{0, prompts_[0], 4, 1, &sampled, nullptr};
  EXPECT_EQ(d->draft({&no_rng, 1}, trees, pool_).code(), ErrorCode::kInvalidArgument);
  const std::vector<std::int32_t> bad_token{1, 600};
  const DraftRequest out_of_vocab{0, bad_token, 4, 1, &greedy_, nullptr};
  EXPECT_EQ(d->draft({&out_of_vocab, 1}, trees, pool_).code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(blocks_in_use(*d), 0);
}

TEST_F(ModelDrafterTest, QuantizedSelfDraftDraftsItsOwnGreedyContinuation) {
  auto file = load_model_file(test::stories260k_path());
  ASSERT_TRUE(file);
  ASSERT_TRUE(convert_model_weights(*file, DType::kQ8_0));
  auto q8 = LlamaModel::create(std::move(*file));
  ASSERT_TRUE(q8) << q8.status().message();
  ModelDrafterOptions o;
  o.method = SpecMethod::kQuant;
  o.kv_blocks = 16;
  auto d = ModelDrafter::create(*q8, model_->config(), o);
  ASSERT_TRUE(d) << d.status().message();
  EXPECT_EQ((*d)->method(), SpecMethod::kQuant);
  // The Q8_0 copy drafts its own greedy continuation.
  EXPECT_EQ(tokens_of(draft_one(**d, prompts_[0], 4)), greedy_by_hand(prompts_[0], 4, 0, &*q8));
}

}  // namespace
}  // namespace peregrine
