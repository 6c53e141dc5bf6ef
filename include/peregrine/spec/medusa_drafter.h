// Drafting with Medusa heads (Cai et al. 2024, "Medusa: Simple LLM Inference Acceleration
// Framework with Multiple Decoding Heads"): head k (k = 0 .. K-1) reads the target's final
// hidden state h_t (after its final norm: DraftRequest::features) at the position t whose
// logits gave the root token t + 1, runs its ResBlocks (y += SiLU(W y + b)) and its LM head,
// and predicts token t + k + 2, i.e. draft depth k + 1. The heads never see the draft tokens,
// so a whole tree costs K small products and no forward.
//
// Trees: Medusa's tree of top candidates per head, built by the same expand / rerank as the
// model drafters (spec/draft_tree_builder.h, EAGLE-2's scheme): score = Σ of the heads' log
// probabilities along the path; each depth expands the `branching` best new nodes into their
// `branching` most probable children (head depth's distribution, the same for every parent);
// the max_nodes best nodes are kept. Branching 1: a greedy chain of each head's argmax, or
// under sampling a chain drawn from each head's distribution q (verification's min(1, p/q)
// keeps the target's distribution; Leviathan et al. 2023).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "peregrine/core/tensor.h"
#include "peregrine/spec/medusa_heads.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/spec/drafter.h"

namespace peregrine {

class MedusaDrafter final : public Drafter {
 public:
  /// Takes `heads` (spec/medusa_heads.h: f32 tensors of the published layout) for a target
  /// of config `target`. Errors: kInvalidArgument (heads.hidden != target.dim, heads.vocab !=
  /// target.vocab_size, no head, a tensor missing or misshapen).
  static Expected<std::unique_ptr<MedusaDrafter>> create(MedusaHeads heads, const ModelConfig& target);

  SpecMethod method() const override { return SpecMethod::kMedusa; }
  bool needs_features() const override { return true; }

  /// Drafts trees[i] for requests[i] (see the file comment): depth at most min(K, max_nodes).
  /// A request's tree is empty when the drafter holds no feature of position
  /// tokens.size() - 2 (it keeps each sequence's newest feature row across calls). The
  /// requests' heads run as one [n, dim] batch per product on `pool`. Errors: kInvalidArgument
  /// (validate_draft_requests; a sampled chain without rng; features whose size is not a
  /// multiple of the hidden size).
  Status draft(std::span<const DraftRequest> requests, std::vector<DraftTree>& trees, ThreadPool& pool) override;

  /// Forgets the sequence's feature (no-op for an unknown id).
  void release(std::int32_t seq) override { last_.erase(seq); }

  std::int64_t n_heads() const { return static_cast<std::int64_t>(heads_.size()); }

 private:
  struct Head {
    std::vector<TensorView> w;                // ResBlock weights [dim, dim]
    std::vector<const std::vector<float>*> b;  // ResBlock biases [dim]
    TensorView lm_head;                       // [vocab, dim]
  };
  struct Feature {
    std::int64_t position = -1;
    std::vector<float> h;  // [dim]
  };

  explicit MedusaDrafter(MedusaHeads weights) : weights_(std::move(weights)) {}
  Status remember(const DraftRequest& r);
  // logits [heads][n, vocab] of the heads on x [n, dim].
  std::vector<std::vector<float>> head_logits(const std::vector<float>& x, std::int64_t n, ThreadPool& pool) const;

  MedusaHeads weights_;  // owns what heads_ point into
  std::vector<Head> heads_;
  std::unordered_map<std::int32_t, Feature> last_;  // by DraftRequest::seq
};

}  // namespace peregrine
