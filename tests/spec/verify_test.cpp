// verify_draft on real next-token logits of stories260K (the target) with real drafts from
// aidreams260K (a different trained model with vocab 512: its q is far from p) and from
// stories260K's first 2 layers (a layer-skip self-draft: its q overlaps p by about half).
// Greedy verification reproduces plain greedy decoding; stochastic verification is lossless:
// the first two emitted tokens pass a chi-square goodness-of-fit test and a total-variation
// bound against the target's own distribution, for chains, trees, sampled and deterministic
// candidates, at temperature 1 and with top-k / top-p / min-p / repetition penalty; the same
// test rejects draws from the draft's q (it has power). Edge cases and input errors.
#include "peregrine/spec/verify.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "goodness_of_fit.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

using Tokens = std::vector<std::int32_t>;

constexpr std::int64_t kVocab = 512;  // stories260K and aidreams260K
constexpr int kDraws = 20000;         // per statistical case
// Sampled drafts come from the draft's top 8 tokens (the drafter's own choice of q: any q is
// lossless). It bounds the distinct drafted paths, hence the forwards the tests run, and makes
// q's support narrower than p's, which the residual distributions must make up for.
constexpr std::int32_t kDraftTopK = 8;

/// Next-token logits [kVocab] of a real model after token sequences, memoized. Consecutive
/// queries share their common prefix in one KV sequence (the forward overwrites the tail), so
/// a new draft path costs a forward over its last few tokens.
class NextTokenLogits {
 public:
  /// `n_layers` > 0 runs only the model's first n_layers layers (layer-skip self-draft).
  explicit NextTokenLogits(const LlamaModel& model, std::int64_t n_layers = 0)
      : model_(model), n_layers_(n_layers), cache_(test::make_kv_cache(model.config(), 256)) {}

  const std::vector<float>& after(const Tokens& tokens) {
    auto [it, inserted] = memo_.try_emplace(tokens);
    if (!inserted) return it->second;
    std::size_t start = 0;  // forward at least the last token
    while (start + 1 < tokens.size() && start < cached_.size() && tokens[start] == cached_[start]) ++start;
    Batch batch;
    for (std::size_t i = start; i < tokens.size(); ++i) {
      batch.add(tokens[i], static_cast<std::int32_t>(i), 0, i + 1 == tokens.size());
    }
    const Status st = model_.forward(batch, cache_, it->second, pool_, n_layers_);
    EXPECT_TRUE(st.is_ok()) << st.message();
    cached_ = st.is_ok() ? tokens : Tokens{};
    return it->second;
  }

 private:
  const LlamaModel& model_;
  std::int64_t n_layers_;
  KvCache cache_;
  ThreadPool pool_{1};
  Tokens cached_;  // the tokens in KV sequence 0
  std::map<Tokens, std::vector<float>> memo_;
};

/// The models and the prompt, loaded once for the whole binary.
struct Models {
  std::unique_ptr<LlamaModel> stories, aidreams;
  Tokens prompt;
  Tokens continuation;  // the story's tokens after the prompt
  std::unique_ptr<NextTokenLogits> target;     // stories260K
  std::unique_ptr<NextTokenLogits> far_draft;  // aidreams260K
  std::unique_ptr<NextTokenLogits> layer_skip; // stories260K's first 2 of 5 layers
};

/// Stops the test binary with `what` unless `ok` (the models every test needs failed to load).
void require(bool ok, const std::string& what) {
  if (!ok) {
    ADD_FAILURE() << what;
    std::abort();
  }
}

template <class T>
T value_or_abort(Expected<T> e, const char* what) {
  require(e.has_value(), std::string(what) + ": " + (e ? "" : e.status().message()));
  return std::move(*e);
}

Models load_models() {
  Models m;
  m.stories = test::load_stories260k();
  require(m.stories != nullptr, "stories260K");
  m.aidreams = std::make_unique<LlamaModel>(value_or_abort(
      LlamaModel::create(value_or_abort(
          load_model_file(test::shared_dir() + "/models/aidreams260K/aidreams260K.bin"), "aidreams260K")),
      "aidreams260K"));
  const auto tok = value_or_abort(load_tokenizer(m.stories->file()), "stories260K tokenizer");
  // The opening of a real TinyStories story, cut where stories260K's next token is uncertain
  // (entropy 3.2 nats at temperature 1); the continuation is the story's next tokens.
  const std::string text = test::read_file(test::shared_dir() + "/data/tinystories/tinystories_valid_excerpt.txt");
  const std::string cut = "if she could have a";
  require(text.find(cut) != std::string::npos, "the TinyStories excerpt lacks '" + cut + "'");
  const std::size_t end = text.find(cut) + cut.size();
  m.prompt = tok->encode(text.substr(0, end), true);
  const Tokens longer = tok->encode(text.substr(0, end + 40), true);
  require(std::equal(m.prompt.begin(), m.prompt.end(), longer.begin()), "the prompt's tokens change with the continuation");
  m.continuation.assign(longer.begin() + static_cast<std::ptrdiff_t>(m.prompt.size()), longer.end());
  m.target = std::make_unique<NextTokenLogits>(*m.stories);
  m.far_draft = std::make_unique<NextTokenLogits>(*m.aidreams);
  m.layer_skip = std::make_unique<NextTokenLogits>(*m.stories, 2);
  return m;
}

Models& models() {
  static Models m = load_models();
  return m;
}

SamplingParams temperature_one(std::uint64_t seed) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  p.seed = seed;
  return p;
}

SamplingParams filtered(std::uint64_t seed) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 20;
  p.top_p = 0.9f;
  p.min_p = 0.02f;
  p.repeat_penalty = 1.3f;
  p.seed = seed;
  return p;
}

SamplingParams greedy(float repeat_penalty) {
  SamplingParams p = temperature_one(0);
  p.temperature = 0.0f;
  p.repeat_penalty = repeat_penalty;
  return p;
}

/// `context` followed by the tokens on the path root → `node` (node -1: the root).
Tokens path_tokens(const DraftTree& t, std::int32_t node, const Tokens& context) {
  Tokens rev;
  for (std::int32_t i = node; i >= 0; i = t.nodes[static_cast<std::size_t>(i)].parent) {
    rev.push_back(t.nodes[static_cast<std::size_t>(i)].token);
  }
  Tokens out = context;
  out.insert(out.end(), rev.rbegin(), rev.rend());
  return out;
}

/// verify_draft's `logits` for `t`: the target's rows after the root and after every node.
std::vector<float> target_rows(const DraftTree& t, const Tokens& context, NextTokenLogits& target) {
  std::vector<float> rows;
  for (std::int32_t node = -1; node < t.size(); ++node) {
    const auto& row = target.after(path_tokens(t, node, context));
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return rows;
}

/// Appends a child of `parent` drawn by `drafter` from the draft's q (recorded in the node).
void add_sampled(DraftTree& t, std::int32_t parent, const Tokens& context, NextTokenLogits& draft,
                 Sampler& drafter) {
  const Tokens ctx = path_tokens(t, parent, context);
  const auto& row = draft.after(ctx);
  DraftNode n{0, parent, 0.0f, drafter.next_token_distribution(row, ctx)};
  std::vector<float> logits = row;
  n.token = drafter.sample(logits, ctx);
  t.nodes.push_back(std::move(n));
}

/// Appends a deterministic child of `parent` (empty q).
void add_fixed(DraftTree& t, std::int32_t parent, std::int32_t token) {
  t.nodes.push_back(DraftNode{token, parent, 0.0f, {}});
}

/// The draft's `k` most likely next tokens after `tokens` (raw logits), most likely first.
Tokens top_tokens(NextTokenLogits& draft, const Tokens& tokens, int k) {
  SamplingParams p = temperature_one(0);
  p.top_k = k;
  Tokens out;
  for (const auto& [id, prob] : Sampler(p).distribution(draft.after(tokens))) out.push_back(id);
  return out;
}

/// Appends a deterministic greedy chain of `depth` nodes of `draft` below `parent`.
void add_greedy_chain(DraftTree& t, std::int32_t parent, int depth, const Tokens& context, NextTokenLogits& draft) {
  for (int d = 0; d < depth; ++d) {
    add_fixed(t, parent, top_tokens(draft, path_tokens(t, parent, context), 1)[0]);
    parent = static_cast<std::int32_t>(t.size() - 1);
  }
}

// ------------------------------------------------------------------ the statistical cases

/// Several deterministic children at the root: the layer-skip draft's top 3 tokens, each with
/// its greedy next token below it, and aidreams260K's top token.
DraftTree deterministic_tree(const Tokens& context) {
  DraftTree t;
  for (std::int32_t token : top_tokens(*models().layer_skip, context, 3)) {
    add_fixed(t, -1, token);
    add_greedy_chain(t, static_cast<std::int32_t>(t.size() - 1), 1, context, *models().layer_skip);
  }
  add_fixed(t, -1, top_tokens(*models().far_draft, context, 1)[0]);
  return t;
}

/// One speculative step's draft for `context`; sampled nodes are drawn by `drafter`.
using DraftFn = std::function<DraftTree(const Tokens& context, Sampler& drafter)>;

struct Case {
  const char* name;
  DraftFn draft;
  bool fixed = false;  // deterministic nodes only: the same tree every step (drafted once)
};

const Case kCases[] = {
    {"empty tree (bonus token only)", [](const Tokens&, Sampler&) { return DraftTree{}; }, true},
    {"sampled chain, aidreams260K q",
     [](const Tokens& ctx, Sampler& drafter) {
       DraftTree t;
       for (std::int32_t d = 0; d < 3; ++d) add_sampled(t, d - 1, ctx, *models().far_draft, drafter);
       return t;
     }},
    {"sampled chain, layer-skip q",
     [](const Tokens& ctx, Sampler& drafter) {
       DraftTree t;
       for (std::int32_t d = 0; d < 3; ++d) add_sampled(t, d - 1, ctx, *models().layer_skip, drafter);
       return t;
     }},
    {"deterministic chain (the story's next 3 tokens, as prompt lookup would propose)",
     [](const Tokens&, Sampler&) {
       DraftTree t;
       for (std::int32_t d = 0; d < 3; ++d) add_fixed(t, d - 1, models().continuation[static_cast<std::size_t>(d)]);
       return t;
     },
     true},
    {"deterministic tree (root: layer-skip top 3, each with its greedy child, and aidreams260K's top 1)",
     [](const Tokens& ctx, Sampler&) { return deterministic_tree(ctx); }, true},
    {"sampled tree (3 i.i.d. layer-skip children at the root, each with a sampled child)",
     [](const Tokens& ctx, Sampler& drafter) {
       DraftTree t;
       for (int c = 0; c < 3; ++c) add_sampled(t, -1, ctx, *models().layer_skip, drafter);
       for (std::int32_t c = 0; c < 3; ++c) add_sampled(t, c, ctx, *models().layer_skip, drafter);
       return t;
     }},
};

/// Outcome keys for goodness_of_fit: the first token, and the first two tokens.
std::int64_t pair_key(std::int32_t x1, std::int32_t x2) { return std::int64_t{x1} * kVocab + x2; }

/// The target's own distribution of the first token and of the first two tokens after the
/// prompt under `params`; pairs only for first tokens expected at least 5 times in n draws
/// (the others fall into goodness_of_fit's pooled bin anyway).
struct TargetLaw {
  std::map<std::int64_t, double> first, pair;
};

TargetLaw target_law(const SamplingParams& params, int n) {
  Models& m = models();
  const Sampler s(params);
  TargetLaw law;
  for (const auto& [x1, p1] : s.next_token_distribution(m.target->after(m.prompt), m.prompt)) {
    law.first[x1] = p1;
    if (n * static_cast<double>(p1) < 5.0) continue;
    Tokens ctx = m.prompt;
    ctx.push_back(x1);
    for (const auto& [x2, p2] : s.next_token_distribution(m.target->after(ctx), ctx)) {
      law.pair[pair_key(x1, x2)] = static_cast<double>(p1) * p2;
    }
  }
  return law;
}

struct Draws {
  std::map<std::int64_t, std::int64_t> first, pair;
  std::int64_t accepted_tokens = 0;       // Σ path lengths
  std::int64_t steps_with_rejection = 0;  // steps that stopped before a leaf
};

/// One step of speculative decoding after the prompt: verify_draft of `tree` (target rows
/// `rows`), and when it emitted a single token, plain sampling of the second from the target
/// (as decoding would go on). Returns the first two tokens.
std::pair<std::int32_t, std::int32_t> speculative_step(const DraftTree& tree, const std::vector<float>& rows,
                                                       Sampler& verifier, Draws& draws) {
  Models& m = models();
  const auto v = verify_draft(tree, rows, kVocab, m.prompt, verifier);
  if (!v) {
    ADD_FAILURE() << v.status().message();
    return {-1, -1};
  }
  Tokens emitted;
  for (std::int32_t node : v->path) emitted.push_back(tree.nodes[static_cast<std::size_t>(node)].token);
  emitted.push_back(v->next_token);
  draws.accepted_tokens += static_cast<std::int64_t>(v->path.size());
  const std::int32_t stop = v->path.empty() ? -1 : v->path.back();
  for (const DraftNode& n : tree.nodes) {
    if (n.parent == stop) {
      ++draws.steps_with_rejection;
      break;
    }
  }
  if (emitted.size() == 1) {
    Tokens ctx = m.prompt;
    ctx.push_back(emitted[0]);
    std::vector<float> logits = m.target->after(ctx);
    emitted.push_back(verifier.sample(logits, ctx));
  }
  return {emitted[0], emitted[1]};
}

void record(Draws& d, std::int32_t x1, std::int32_t x2) {
  ++d.first[x1];
  ++d.pair[pair_key(x1, x2)];
}

void print_fit(const std::string& name, const char* what, const test::GoodnessOfFit& g) {
  std::printf("[ chi-square ] %-100s %-16s chi2 %9.2f dof %3lld p %.4g  TV %.4f (bound %.4f)\n", name.c_str(),
              what, g.statistic, static_cast<long long>(g.bins - 1), g.p_value, g.tv, g.tv_bound);
}

/// Prints and returns the fit of `draws` to the target's law: first token, first two tokens.
std::pair<test::GoodnessOfFit, test::GoodnessOfFit> fit(const std::string& name, const Draws& draws,
                                                        const TargetLaw& law) {
  const auto first = test::goodness_of_fit(draws.first, law.first);
  const auto pair = test::goodness_of_fit(draws.pair, law.pair);
  print_fit(name, "first token", first);
  print_fit(name, "first two tokens", pair);
  return {first, pair};
}

struct Setting {
  const char* name;
  SamplingParams (*params)(std::uint64_t seed);
};

const Setting kSettings[] = {
    {"T=1", temperature_one},
    {"T=0.7 top-k 20 top-p 0.9 min-p 0.02 penalty 1.3", filtered},
};

class Lossless : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(Lossless, FirstTwoTokensFollowTheTarget) {
  const Case& c = kCases[std::get<0>(GetParam())];
  const Setting& s = kSettings[std::get<1>(GetParam())];
  const std::uint64_t seed = 1000 + static_cast<std::uint64_t>(std::get<0>(GetParam()) * 10 + std::get<1>(GetParam()));
  SamplingParams draft_params = s.params(seed);
  draft_params.top_k = kDraftTopK;
  Sampler drafter(draft_params), verifier(s.params(seed + 500));
  Models& m = models();
  DraftTree tree;
  std::vector<float> rows;
  Draws draws;
  for (int i = 0; i < kDraws; ++i) {
    if (i == 0 || !c.fixed) {
      tree = c.draft(m.prompt, drafter);
      rows = target_rows(tree, m.prompt, *m.target);
    }
    const auto [x1, x2] = speculative_step(tree, rows, verifier, draws);
    record(draws, x1, x2);
  }
  const std::string name = std::string(c.name) + ", " + s.name;
  const auto [first, pair] = fit(name, draws, target_law(s.params(0), kDraws));
  std::printf("[ acceptance ] %.3f draft tokens accepted per step; %lld of %d steps rejected a candidate\n",
              static_cast<double>(draws.accepted_tokens) / kDraws, static_cast<long long>(draws.steps_with_rejection), kDraws);
  EXPECT_GT(first.p_value, 1e-3) << name;
  EXPECT_GT(pair.p_value, 1e-3) << name;
  EXPECT_LE(first.tv, first.tv_bound) << name;
  EXPECT_LE(pair.tv, pair.tv_bound) << name;
  EXPECT_GE(first.bins, 5);  // the tests compare real, spread-out distributions
}

INSTANTIATE_TEST_SUITE_P(VerifyDraft, Lossless,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(std::size(kCases))),
                                            ::testing::Range(0, static_cast<int>(std::size(kSettings)))));

// The negative control: draws from the layer-skip draft's own distribution q (a sampler that
// skipped verification) fail the same test, so the test can tell q from p.
TEST(VerifyDraftControl, DraftDistributionIsRejected) {
  Models& m = models();
  for (const Setting& s : kSettings) {
    Sampler drafter(s.params(7));
    Draws draws;
    for (int i = 0; i < kDraws; ++i) {
      Tokens ctx = m.prompt;
      std::vector<float> logits = m.layer_skip->after(ctx);
      const std::int32_t x1 = drafter.sample(logits, ctx);
      ctx.push_back(x1);
      logits = m.layer_skip->after(ctx);
      record(draws, x1, drafter.sample(logits, ctx));
    }
    const auto [first, pair] = fit(std::string("control: layer-skip q unverified, ") + s.name, draws,
                                   target_law(s.params(0), kDraws));
    EXPECT_LT(first.p_value, 1e-6);
    EXPECT_LT(pair.p_value, 1e-6);
    EXPECT_GT(first.tv, first.tv_bound);
    EXPECT_GT(pair.tv, pair.tv_bound);
  }
}

// A second control, a plausible bug: a verifier that tries the deterministic root children of
// the tree case like verify_draft (child x accepted with probability p(x)) but, when all are
// rejected, draws the correction from p instead of the residual. It over-emits the children's
// tokens, and the first-token test rejects it.
TEST(VerifyDraftControl, CorrectionFromPInsteadOfTheResidualIsRejected) {
  Models& m = models();
  Sampler wrong(temperature_one(9));
  const DraftTree tree = deterministic_tree(m.prompt);
  const std::vector<float>& row = m.target->after(m.prompt);
  std::map<std::int32_t, double> p;
  for (const auto& [id, prob] : wrong.next_token_distribution(row, m.prompt)) p[id] = prob;
  std::map<std::int64_t, std::int64_t> draws;
  for (int i = 0; i < kDraws; ++i) {
    std::int32_t x1 = -1;
    for (const DraftNode& n : tree.nodes) {
      if (n.parent == -1 && x1 < 0 && wrong.uniform() < p[n.token]) x1 = n.token;
    }
    if (x1 < 0) {
      std::vector<float> logits = row;
      x1 = wrong.sample(logits, m.prompt);
    }
    ++draws[x1];
  }
  const auto first = test::goodness_of_fit(draws, target_law(temperature_one(0), kDraws).first);
  print_fit("control: correction drawn from p, deterministic tree, T=1", "first token", first);
  EXPECT_LT(first.p_value, 1e-6);
  EXPECT_GT(first.tv, first.tv_bound);
}

// ------------------------------------------------------------------ greedy

/// Plain greedy decoding of `n` tokens after `context` (Sampler::sample at temperature 0).
Tokens plain_decode(const SamplingParams& params, Tokens context, int n) {
  Sampler s(params);
  Tokens out;
  for (int i = 0; i < n; ++i) {
    std::vector<float> logits = models().target->after(context);
    out.push_back(s.sample(logits, context));
    context.push_back(out.back());
  }
  return out;
}

/// A verify_draft call consumed no RNG draw: the sampler's next uniform is a fresh one's first.
void expect_rng_untouched(Sampler& s) {
  EXPECT_EQ(s.uniform(), Sampler(s.params()).uniform());
}

TEST(VerifyDraftGreedy, AcceptsTheLongestArgmaxPrefixAlongTheTree) {
  Models& m = models();
  for (float penalty : {1.0f, 1.5f}) {  // the penalty makes the path's history matter
    const SamplingParams params = greedy(penalty);
    const Tokens g = plain_decode(params, m.prompt, 5);
    const std::int32_t wrong = (g[0] + 1) % kVocab;
    DraftTree t;
    add_fixed(t, -1, wrong);              // 0: rejected
    add_fixed(t, -1, g[0]);               // 1: accepted
    add_fixed(t, 1, (g[1] + 7) % kVocab); // 2: rejected
    t.nodes.push_back(DraftNode{g[1], 1, 0.0f, {{g[1], 0.25f}, {wrong, 0.75f}}});  // 3: sampled, accepted
    add_fixed(t, 3, g[2]);                // 4: accepted
    add_fixed(t, 4, (g[3] + 3) % kVocab); // 5: rejected
    add_fixed(t, 0, g[1]);                // 6: below a rejected node: never reached
    Sampler s(params);
    const auto v = verify_draft(t, target_rows(t, m.prompt, *m.target), kVocab, m.prompt, s);
    ASSERT_TRUE(v) << v.status().message();
    EXPECT_EQ(v->path, (Tokens{1, 3, 4})) << "penalty " << penalty;
    EXPECT_EQ(v->next_token, g[3]);
    expect_rng_untouched(s);

    // A full chain of the greedy tokens is accepted whole and earns the bonus token.
    DraftTree chain;
    for (std::int32_t i = 0; i < 4; ++i) add_fixed(chain, i - 1, g[static_cast<std::size_t>(i)]);
    const auto full = verify_draft(chain, target_rows(chain, m.prompt, *m.target), kVocab, m.prompt, s);
    ASSERT_TRUE(full);
    EXPECT_EQ(full->path, (Tokens{0, 1, 2, 3}));
    EXPECT_EQ(full->next_token, g[4]);
  }
}

TEST(VerifyDraftGreedy, SpeculativeDecodingEqualsPlainGreedy) {
  // 60 tokens decoded in speculative steps (a tree of the layer-skip draft's top 2 tokens,
  // each followed by its greedy chain of 3) against 60 tokens of plain greedy decoding.
  Models& m = models();
  for (float penalty : {1.0f, 1.3f}) {
    const SamplingParams params = greedy(penalty);
    const Tokens expected = plain_decode(params, m.prompt, 60);
    Sampler s(params);
    Tokens context = m.prompt;
    std::int64_t accepted = 0;
    while (context.size() < m.prompt.size() + expected.size()) {
      DraftTree t;
      for (std::int32_t token : top_tokens(*m.layer_skip, context, 3)) {
        add_fixed(t, -1, token);
        add_greedy_chain(t, static_cast<std::int32_t>(t.size() - 1), 3, context, *m.layer_skip);
      }
      const auto v = verify_draft(t, target_rows(t, context, *m.target), kVocab, context, s);
      ASSERT_TRUE(v) << v.status().message();
      for (std::int32_t node : v->path) context.push_back(t.nodes[static_cast<std::size_t>(node)].token);
      context.push_back(v->next_token);
      accepted += static_cast<std::int64_t>(v->path.size());
    }
    const Tokens got(context.begin() + static_cast<std::ptrdiff_t>(m.prompt.size()),
                     context.begin() + static_cast<std::ptrdiff_t>(m.prompt.size() + expected.size()));
    EXPECT_EQ(got, expected) << "penalty " << penalty;
    std::printf("[ greedy ] penalty %.1f: %lld of %zu tokens were accepted draft tokens\n", penalty,
                static_cast<long long>(accepted), expected.size());
    EXPECT_GT(accepted, 10) << "the draft should be right sometimes (keeps the test meaningful)";
    expect_rng_untouched(s);
  }
}

// ------------------------------------------------------------------ edge cases and errors

TEST(VerifyDraftEdge, ChildOutsideTheSupportIsRejectedWithoutADraw) {
  Models& m = models();
  SamplingParams params = temperature_one(11);
  params.top_k = 2;  // p's support: the target's top two tokens
  const auto& row = m.target->after(m.prompt);
  const Tokens top3 = top_tokens(*m.target, m.prompt, 3);
  DraftTree t;
  add_fixed(t, -1, top3[2]);  // outside the support: r(x) = 0
  std::vector<float> logits = row;
  logits.insert(logits.end(), row.begin(), row.end());  // the node's row (never used)
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    params.seed = seed;
    Sampler s(params), reference(params);
    const auto v = verify_draft(t, logits, kVocab, m.prompt, s);
    ASSERT_TRUE(v);
    EXPECT_TRUE(v->path.empty());
    EXPECT_TRUE(v->next_token == top3[0] || v->next_token == top3[1]) << v->next_token;
    (void)reference.uniform();  // the one draw: next_token from the residual (two tokens)
    EXPECT_EQ(s.uniform(), reference.uniform()) << "seed " << seed;
  }
}

TEST(VerifyDraftEdge, SampledChildWithZeroDraftProbabilityIsVerifiedAsDeterministic) {
  // p = (1/2, 1/2). Node token 0 claims q = one-hot on 1, so it cannot have been drawn from q:
  // verified as deterministic, a rejection leaves r = one-hot on 1 (a q-residual update would
  // leave r = one-hot on 0 instead).
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f};  // rows: root, node 0
  DraftTree t;
  t.nodes.push_back(DraftNode{0, -1, 0.0f, {{1, 1.0f}}});
  int accepted = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    Sampler s(temperature_one(seed));
    const auto v = verify_draft(t, logits, 2, {}, s);
    ASSERT_TRUE(v);
    if (v->path.empty()) {
      EXPECT_EQ(v->next_token, 1);
    } else {
      ++accepted;
    }
  }
  EXPECT_GT(accepted, 60);  // about 100 of 200
  EXPECT_LT(accepted, 140);
}

TEST(VerifyDraftEdge, RowWithoutMassGivesTheTokenSampleGives) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> nan_row(8, kNaN);
  std::vector<float> copy = nan_row;
  Sampler plain(temperature_one(3));
  const std::int32_t sampled = plain.sample(copy, {});
  DraftTree t;
  add_fixed(t, -1, 5);
  std::vector<float> logits = nan_row;
  logits.insert(logits.end(), nan_row.begin(), nan_row.end());
  Sampler s(temperature_one(3));
  const auto v = verify_draft(t, logits, 8, {}, s);
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->path.empty());
  EXPECT_EQ(v->next_token, sampled);
}

TEST(VerifyDraftEdge, RejectsMalformedInput) {
  const std::vector<float> two_rows(8, 0.0f);  // vocab 4, one node
  auto check = [&](const DraftTree& t, std::span<const float> logits, std::int64_t vocab, const char* what) {
    Sampler s(temperature_one(0));
    const auto v = verify_draft(t, logits, vocab, {}, s);
    ASSERT_FALSE(v) << what;
    EXPECT_EQ(v.status().code(), ErrorCode::kInvalidArgument) << what;
    EXPECT_NE(v.status().message().find("verify_draft"), std::string::npos) << v.status().message();
  };
  DraftTree one;
  add_fixed(one, -1, 2);
  check(one, two_rows, 0, "vocab 0");
  check(one, std::span<const float>(two_rows).first(7), 4, "short logits");
  check(DraftTree{}, two_rows, 4, "logits for a node that does not exist");
  DraftTree bad = one;
  bad.nodes[0].parent = 0;
  check(bad, two_rows, 4, "parent is itself");
  bad.nodes[0].parent = -2;
  check(bad, two_rows, 4, "parent -2");
  for (std::int32_t token : {-1, 4}) {
    bad = one;
    bad.nodes[0].token = token;
    check(bad, two_rows, 4, "token outside the vocabulary");
  }
  for (const auto& entry : {std::pair<std::int32_t, float>{4, 1.0f}, {2, -0.5f}, {2, std::numeric_limits<float>::quiet_NaN()}}) {
    bad = one;
    bad.nodes[0].q = {entry};
    check(bad, two_rows, 4, "bad q entry");
  }
}

}  // namespace
}  // namespace peregrine
