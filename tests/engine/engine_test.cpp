// The serving engine on the real stories260K model: continuous batching, chunked prefill,
// preemption and prefix caching must not change what a request generates.
#include "peregrine/engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "peregrine/dist/kv_transfer.h"
#include "peregrine/engine/generator.h"
#include "peregrine/model/final_hidden.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

struct Outcome {
  std::vector<std::int32_t> tokens;
  RequestResult result;
  bool finished = false;
};

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::load_stories260k();
    ASSERT_NE(model_, nullptr);
    auto tok = load_tokenizer(model_->file());
    ASSERT_TRUE(tok) << tok.status().message();
    tokenizer_ = std::move(*tok);
  }

  /// Distinct real prompts: sentences of the TinyStories validation excerpt.
  std::vector<std::vector<std::int32_t>> prompts(std::size_t n) const {
    std::istringstream text(test::read_file(test::shared_dir() + "/data/tinystories/tinystories_valid_excerpt.txt"));
    std::vector<std::vector<std::int32_t>> out;
    for (std::string sentence; out.size() < n && std::getline(text, sentence, '.');) {
      if (sentence.size() < 20) continue;
      out.push_back(tokenizer_->encode(sentence.substr(sentence.find_first_not_of(" \n")), true));
    }
    return out;
  }

  RequestOptions greedy(std::vector<std::int32_t> prompt, std::int32_t max_tokens) const {
    RequestOptions r;
    r.prompt = std::move(prompt);
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0.0f;
    r.eos_id = tokenizer_->eos_id();
    return r;
  }

  std::unique_ptr<Engine> make_engine(EngineOptions o) {
    auto e = Engine::create(*model_, o, pool_);
    EXPECT_TRUE(e) << e.status().message();
    return e ? std::move(*e) : nullptr;
  }

  static EngineOptions options(std::int32_t n_blocks) {
    EngineOptions o;
    o.kv.n_blocks = n_blocks;
    o.max_running = 64;
    o.max_waiting = 64;
    return o;
  }

  /// Submits every request, then steps until all have finished.
  std::vector<Outcome> run_all(Engine& engine, const std::vector<RequestOptions>& requests) {
    std::vector<Outcome> out(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) {
      Outcome* o = &out[i];
      auto id = engine.submit(requests[i], {[o](const TokenEvent& e) { o->tokens.push_back(e.token); return true; },
                                            [o](const RequestResult& r) { o->result = r; o->finished = true; }});
      EXPECT_TRUE(id) << id.status().message();
    }
    // Until every request ended (an engine whose K/V come from a RemotePrefill has steps with
    // nothing to compute), giving up after 1000 idle steps.
    const auto unfinished = [&] { return std::any_of(out.begin(), out.end(), [](const Outcome& o) { return !o.finished; }); };
    for (int idle = 0; idle < 1000 && unfinished();) idle += engine.step() ? 0 : 1;
    for (const Outcome& o : out) EXPECT_TRUE(o.finished);
    return out;
  }

  /// The request run alone through generate() (one prefill, one decode per token).
  std::vector<std::int32_t> alone(const RequestOptions& r) {
    GenerateOptions g;
    g.max_new_tokens = r.max_tokens;
    g.eos_id = r.eos_id;
    g.sampling = r.sampling;
    std::vector<std::int32_t> out;
    auto st = generate(*model_, r.prompt, g, pool_, [&](std::int32_t id) { out.push_back(id); });
    EXPECT_TRUE(st) << st.status().message();
    return out;
  }

  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ThreadPool pool_{2};
};

TEST_F(EngineTest, ThirtyTwoBatchedGreedyRequestsEqualEachRunAlone) {
  EngineOptions o = options(512);
  o.max_batch_tokens = 48;  // forces chunked prefill next to running decodes
  auto engine = make_engine(o);
  std::vector<RequestOptions> requests;
  for (auto& p : prompts(32)) requests.push_back(greedy(p, 40));
  ASSERT_EQ(requests.size(), 32u);
  const std::vector<Outcome> out = run_all(*engine, requests);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(out[i].tokens, alone(requests[i])) << "request " << i;
    EXPECT_EQ(out[i].result.prompt_tokens, static_cast<std::int64_t>(requests[i].prompt.size()));
    EXPECT_EQ(out[i].result.completion_tokens, static_cast<std::int64_t>(out[i].tokens.size()));
  }
  const EngineMetrics m = engine->metrics();
  EXPECT_EQ(m.running, 0);
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_EQ(m.requests_by_status.at("length") + (m.requests_by_status.contains("stop") ? m.requests_by_status.at("stop") : 0), 32);
  EXPECT_EQ(m.ttft.count, 32);
}

TEST_F(EngineTest, MetricsDescribeTheEmptyPoolBeforeTheFirstStep) {
  // A /metrics scrape right after startup (before the loop thread ran a step) saw 0 free blocks.
  auto engine = make_engine(options(24));
  EXPECT_EQ(engine->metrics().kv_blocks_free, 24);
  EXPECT_EQ(engine->metrics().kv_blocks_total, 24);
  EXPECT_EQ(engine->metrics().steps_total, 0);
}

TEST_F(EngineTest, PreemptionByRecomputationLosesNothing) {
  // 8 requests of up to ~30 + 60 tokens in 24 blocks of 16: they cannot all hold their KV.
  EngineOptions o = options(24);
  o.prefix_caching = false;
  auto engine = make_engine(o);
  std::vector<RequestOptions> requests;
  for (auto& p : prompts(8)) requests.push_back(greedy(p, 60));
  const std::vector<Outcome> out = run_all(*engine, requests);
  std::int32_t preempted = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(out[i].tokens, alone(requests[i])) << "request " << i;
    preempted += out[i].result.preemptions;
  }
  EXPECT_GT(preempted, 0);
  EXPECT_EQ(engine->metrics().preemptions_total, preempted);
  EXPECT_EQ(engine->metrics().kv_blocks_free, 24);
}

// Parallel sampling (OpenAI's n > 1, Engine::submit_choices): choices 1..3 wait while choice 0's
// prompt is prefilled in 8-token chunks, fork its K/V and compute only their last prompt token;
// each samples, with its seed (+ its index), exactly what it samples alone. A request naming no
// live request in prefill_from computes its own prompt.
TEST_F(EngineTest, ParallelSamplesShareThePromptAndEachSamplesAsAlone) {
  EngineOptions o = options(64);
  o.max_batch_tokens = 8;     // the shared prompt takes several steps: the siblings wait
  o.prefix_caching = false;   // what is shared is the fork's alone
  auto engine = make_engine(o);
  std::vector<std::int32_t> prompt;
  for (const auto& p : prompts(3)) prompt.insert(prompt.end(), p.begin(), p.end());
  const auto n_prompt = static_cast<std::int64_t>(prompt.size());
  ASSERT_GT(n_prompt, 32);  // full blocks to share, and a partial one to copy
  std::vector<RequestOptions> requests;
  for (std::uint64_t i = 0; i < 5; ++i) {
    RequestOptions r = greedy(prompt, 24);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 100 + i;
    requests.push_back(r);
  }
  std::vector<Outcome> out(requests.size());
  const auto callbacks = [&](std::size_t i) {
    Outcome* oc = &out[i];
    return RequestCallbacks{[oc](const TokenEvent& e) { oc->tokens.push_back(e.token); return true; },
                            [oc](const RequestResult& r) { oc->result = r; oc->finished = true; }};
  };
  std::vector<RequestCallbacks> four;
  for (std::size_t i = 0; i < 4; ++i) four.push_back(callbacks(i));
  auto ids = engine->submit_choices(requests[0], std::move(four));
  ASSERT_TRUE(ids) << ids.status().message();
  ASSERT_EQ(ids->size(), 4u);
  requests[4].prefill_from = 12345;  // no such request
  ASSERT_TRUE(engine->submit(requests[4], callbacks(4)));
  while (engine->step()) {}
  std::set<std::vector<std::int32_t>> distinct;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(out[i].finished);
    EXPECT_EQ(out[i].tokens, alone(requests[i])) << "choice " << i;
    EXPECT_EQ(out[i].result.cached_prompt_tokens, i == 0 || i == 4 ? 0 : n_prompt - 1) << "choice " << i;
    EXPECT_EQ(out[i].result.prompt_tokens, n_prompt);
    distinct.insert(out[i].tokens);
  }
  EXPECT_GE(distinct.size(), 3u) << "each choice samples with its own seed";
  const EngineMetrics m = engine->metrics();
  EXPECT_EQ(m.prompt_tokens_total, 2 * n_prompt + 3);  // choice 0's and the last one's, + 3 last tokens
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_EQ(m.kv_blocks_free, 64);
}

// Embedding requests (RequestOptions::pooling): what the engine pools from prompts prefilled in
// 8-token chunks beside a decoding request equals the pooling of one whole-prompt forward's final
// hidden states (after the final norm), for each pooling; nothing is generated, the decoding
// request is unchanged.
TEST_F(EngineTest, EmbeddingsPoolTheFinalHiddenStatesOfTheWholePrompt) {
  const auto ps = prompts(3);
  const std::int64_t dim = model_->config().dim;
  for (const Pooling pooling : {Pooling::kMean, Pooling::kLast, Pooling::kCls}) {
    EngineOptions o = options(64);
    o.max_batch_tokens = 8;
    auto engine = make_engine(o);
    std::vector<RequestOptions> requests;
    for (const auto& p : ps) {
      RequestOptions r = greedy(p, 4);
      r.pooling = pooling;
      requests.push_back(r);
    }
    requests.push_back(greedy(ps[0], 12));
    const std::vector<Outcome> out = run_all(*engine, requests);
    for (std::size_t i = 0; i < ps.size(); ++i) {
      KvCache cache = test::make_kv_cache(model_->config(), static_cast<std::int64_t>(ps[i].size()));
      Batch batch;
      for (std::size_t t = 0; t < ps[i].size(); ++t) batch.add(ps[i][t], static_cast<std::int32_t>(t), 0, t + 1 == ps[i].size());
      FinalHiddenCapture capture(model_->config().n_layers);
      std::vector<float> logits;
      ASSERT_TRUE(model_->forward(batch, cache, logits, pool_, 0, &capture));
      std::vector<float> h = capture.values(), acc;
      model_->output_norm(h, h);
      pool_rows(pooling, 0, h, dim, acc);
      const std::vector<float> want = pooled_embedding(pooling, acc, static_cast<std::int64_t>(ps[i].size()));
      const std::vector<float>& got = out[i].result.embedding;
      ASSERT_EQ(got.size(), static_cast<std::size_t>(dim));
      double norm = 0.0;
      for (std::size_t k = 0; k < got.size(); ++k) {
        EXPECT_NEAR(got[k], want[k], 1e-5) << "pooling " << static_cast<int>(pooling) << ", prompt " << i << ", [" << k << "]";
        norm += static_cast<double>(got[k]) * got[k];
      }
      EXPECT_NEAR(norm, 1.0, 1e-5);
      EXPECT_TRUE(out[i].tokens.empty());
      EXPECT_EQ(out[i].result.completion_tokens, 0);
      EXPECT_EQ(out[i].result.reason, FinishReason::kStop);
    }
    if (pooling == Pooling::kCls) {  // a decoder's first position sees only BOS: the same for every prompt
      EXPECT_EQ(out[0].result.embedding, out[1].result.embedding);
    } else {
      EXPECT_NE(out[0].result.embedding, out[1].result.embedding);
    }
    EXPECT_EQ(out.back().tokens, alone(requests.back()));
  }
}

// engine/forward_mirror.h in one process: a mirror that runs every forward it is handed on a
// second copy of the model with its own KV cache (what a worker rank does), freeing what it is
// told, under preemption. Its greedy picks per sequence are the engine's tokens, so its cache
// held the same K/V at every step.
class LocalMirror final : public ForwardMirror {
 public:
  LocalMirror(std::unique_ptr<LlamaModel> model, const KvCacheOptions& kv)
      : model_(std::move(model)), cache_(test::make_kv_cache(model_->config(), std::int64_t{kv.n_blocks} * kv.block_size, 1, kv.block_size, kv.dtype)) {}
  void forward(const Batch& batch, const KvCache::FollowerUpdate& kv, std::span<const std::int32_t>) override {
    cache_.follow(kv);
    std::vector<float> logits;
    ok_ = ok_ && model_->forward(batch, cache_, logits, pool_).is_ok();
    const auto vocab = static_cast<std::size_t>(model_->config().vocab_size);
    std::size_t row = 0;
    for (std::int64_t i = 0; i < batch.size() && ok_; ++i) {
      if (!batch.need_logits[static_cast<std::size_t>(i)]) continue;
      const auto first = logits.begin() + static_cast<std::ptrdiff_t>(row++ * vocab);
      streams_[batch.seq_ids[static_cast<std::size_t>(i)]].push_back(
          static_cast<std::int32_t>(std::max_element(first, first + static_cast<std::ptrdiff_t>(vocab)) - first));
    }
  }
  void stop() override { ++stops_; }
  bool ok() const { return ok_; }
  int stops() const { return stops_; }
  std::vector<std::vector<std::int32_t>> sorted_streams() const {
    std::vector<std::vector<std::int32_t>> out;
    for (const auto& [seq, tokens] : streams_) out.push_back(tokens);
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::unique_ptr<LlamaModel> model_;
  KvCache cache_;
  ThreadPool pool_{2};
  std::map<std::int32_t, std::vector<std::int32_t>> streams_;
  bool ok_ = true;
  int stops_ = 0;
};

TEST_F(EngineTest, AMirrorRunsEveryForwardOnItsOwnCache) {
  EngineOptions o = options(24);  // preemption, as above, with the prefix cache on
  LocalMirror mirror(test::load_stories260k(), o.kv);
  o.mirror = &mirror;
  auto engine = make_engine(o);
  // Every prompt after a shared 2-block opening: prefix-cache hits, then copies on write.
  std::vector<std::int32_t> opening = prompts(6)[5];
  for (const auto& p : prompts(4)) opening.insert(opening.end(), p.begin() + 1, p.end());
  opening.resize(33);
  std::vector<RequestOptions> requests;
  for (auto& p : prompts(8)) {
    std::vector<std::int32_t> prompt = opening;
    prompt.insert(prompt.end(), p.begin() + 1, p.end());
    requests.push_back(greedy(prompt, 60));
    requests.back().eos_id = -1;  // every token sampled is emitted
  }
  const std::vector<Outcome> out = run_all(*engine, requests);
  std::vector<std::vector<std::int32_t>> emitted;
  std::int64_t preempted = 0, cached = 0;
  for (const Outcome& r : out) {
    emitted.push_back(r.tokens);
    preempted += r.result.preemptions;
    cached += r.result.cached_prompt_tokens;
  }
  std::sort(emitted.begin(), emitted.end());
  EXPECT_GT(preempted, 0);
  EXPECT_GE(cached, 32);
  EXPECT_TRUE(mirror.ok());
  EXPECT_EQ(mirror.sorted_streams(), emitted);
  engine->shutdown(true);
  EXPECT_EQ(mirror.stops(), 1);
  // What a mirror cannot follow is refused: speculative requests.
  RequestOptions spec = greedy(prompts(1)[0], 8);
  spec.spec.method = SpecMethod::kPld;
  EXPECT_FALSE(engine->submit(spec, {}));
}

// The prefill instance of a disaggregated pair, in this process (dist/mpi_prefill.h moves the
// same messages between two processes): a request is computed on its own model and cache at
// the engine's next poll, and its rows messages are then applied in order.
class LocalRemotePrefill final : public RemotePrefill {
 public:
  LocalRemotePrefill(std::unique_ptr<LlamaModel> model, DType kv_dtype, std::int64_t ctx, std::int64_t max_batch_tokens)
      : model_(std::move(model)),
        instance_(*model_, test::make_kv_cache(model_->config(), ctx, 1, kDefaultKvBlockSize, kv_dtype), pool_, max_batch_tokens) {}
  void request(std::uint64_t id, std::int32_t kv_seq, std::span<const std::int32_t> tokens, std::int64_t from) override {
    receiver_.expect(id, kv_seq, from, static_cast<std::int64_t>(tokens.size()), model_->config().n_layers);
    queued_.push_back({id, from, std::vector<std::int32_t>(tokens.begin(), tokens.end())});
  }
  std::vector<std::pair<std::uint64_t, Status>> poll(KvCache& cache) override {
    std::vector<std::vector<std::uint8_t>> messages;
    for (const PrefillRequest& r : std::exchange(queued_, {})) {
      instance_.run(r, [&](std::vector<std::uint8_t> m) { messages.push_back(std::move(m)); });
    }
    messages_ += static_cast<std::int64_t>(messages.size());
    std::vector<std::pair<std::uint64_t, Status>> done;
    for (const auto& m : messages) {
      if (auto end = receiver_.apply(m, cache)) done.push_back(std::move(*end));
    }
    return done;
  }
  void cancel(std::uint64_t id) override { receiver_.cancel(id); }
  std::int64_t bytes_received() const override { return receiver_.bytes(); }
  void stop() override { ++stops_; }
  std::int64_t messages() const { return messages_; }
  int stops() const { return stops_; }

 private:
  std::unique_ptr<LlamaModel> model_;
  ThreadPool pool_{1};
  PrefillInstance instance_;
  KvReceiver receiver_;
  std::vector<PrefillRequest> queued_;
  std::int64_t messages_ = 0;
  int stops_ = 0;
};

TEST_F(EngineTest, ARemotePrefillGivesTheSameTokensAndShipsWhatThePrefixCacheLacks) {
  for (const DType kv : {DType::kF32, DType::kQ8_0}) {
    SCOPED_TRACE(std::string(dtype_name(kv)));
    std::vector<RequestOptions> requests;
    for (auto& p : prompts(8)) {
      requests.push_back(greedy(p, 40));
      requests.back().eos_id = -1;  // every token sampled is emitted
    }
    EngineOptions o = options(256);
    o.kv.dtype = kv;
    const std::vector<Outcome> local = run_all(*make_engine(o), requests);
    LocalRemotePrefill remote(test::load_stories260k(), kv, 512, 8);  // 8-row chunks: several per prompt
    o.remote_prefill = &remote;
    auto engine = make_engine(o);
    const std::vector<Outcome> shipped = run_all(*engine, requests);
    const ModelConfig& c = model_->config();
    const std::int64_t position_bytes = kv_block_bytes(c.kv_shape(), 1, kv);  // K and V rows of every layer
    std::int64_t positions = 0, messages = 0;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(shipped[i].tokens, local[i].tokens) << "request " << i;
      EXPECT_EQ(shipped[i].result.reason, FinishReason::kLength);
      const auto n = static_cast<std::int64_t>(requests[i].prompt.size()) - 1;  // all but the last prompt token
      positions += n;
      messages += c.n_layers * ((n + 7) / 8) + 1;  // a message per layer per chunk, then the end
    }
    EXPECT_EQ(engine->metrics().kv_bytes_shipped_total, positions * position_bytes);
    EXPECT_EQ(remote.messages(), messages);
    // The first prompt again: its full blocks are prefix-cache hits, only the rest is shipped.
    const std::vector<Outcome> again = run_all(*engine, {requests[0]});
    const std::int64_t n = static_cast<std::int64_t>(requests[0].prompt.size()) - 1, hit = n / 16 * 16;
    ASSERT_GT(hit, 0);
    EXPECT_EQ(again[0].result.cached_prompt_tokens, hit);
    EXPECT_EQ(again[0].tokens, local[0].tokens);
    EXPECT_EQ(engine->metrics().kv_bytes_shipped_total, (positions + n - hit) * position_bytes);
    engine->shutdown(true);
    EXPECT_EQ(remote.stops(), 1);
  }
}

TEST_F(EngineTest, ARemotePrefillErrorOrCancelEndsOnlyItsRequest) {
  EngineOptions o = options(256);
  o.prefix_caching = false;
  LocalRemotePrefill remote(test::load_stories260k(), DType::kF32, 32, 64);  // its cache holds 32 positions
  o.remote_prefill = &remote;
  auto engine = make_engine(o);
  std::vector<std::int32_t> long_prompt;
  for (const auto& p : prompts(6)) long_prompt.insert(long_prompt.end(), p.begin(), p.end());
  ASSERT_GT(long_prompt.size(), 40u);
  const std::vector<Outcome> out = run_all(*engine, {greedy(long_prompt, 8), greedy(prompts(1)[0], 8)});
  EXPECT_EQ(out[0].result.reason, FinishReason::kError);
  EXPECT_NE(out[0].result.error.message().find("prefill instance"), std::string::npos) << out[0].result.error.message();
  EXPECT_EQ(out[1].result.reason, FinishReason::kLength);
  EXPECT_EQ(out[1].tokens, alone(greedy(prompts(1)[0], 8)));
  // Cancelled while its K/V are on their way: the rows that arrive later are dropped.
  Outcome cancelled;
  auto id = engine->submit(greedy(prompts(2)[1], 8), {nullptr, [&](const RequestResult& r) { cancelled.result = r; cancelled.finished = true; }});
  ASSERT_TRUE(id);
  engine->step();  // admitted: the request went to the prefill instance
  engine->cancel(*id);
  engine->step();
  EXPECT_TRUE(cancelled.finished);
  EXPECT_EQ(cancelled.result.reason, FinishReason::kCancelled);
  engine->step();
  EXPECT_EQ(engine->metrics().kv_blocks_free, engine->metrics().kv_blocks_total);
  // What the prefill instance cannot serve is refused: speculative requests, a mirror.
  RequestOptions spec = greedy(prompts(1)[0], 8);
  spec.spec.method = SpecMethod::kPld;
  EXPECT_FALSE(engine->submit(spec, {}));
  LocalMirror mirror(test::load_stories260k(), o.kv);
  o.mirror = &mirror;
  EXPECT_FALSE(Engine::create(*model_, o, pool_));
}

TEST_F(EngineTest, NegativeTokenBudgetsAreRefused) {
  EngineOptions o = options(32);
  o.prefill_budget = -1;
  EXPECT_EQ(Engine::create(*model_, o, pool_).status().code(), ErrorCode::kInvalidArgument);
  o.prefill_budget = 8;
  o.step_budget = -1;
  EXPECT_EQ(Engine::create(*model_, o, pool_).status().code(), ErrorCode::kInvalidArgument);
  o.step_budget = 24;
  EXPECT_TRUE(Engine::create(*model_, o, pool_));
}

TEST_F(EngineTest, PrefixCacheHitsGiveTheSameTokensWithSampling) {
  // A long shared prefix (4+ blocks) with different suffixes, sampled with fixed seeds.
  const auto shared = tokenizer_->encode(
      "Once upon a time there was a little girl who wanted to explore the world. She asked her parents if she could go", true);
  std::vector<RequestOptions> requests;
  for (const char* suffix : {" to the park.", " to the sea.", " to the park."}) {
    std::vector<std::int32_t> p = shared;
    for (std::int32_t t : tokenizer_->encode(suffix, false)) p.push_back(t);
    RequestOptions r = greedy(p, 30);
    r.sampling.temperature = 0.9f;
    r.sampling.seed = 7;
    requests.push_back(r);
  }
  auto cached = make_engine(options(128));
  std::vector<Outcome> first = run_all(*cached, {requests[0]});
  std::vector<Outcome> hits = run_all(*cached, {requests[1], requests[2]});
  EXPECT_EQ(first[0].result.cached_prompt_tokens, 0);
  EXPECT_GE(hits[0].result.cached_prompt_tokens, 16 * 3);
  // The first request's prompt again: every full block except one token to compute.
  EXPECT_EQ(hits[1].result.cached_prompt_tokens, static_cast<std::int64_t>(requests[2].prompt.size() - 1) / 16 * 16);
  EXPECT_GT(cached->metrics().prefix_hit_rate(), 0.3);
  EngineOptions off = options(128);
  off.prefix_caching = false;
  auto uncached = make_engine(off);
  const std::vector<Outcome> ref = run_all(*uncached, requests);
  EXPECT_EQ(first[0].tokens, ref[0].tokens);
  EXPECT_EQ(hits[0].tokens, ref[1].tokens);
  EXPECT_EQ(hits[1].tokens, ref[2].tokens);
  EXPECT_EQ(uncached->metrics().prefix_tokens_hit, 0);
}

TEST_F(EngineTest, CachedBlocksAreEvictedWhenARepeatedRequestOutgrowsTheFreePool) {
  // A request's blocks stay cached after it finishes; the same request again must be able to
  // evict them as it grows (32 blocks: each run needs ~20).
  EngineOptions o = options(32);
  o.max_running = 1;
  auto engine = make_engine(o);
  RequestOptions r = greedy(prompts(1)[0], 300);
  r.ignore_eos = true;
  for (int run = 0; run < 2; ++run) {
    const std::vector<Outcome> out = run_all(*engine, {r});
    EXPECT_EQ(out[0].tokens.size(), 300u) << "run " << run;
    EXPECT_EQ(out[0].result.reason, FinishReason::kLength);
  }
}

TEST_F(EngineTest, CancelFreesTheBlocks) {
  auto engine = make_engine(options(64));
  Outcome o;
  RequestOptions r = greedy(prompts(1)[0], 200);
  r.ignore_eos = true;
  auto id = engine->submit(r, {[&](const TokenEvent& e) { o.tokens.push_back(e.token); return true; },
                               [&](const RequestResult& res) { o.result = res; o.finished = true; }});
  ASSERT_TRUE(id);
  for (int i = 0; i < 5; ++i) engine->step();
  EXPECT_GT(engine->metrics().kv_blocks_used, 0);
  engine->cancel(*id);
  while (engine->step()) {}
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.result.reason, FinishReason::kCancelled);
  EXPECT_EQ(engine->metrics().kv_blocks_used, 0);
  EXPECT_EQ(engine->metrics().kv_blocks_free, 64);
}

TEST_F(EngineTest, OnTokenFalseStopsTheRequest) {
  auto engine = make_engine(options(64));
  Outcome o;
  ASSERT_TRUE(engine->submit(greedy(prompts(1)[0], 50), {[&](const TokenEvent& e) { o.tokens.push_back(e.token); return o.tokens.size() < 3; },
                                                        [&](const RequestResult& r) { o.result = r; o.finished = true; }}));
  while (engine->step()) {}
  EXPECT_EQ(o.tokens.size(), 3u);
  EXPECT_EQ(o.result.reason, FinishReason::kStop);
  EXPECT_EQ(o.result.completion_tokens, 3);
}

TEST_F(EngineTest, LogprobsAreLogSoftmaxOfTheLogits) {
  auto engine = make_engine(options(64));
  RequestOptions r = greedy(prompts(1)[0], 4);
  r.top_logprobs = 3;
  std::vector<TokenEvent> events;
  ASSERT_TRUE(engine->submit(r, {[&](const TokenEvent& e) { events.push_back(e); return true; }, {}}));
  while (engine->step()) {}
  ASSERT_EQ(events.size(), 4u);
  for (const TokenEvent& e : events) {
    ASSERT_EQ(e.top_logprobs.size(), 3u);
    EXPECT_EQ(e.top_logprobs[0].first, e.token);  // greedy picks the most likely
    EXPECT_FLOAT_EQ(e.top_logprobs[0].second, e.logprob);
    EXPECT_LT(e.logprob, 0.0f);
    EXPECT_GE(e.top_logprobs[0].second, e.top_logprobs[1].second);
  }
}

TEST_F(EngineTest, RejectsBadRequests) {
  EngineOptions o = options(8);
  o.max_waiting = 1;
  o.max_running = 1;
  o.ctx_len = 64;
  auto engine = make_engine(o);
  const std::vector<std::int32_t> p = prompts(1)[0];
  auto code = [&](RequestOptions r) { auto id = engine->submit(std::move(r), {}); return id ? ErrorCode::kOk : id.status().code(); };
  EXPECT_EQ(code(greedy({}, 4)), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(greedy(p, 0)), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(greedy({1, 999999}, 4)), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(greedy(std::vector<std::int32_t>(65, 1), 4)), ErrorCode::kOutOfRange);
  RequestOptions hot = greedy(p, 4);
  hot.sampling.temperature = -1.0f;
  EXPECT_EQ(code(hot), ErrorCode::kInvalidArgument);
  // One may run and one may wait: the third is turned away.
  EXPECT_EQ(code(greedy(p, 4)), ErrorCode::kOk);
  EXPECT_EQ(code(greedy(p, 4)), ErrorCode::kOk);
  EXPECT_EQ(code(greedy(p, 4)), ErrorCode::kResourceExhausted);
  EXPECT_EQ(engine->metrics().requests_by_status.at("rejected"), 1);
  EXPECT_FALSE(Engine::create(*model_, [] { EngineOptions bad; bad.kv.n_blocks = 8; bad.max_batch_tokens = 0; return bad; }(), pool_));
}

TEST_F(EngineTest, ThreadedLoopDrainsOnShutdown) {
  auto engine = make_engine(options(256));
  engine->start();
  std::vector<Outcome> out(6);
  const auto ps = prompts(6);
  std::vector<std::thread> clients;
  std::mutex mu;
  for (std::size_t i = 0; i < out.size(); ++i) {
    clients.emplace_back([&, i] {
      auto id = engine->submit(greedy(ps[i], 20), {[&, i](const TokenEvent& e) { std::lock_guard l(mu); out[i].tokens.push_back(e.token); return true; },
                                                   [&, i](const RequestResult& r) { std::lock_guard l(mu); out[i].result = r; out[i].finished = true; }});
      EXPECT_TRUE(id);
    });
  }
  for (auto& c : clients) c.join();
  engine->shutdown(/*drain=*/true);
  for (std::size_t i = 0; i < out.size(); ++i) {
    EXPECT_TRUE(out[i].finished);
    EXPECT_EQ(out[i].tokens, alone(greedy(ps[i], 20))) << i;
  }
  EXPECT_EQ(engine->submit(greedy(ps[0], 4), {}).status().code(), ErrorCode::kUnavailable);
}

TEST_F(EngineTest, ShutdownWithoutDrainFailsRequestsInFlight) {
  auto engine = make_engine(options(64));
  Outcome o;
  RequestOptions r = greedy(prompts(1)[0], 100);
  r.ignore_eos = true;
  ASSERT_TRUE(engine->submit(r, {{}, [&](const RequestResult& res) { o.result = res; o.finished = true; }}));
  engine->step();
  engine->shutdown(/*drain=*/false);
  ASSERT_TRUE(o.finished);
  EXPECT_EQ(o.result.reason, FinishReason::kError);
  EXPECT_EQ(o.result.error.code(), ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace peregrine
