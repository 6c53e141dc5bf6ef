// Drafting with a language model: a separate small draft model sharing the target's vocabulary
// (speculative sampling, Leviathan et al. 2023 / Chen et al. 2023), the target's own first k
// layers + final norm + LM head (self-speculative layer skip: Draft & Verify, Zhang et al.
// 2024; LayerSkip, Elhoushi et al. 2024), or a quantized copy of the target (e.g. Q4_0 weights
// drafting for the F32 target). All three are a LlamaModel + this class; they differ in the
// model passed and ModelDrafterOptions::n_layers.
//
// EAGLE (Li et al. 2024; spec/eagle_layer.h) is the same machinery over an EagleLayer: its row
// at position p reads token p + 1 and the target's feature f_p, so it drafts over the request's
// tokens shifted by one (the root's row sits at position tokens.size() - 2) with the context
// rows' features from DraftRequest::features (kept per sequence until the cache holds their
// rows; a position without one reads zeros: e.g. a prompt prefix the engine took from its
// prefix cache) and each tree node's row reading the feature its parent's row predicted. With
// branching > 1 that is EAGLE-2's dynamic tree (context-aware: expand by cumulative draft
// confidence, rerank to the node budget).
//
// The drafter owns a paged KvCache of the draft model (its own block pool, sequence ids of its
// own) holding each sequence's context (with a context window: its sink tokens and its tail,
// renumbered from position 0 — RoPE sees only distances — so that a long prompt costs the draft
// model a short prefill; drafts stay lossless, as the target verifies every token); every draft() call resynchronizes it with the
// requests' tokens, runs ALL requests through the same batched forwards (catch-up rows of new
// context + the root first, then one row per expanded node per step), and truncates the cache
// back to the context afterwards, so rejected drafts never linger.
//
// Chains (branching 1): greedy (temperature 0: argmax after the repetition penalty, a
// deterministic node) or sampled (a draw from q, the distribution the target's sampler would
// draw from; the node keeps q for verification's min(1, p/q) test). Trees (branching > 1):
// EAGLE-2's dynamic tree (Li et al. 2024): score = cumulative draft log-probability; each
// level expands the `branching` best new nodes, each into its `branching` most probable
// children (deterministic nodes); the result keeps the max_nodes best nodes. Every expanded
// node is a chain in its own draft-cache sequence (KvCache::fork of its parent's, blocks shared
// copy-on-write), so a level is one plain batched forward. Adaptive stop (EAGLE-2 / dynamic
// draft length): a node whose path probability is below min_confidence is not expanded.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "peregrine/kv/kv_cache.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/spec/drafter.h"
#include "peregrine/spec/eagle_layer.h"
#include "peregrine/spec/feature_rows.h"

namespace peregrine {

struct ModelDrafterOptions {
  SpecMethod method = SpecMethod::kDraft;  // kDraft, kLayerSkip, kQuant (create) or kEagle (create_eagle)
  std::int64_t n_layers = 0;               // decoder layers run: 0 = all, k = the first k
  std::int32_t kv_blocks = 0;              // draft KV pool size in blocks (>= 1)
  std::int32_t block_size = kDefaultKvBlockSize;  // positions per draft KV block
  DType kv_dtype = DType::kF32;            // draft K/V storage: any KvCache type (f32, f16, q8_0, i8, f8_e4m3, f8_e5m2)
  float min_confidence = 0.0f;             // [0, 1): 0 expands regardless of probability
  std::int64_t context_window = 0;         // not EAGLE: > 0, a sequence longer than this at its first
                                           // draft call is seen by the draft model as its first
                                           // kDraftSinkTokens tokens and the last context_window
                                           // from there on (0 = the whole context)
};

/// Tokens kept from a sequence's start under ModelDrafterOptions::context_window: the attention
/// sinks of StreamingLLM (Xiao et al. 2024), which a model's attention leans on wherever the
/// text continues.
inline constexpr std::int64_t kDraftSinkTokens = 4;

class ModelDrafter final : public Drafter {
 public:
  /// A drafter running `draft` (borrowed: must outlive the drafter; for layer skip, the target
  /// model itself) for a target model of config `target`. The KV pool holds
  /// options.kv_blocks blocks of the draft model's first n_layers layers.
  /// Errors: kInvalidArgument (draft.vocab_size != target.vocab_size, method not kDraft /
  /// kLayerSkip / kQuant, n_layers outside [0, draft's n_layers], min_confidence outside
  /// [0, 1), context_window < 0), and those of KvCache::create (bad kv_blocks / block_size / kv_dtype,
  /// kOutOfRange when the pool exceeds physical memory).
  static Expected<std::unique_ptr<ModelDrafter>> create(const LlamaModel& draft, const ModelConfig& target,
                                                        const ModelDrafterOptions& options);

  /// A drafter running the EAGLE head `eagle` (borrowed: must outlive the drafter) for a
  /// target of config `target`; options.method must be kEagle and n_layers 0. Errors:
  /// kInvalidArgument (those, a vocabulary or hidden size not the target's, min_confidence
  /// outside [0, 1), a context_window: EAGLE reads the target's features by position), those of
  /// KvCache::create.
  static Expected<std::unique_ptr<ModelDrafter>> create_eagle(const EagleLayer& eagle, const ModelConfig& target,
                                                              const ModelDrafterOptions& options);

  SpecMethod method() const override { return options_.method; }
  bool needs_features() const override { return eagle_ != nullptr; }

  /// Drafts trees[i] for requests[i] (see the file comment). Per request the draft cache keeps
  /// the longest common prefix of what it holds and tokens[0, L - 1) (L = tokens.size()), the
  /// first forward feeds the rest of the context and the root (a prefill chunk), and each
  /// later forward one row per expanded node: at most max_nodes forwards per call for a chain
  /// (the last node is not fed); for a tree one forward per level (at most `branching` rows per
  /// request), until no new node can still enter the max_nodes best. A request gets
  /// fewer nodes, possibly none, rather than an error when its positions would pass the draft
  /// model's max_seq_len or the KV pool has no block left for it; other requests are unaffected.
  /// Sampled chains draw from request.rng. `pool` runs the forwards. Not thread-safe (one
  /// caller). Measured (bench/drafter_bench.cpp, stories260K drafting for itself, 1 thread,
  /// 2-core EPYC): chain k = 4 ≈ 0.335 ms per call, i.e. ≈ 84 µs per forward step (the first
  /// one with ~5 catch-up rows) against ≈ 70 µs for a plain one-token decode forward; tree of
  /// 8 nodes ≈ 0.515 ms per call (b = 2) and ≈ 0.58 ms (b = 4), about 5 forwards per call.
  /// Errors: kInvalidArgument (validate_draft_requests; a sampled chain without rng); those
  /// of LlamaModel::forward (e.g. kOutOfRange for a token id outside the vocabulary): every
  /// tree is then empty and the draft cache holds no more than each sequence's context.
  Status draft(std::span<const DraftRequest> requests, std::vector<DraftTree>& trees,
               ThreadPool& pool) override;

  /// Frees the sequence's draft KV blocks and forgets it (no-op for an unknown id).
  void release(std::int32_t seq) override;

  /// The draft KV cache (pool occupancy for metrics and tests).
  const KvCache& kv_cache() const { return cache_; }

 private:
  struct Sequence {
    std::int32_t cache_id = 0;             // its context's sequence id in cache_
    std::vector<std::int32_t> cached;      // the tokens whose K/V cache_ holds, in order
    std::int64_t window_start = -1;        // context_window: where its tail starts in the request's
                                           // tokens (0: not windowed; -1: not yet drafted for)
    FeatureRows features;                  // EAGLE: context features not yet in cache_
  };
  struct Row;
  struct Job;

  ModelDrafter(const LlamaModel* draft, const EagleLayer* eagle, const ModelDrafterOptions& options, KvCache cache)
      : model_(draft), eagle_(eagle), options_(options), cache_(std::move(cache)) {}
  const ModelConfig& draft_config() const { return eagle_ != nullptr ? eagle_->config() : model_->config(); }
  // Plans `batch`'s KV in this drafter's cache (plan_batch_kv), then runs the draft forward.
  Status run_forward(Batch& batch, ThreadPool& pool);
  // EAGLE: the input feature of a row at `position` of `seq` (zeros when not held).
  void add_context_feature(const Sequence& seq, std::int64_t position);
  // The tokens the draft model sees of `tokens` (all, or the sinks and the window's tail).
  std::vector<std::int32_t> draft_view(Sequence& seq, std::span<const std::int32_t> tokens) const;
  std::vector<Job> start_jobs(std::span<const DraftRequest> requests, Batch& batch);
  Batch next_batch(std::vector<Job>& jobs);
  void grow(std::vector<Job>& jobs, std::span<const float> logits);
  void finish(Job& job);
  std::int32_t new_cache_id();
  // The drafter's state of the engine's sequence `seq`, created on first use.
  Sequence& sequence(std::int32_t seq);
  void free_cache_id(std::int32_t id);

  const LlamaModel* model_;  // null for EAGLE
  const EagleLayer* eagle_;  // null for a language model
  ModelDrafterOptions options_;
  KvCache cache_;
  std::unordered_map<std::int32_t, Sequence> seqs_;  // by DraftRequest::seq
  std::int32_t next_cache_id_ = 0;
  std::vector<std::int32_t> free_cache_ids_;
  std::vector<float> logits_;
  std::vector<float> row_features_, out_features_;  // EAGLE: [rows, dim] in / out of a forward
};

}  // namespace peregrine
