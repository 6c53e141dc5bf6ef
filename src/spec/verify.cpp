// Draft-tree verification by speculative sampling with residuals (see verify.h for the
// procedure and why it is lossless). Distributions are dense [vocab] f64 vectors: a tried
// child costs O(vocab), well below the vocab x dim multiply-adds the target's LM head spent on
// each logits row.
#include "peregrine/spec/verify.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace peregrine {
namespace {

Status validate(const DraftTree& tree, std::size_t n_logits, std::int64_t vocab) {
  if (vocab <= 0) return invalid_argument("verify_draft: vocab must be > 0 (got " + std::to_string(vocab) + ")");
  const auto v = static_cast<std::size_t>(vocab);
  if (n_logits % v != 0 || n_logits / v != static_cast<std::size_t>(1 + tree.size())) {
    return invalid_argument("verify_draft: logits hold " + std::to_string(n_logits) + " floats, expected (1 + " +
                            std::to_string(tree.size()) + " nodes) x " + std::to_string(vocab));
  }
  for (std::size_t i = 0; i < tree.nodes.size(); ++i) {
    const DraftNode& n = tree.nodes[i];
    const std::string where = "verify_draft: node " + std::to_string(i) + ": ";
    if (n.parent < -1 || n.parent >= static_cast<std::int64_t>(i)) {
      return invalid_argument(where + "parent " + std::to_string(n.parent) + " is not an earlier node or -1");
    }
    if (n.token < 0 || n.token >= vocab) {
      return invalid_argument(where + "token " + std::to_string(n.token) + " outside the vocabulary [0, " +
                              std::to_string(vocab) + ")");
    }
    for (const auto& [id, prob] : n.q) {
      if (id < 0 || id >= vocab || !std::isfinite(prob) || prob < 0.0f) {
        return invalid_argument(where + "q entry (" + std::to_string(id) + ", " + std::to_string(prob) +
                                ") needs an id in [0, " + std::to_string(vocab) + ") and a finite probability >= 0");
      }
    }
  }
  return Status::ok();
}

/// Scales `r` to sum 1. False (r left as is) when it has no positive mass.
bool normalize(std::vector<double>& r) {
  double total = 0.0;
  for (double x : r) total += x;
  if (!(total > 0.0)) return false;
  for (double& x : r) x /= total;
  return true;
}

/// The target distribution of one logits row after `history`, dense [vocab], summing to 1.
/// A row without positive mass (all logits NaN / -inf) gives its top candidate probability 1,
/// the token Sampler::sample returns for it.
void target_distribution(const Sampler& sampler, std::span<const float> row,
                         std::span<const std::int32_t> history, std::vector<double>& p) {
  const auto cand = sampler.next_token_distribution(row, history);
  p.assign(row.size(), 0.0);
  for (const auto& [id, prob] : cand) {
    if (prob > 0.0f) p[static_cast<std::size_t>(id)] = prob;  // NaN fails the test
  }
  if (!normalize(p)) p[static_cast<std::size_t>(cand.front().first)] = 1.0;
}

/// True with probability `a`; a uniform is drawn only when 0 < a < 1.
bool bernoulli(double a, Sampler& sampler) {
  if (a <= 0.0) return false;
  if (a >= 1.0) return true;
  return sampler.uniform() < a;
}

/// A token drawn from `r` (non-negative, positive mass); no RNG draw when only one entry is
/// positive.
std::int32_t draw(const std::vector<double>& r, Sampler& sampler) {
  std::size_t last = 0, n_positive = 0;
  double total = 0.0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (r[i] > 0.0) {
      last = i;
      ++n_positive;
      total += r[i];
    }
  }
  if (n_positive > 1) {
    const double u = sampler.uniform() * total;
    double cum = 0.0;
    for (std::size_t i = 0; i < r.size(); ++i) {
      cum += r[i];
      if (r[i] > 0.0 && u < cum) return static_cast<std::int32_t>(i);
    }
  }
  return static_cast<std::int32_t>(last);  // also where u landed past the rounded total
}

/// Tries one child against the residual `r`: true if accepted; on rejection updates `r`.
/// `q` and `next` are scratch [vocab] buffers (`q` all zero on entry and on return).
bool try_child(const DraftNode& child, std::vector<double>& r, std::vector<double>& q,
               std::vector<double>& next, Sampler& sampler) {
  const auto x = static_cast<std::size_t>(child.token);
  for (const auto& [id, prob] : child.q) q[static_cast<std::size_t>(id)] += prob;
  const bool sampled = q[x] > 0.0;  // q(x) = 0: x was not drawn from q; verify it as deterministic
  const bool accepted = bernoulli(sampled ? r[x] / q[x] : r[x], sampler);
  if (!accepted) {
    next = r;
    if (sampled) {
      for (std::size_t i = 0; i < next.size(); ++i) next[i] = std::max(0.0, r[i] - q[i]);
    } else {
      next[x] = 0.0;
    }
    if (normalize(next)) r.swap(next);  // no mass left: r ≈ q, the rejection had probability ≈ 0
  }
  for (const auto& [id, prob] : child.q) q[static_cast<std::size_t>(id)] = 0.0;
  return accepted;
}

}  // namespace

Expected<VerifyResult> verify_draft(const DraftTree& tree, std::span<const float> logits,
                                    std::int64_t vocab, std::span<const std::int32_t> history,
                                    Sampler& sampler) {
  PEREGRINE_RETURN_IF_ERROR(validate(tree, logits.size(), vocab));
  const auto v = static_cast<std::size_t>(vocab);
  std::vector<std::int32_t> context(history.begin(), history.end());  // history + accepted path
  std::vector<double> r, q(v, 0.0), next;
  VerifyResult result;
  for (std::int32_t node = -1;;) {  // -1: the root
    target_distribution(sampler, logits.subspan(static_cast<std::size_t>(node + 1) * v, v), context, r);
    std::int32_t accepted = -1;
    for (std::int32_t c = node + 1; c < tree.size() && accepted < 0; ++c) {  // children follow their parent
      const DraftNode& child = tree.nodes[static_cast<std::size_t>(c)];
      if (child.parent == node && try_child(child, r, q, next, sampler)) accepted = c;
    }
    if (accepted < 0) {  // every child rejected (r is the last residual), or a leaf (r = p)
      result.next_token = draw(r, sampler);
      return result;
    }
    result.path.push_back(accepted);
    context.push_back(tree.nodes[static_cast<std::size_t>(accepted)].token);
    node = accepted;
  }
}

}  // namespace peregrine
