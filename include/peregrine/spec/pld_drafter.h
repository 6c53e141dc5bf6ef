// Prompt lookup decoding (Saxena 2023; llama.cpp's `lookup`, vLLM's ngram proposer): the last
// n tokens of a sequence are looked up among its earlier tokens (prompt and output so far), and
// the tokens that followed an earlier occurrence are proposed. No model runs: proposals are
// deterministic (DraftNode::q empty, log_q 0) and cost microseconds. Pays off on inputs that
// repeat themselves (summaries, code edits, extraction, looping greedy text).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "peregrine/spec/drafter.h"
#include "peregrine/spec/ngram_index.h"

namespace peregrine {

/// Defaults measured with `bench --spec pld` on stories260K (6 TinyStories prompts, 400
/// tokens, chain k = 8): acceptance 0.19 with n-grams 1..3, 0.36 with 2..4 (speedup 1.05x →
/// 1.30x): single-token matches mostly propose noise.
struct PldOptions {
  std::int32_t min_ngram = 2;  // shortest suffix matched (tokens)
  std::int32_t max_ngram = 4;  // longest suffix matched; longer matches are tried first
};

class PldDrafter final : public Drafter {
 public:
  /// Errors: kInvalidArgument unless 1 <= min_ngram <= max_ngram <= NgramIndex::kMaxNgram.
  static Expected<std::unique_ptr<PldDrafter>> create(const PldOptions& options);

  /// Earlier occurrences examined per n-gram length when collecting a tree's continuations.
  static constexpr std::int32_t kMaxScan = 64;

  SpecMethod method() const override { return SpecMethod::kPld; }

  /// Per request: syncs the sequence's NgramIndex with `tokens` (incremental: a decode step
  /// indexes only the new tokens), then
  /// - branching == 1: a chain of up to max_nodes tokens continuing the newest earlier
  ///   occurrence of the longest suffix found (n from max_ngram down to min_ngram);
  /// - branching > 1: a trie of up to `branching` distinct continuations (longest n first,
  ///   newest first within an n, at most kMaxScan occurrences per n), filled level by level
  ///   while nodes remain, so every continuation gets the same depth; siblings in the
  ///   continuations' rank order.
  /// A continuation that reaches the end of `tokens` goes on with its own proposal (the period
  /// repeats: "a b a b" proposes "a b a b ..."). No occurrence: an empty tree. Nodes are
  /// deterministic (q empty, log_q 0). `pool` is unused. Not thread-safe (one caller).
  /// Measured (bench/drafter_bench.cpp, 2-core EPYC, TinyStories text): ≈ 2 µs per call on a
  /// 2000-token context growing by one token per call (chain of 8 or tree of 8, b = 3);
  /// ≈ 0.3-0.5 ms for a sequence's first call, which indexes all 2000 tokens.
  /// Errors: kInvalidArgument (validate_draft_requests: empty tokens, max_nodes outside
  /// [1, kMaxDraftNodes], branching < 1, a sequence twice).
  Status draft(std::span<const DraftRequest> requests, std::vector<DraftTree>& trees,
               ThreadPool& pool) override;

  /// Drops the sequence's index (no-op for an unknown id).
  void release(std::int32_t seq) override;

  /// Sequences with an index (for tests).
  std::size_t n_sequences() const { return index_.size(); }

 private:
  explicit PldDrafter(const PldOptions& options) : options_(options) {}
  /// Up to `wanted` distinct continuations of `length` tokens, best first.
  std::vector<std::vector<std::int32_t>> continuations(const NgramIndex& index, std::int32_t wanted,
                                                       std::int32_t length) const;

  PldOptions options_;
  std::unordered_map<std::int32_t, NgramIndex> index_;  // by DraftRequest::seq
};

}  // namespace peregrine
