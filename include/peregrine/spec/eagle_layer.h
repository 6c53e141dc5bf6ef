// The runtime forward of an EAGLE-1 draft head (Li et al. 2024, "EAGLE: Speculative Sampling
// Requires Rethinking Feature Uncertainty"; layout and training: spec/eagle_head.h,
// train/eagle.h): per row, at RoPE position p,
//   x  = fc(cat(embed(x_{p+1}), f_p)) (+ fc.bias)      embed = the target's token embedding
//   h  = x + o_proj(attention(q_proj x, k_proj x, v_proj x))   no input norm (EAGLE's layer 0);
//        RoPE on q and k with Hugging Face's rotate_half pairing (RopeStyle::kNeox), GQA,
//        causal over the sequence's cached rows (its own KV cache: one layer)
//   f̂  = h + down(SiLU(gate(n)) · up(n)), n = RMSNorm(h) · post_attention_layernorm
//   logits = the target's LM head on f̂ (no final norm)
// f̂ is the head's guess of the target's feature f_{p+1}; a draft tree feeds it back with the
// next draft token (ModelDrafter's EAGLE mode). Scalar twin: the libtorch module of
// train/eagle.h (eagle_reference), compared in tests/train/eagle_runtime_test.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/spec/eagle_head.h"
#include "peregrine/kv/kv_cache.h"
#include "peregrine/model/batch.h"
#include "peregrine/model/llama_model.h"

namespace peregrine {

class EagleLayer {
 public:
  /// The head `head` (f32 tensors of spec/eagle_head.h) drafting for `target` (borrowed:
  /// must outlive the layer; its token embedding and LM head are read). Errors:
  /// kInvalidArgument (hidden size or vocabulary not the target's, a tensor missing or
  /// misshapen, heads not a multiple of kv_heads).
  static Expected<std::unique_ptr<EagleLayer>> create(EagleHead head, const LlamaModel& target);

  /// The shape of the head's KV cache (one layer; n_kv_heads, head_dim of the head; context
  /// min(the target's, max_position_embeddings)) for KvCache::create.
  const ModelConfig& config() const { return config_; }

  /// Runs the rows of `batch` (tokens: x_{p+1}; positions: p; seq_ids: sequences of `cache`;
  /// parents ignored: rows are plain) with `features`
  /// [batch.size(), dim] f32 (row i's f_p), writing each row's K/V into `cache` at its position
  /// (a sequence's rows: contiguous in the batch, consecutive positions; the batch planned in
  /// `cache` by its owner: plan_batch_kv, model/batch_kv_plan.h), `logits` [batch.n_logits(),
  /// vocab] (the rows with need_logits, in batch order) and `out_features` [rows, dim] (every
  /// row's f̂), both resized. Errors (nothing written): kInvalidArgument (sizes, a sequence's
  /// rows not contiguous or not consecutive, a batch not planned in the cache, a cache of
  /// another shape), kOutOfRange (token id outside the vocabulary, position >=
  /// config().max_seq_len).
  Status forward(const Batch& batch, std::span<const float> features, KvCache& cache, std::vector<float>& logits,
                 std::vector<float>& out_features, ThreadPool& pool) const;

 private:
  struct Run {
    std::int32_t seq;
    std::int64_t begin, end;  // batch rows
  };
  explicit EagleLayer(EagleHead head) : head_(std::move(head)) {}
  Expected<std::vector<Run>> runs(const Batch& batch, std::span<const float> features, const KvCache& cache) const;
  void attention(const Batch& batch, const std::vector<Run>& runs, std::vector<float>& x, KvCache& cache,
                 ThreadPool& pool) const;

  EagleHead head_;  // owns the weights the views point into
  ModelConfig config_;
  TensorView fc_, wq_, wk_, wv_, wo_, gate_, up_, down_;
  const std::vector<float>* fc_bias_ = nullptr;  // null without "bias"
  const std::vector<float>* post_norm_ = nullptr;
  const TensorView* embedding_ = nullptr;  // the target's
  const TensorView* lm_head_ = nullptr;    // the target's
};

}  // namespace peregrine
