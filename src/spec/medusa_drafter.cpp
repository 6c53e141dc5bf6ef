#include "peregrine/spec/medusa_drafter.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "draft_requests.h"
#include "draft_tree_builder.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"

namespace peregrine {
Expected<std::unique_ptr<MedusaDrafter>> MedusaDrafter::create(MedusaHeads heads, const ModelConfig& target) {
  if (heads.hidden != target.dim || heads.vocab != target.vocab_size) {
    return invalid_argument("the Medusa heads are for hidden size " + std::to_string(heads.hidden) + " and " +
                            std::to_string(heads.vocab) + " tokens, the target has " + std::to_string(target.dim) +
                            " and " + std::to_string(target.vocab_size));
  }
  if (heads.heads < 1) return invalid_argument("the Medusa file has no head");
  PEREGRINE_RETURN_IF_ERROR(heads.validate());
  std::unique_ptr<MedusaDrafter> d(new MedusaDrafter(std::move(heads)));
  const MedusaHeads& m = d->weights_;
  for (std::int64_t k = 0; k < m.heads; ++k) {
    Head h;
    const std::string prefix = std::to_string(k) + ".";
    for (std::int64_t j = 0; j < m.layers; ++j) {
      const std::string block = prefix + std::to_string(j) + ".linear.";
      h.w.push_back(f32_matrix_view(block + "weight", m.tensors.at(block + "weight"), m.hidden, m.hidden));
      h.b.push_back(&m.tensors.at(block + "bias"));
    }
    const std::string head = prefix + std::to_string(m.layers) + ".weight";
    h.lm_head = f32_matrix_view(head, m.tensors.at(head), m.vocab, m.hidden);
    d->heads_.push_back(std::move(h));
  }
  return d;
}

Status MedusaDrafter::remember(const DraftRequest& r) {
  if (r.features.empty()) return Status::ok();
  const auto dim = static_cast<std::size_t>(weights_.hidden);
  if (r.features.size() % dim != 0) {
    return invalid_argument("draft request for sequence " + std::to_string(r.seq) + ": features of " +
                            std::to_string(r.features.size()) + " values are not rows of the hidden size " +
                            std::to_string(dim));
  }
  const auto n = static_cast<std::int64_t>(r.features.size() / dim);
  Feature& f = last_[r.seq];
  f.position = r.features_begin + n - 1;
  f.h.assign(r.features.end() - static_cast<std::ptrdiff_t>(dim), r.features.end());
  return Status::ok();
}

std::vector<std::vector<float>> MedusaDrafter::head_logits(const std::vector<float>& x, std::int64_t n,
                                                           ThreadPool& pool) const {
  const std::int64_t dim = weights_.hidden;
  std::vector<std::vector<float>> logits;
  std::vector<float> y, z(x.size());
  for (const Head& h : heads_) {
    y = x;
    for (std::size_t j = 0; j < h.w.size(); ++j) {  // ResBlock: y += SiLU(W y + b)
      matmul(h.w[j], y, n, z, pool);
      for (std::size_t i = 0; i < z.size(); ++i) {
        const float v = z[i] + (*h.b[j])[i % static_cast<std::size_t>(dim)];
        y[i] += v / (1.0f + std::exp(-v));
      }
    }
    logits.emplace_back(static_cast<std::size_t>(n * weights_.vocab));
    matmul(h.lm_head, y, n, logits.back(), pool);
  }
  return logits;
}

Status MedusaDrafter::draft(std::span<const DraftRequest> requests, std::vector<DraftTree>& trees, ThreadPool& pool) {
  PEREGRINE_RETURN_IF_ERROR(validate_draft_requests(requests));
  PEREGRINE_RETURN_IF_ERROR(require_rng_for_sampled_chains(requests));
  for (const DraftRequest& r : requests) PEREGRINE_RETURN_IF_ERROR(remember(r));
  trees.assign(requests.size(), DraftTree{});
  // The requests whose root has its feature (position tokens.size() - 2), as rows of x.
  std::vector<std::size_t> drafted;
  std::vector<float> x;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto it = last_.find(requests[i].seq);
    if (it == last_.end() || it->second.position != static_cast<std::int64_t>(requests[i].tokens.size()) - 2) continue;
    drafted.push_back(i);
    x.insert(x.end(), it->second.h.begin(), it->second.h.end());
  }
  if (drafted.empty()) return Status::ok();
  const auto n = static_cast<std::int64_t>(drafted.size());
  const std::vector<std::vector<float>> logits = head_logits(x, n, pool);
  const auto vocab = static_cast<std::size_t>(weights_.vocab);
  for (std::size_t row = 0; row < drafted.size(); ++row) {
    const DraftRequest& r = requests[drafted[row]];
    const auto head = [&](std::int32_t depth) {  // head depth - 1's logits for this request
      return std::span(logits[static_cast<std::size_t>(depth - 1)]).subspan(row * vocab, vocab);
    };
    DraftTreeBuilder builder(r, static_cast<std::int32_t>(std::min<std::int64_t>(n_heads(), r.max_nodes)), 0.0f);
    builder.expand(-1, head(1));
    for (std::vector<std::int32_t> level = builder.frontier(); !level.empty(); level = builder.frontier()) {
      for (std::int32_t node : level) builder.expand(node, head(builder.depth(node) + 1));
    }
    trees[drafted[row]] = builder.finish();
  }
  return Status::ok();
}

}  // namespace peregrine
