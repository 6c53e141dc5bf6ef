#include "draft_tree_builder.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

namespace peregrine {
namespace {


/// log Σ exp(logits) in f64 (-inf when every logit is -inf).
double log_sum_exp(std::span<const float> logits) {
  const double max = *std::max_element(logits.begin(), logits.end());
  if (!std::isfinite(max)) return max;
  double sum = 0.0;
  for (float l : logits) sum += std::exp(l - max);
  return max + std::log(sum);
}

/// Draws an id from `q` (sorted by decreasing probability) as Sampler::sample does.
std::size_t draw(const std::vector<std::pair<std::int32_t, float>>& q, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const double r = uniform(rng);
  double cum = 0.0;
  std::size_t last = 0;
  for (std::size_t i = 0; i < q.size() && q[i].second > 0.0f; ++i) {
    cum += q[i].second;
    last = i;
    if (r < cum) return i;
  }
  return last;  // r past the float-rounded total: never a zero-probability candidate
}

}  // namespace

DraftTreeBuilder::DraftTreeBuilder(const DraftRequest& request, std::int32_t depth_limit, float min_confidence)
    : request_(request),
      depth_limit_(depth_limit),
      min_confidence_(min_confidence),
      sampled_(is_sampled_chain(request)) {}

bool DraftTreeBuilder::is_sampled_chain(const DraftRequest& request) {
  return request.branching == 1 && request.sampling != nullptr && request.sampling->temperature > 0.0f;
}

bool DraftTreeBuilder::better(std::int32_t a, std::int32_t b) const {
  const double sa = score_[static_cast<std::size_t>(a)], sb = score_[static_cast<std::size_t>(b)];
  return sa > sb || (sa == sb && a < b);
}

std::vector<std::int32_t> DraftTreeBuilder::path_history(std::int32_t node) const {
  const SamplingParams* p = request_.sampling;
  if (p == nullptr || !p->penalizes()) return {};
  std::vector<std::int32_t> path;
  for (std::int32_t i = node; i >= 0; i = nodes_[static_cast<std::size_t>(i)].parent) path.push_back(token(i));
  const auto tokens = request_.tokens;
  const std::size_t tail = p->penalty_window(tokens.size());
  std::vector<std::int32_t> history(tokens.end() - static_cast<std::ptrdiff_t>(tail), tokens.end());
  history.insert(history.end(), path.rbegin(), path.rend());
  return history;
}

void DraftTreeBuilder::add_child(std::int32_t parent, std::int32_t token, double log_p,
                                 std::vector<std::pair<std::int32_t, float>> q) {
  const double parent_score = parent < 0 ? 0.0 : score_[static_cast<std::size_t>(parent)];
  const std::int32_t parent_depth = parent < 0 ? 0 : depth(parent);
  level_.push_back(static_cast<std::int32_t>(nodes_.size()));
  score_.push_back(parent_score + log_p);
  depth_.push_back(parent_depth + 1);
  nodes_.push_back(DraftNode{token, parent, static_cast<float>(score_.back()), std::move(q)});
}

void DraftTreeBuilder::expand(std::int32_t node, std::span<const float> logits) {
  std::vector<float> l(logits.begin(), logits.end());
  const Sampler sampler(request_.sampling != nullptr ? *request_.sampling : SamplingParams{});
  sampler.prepare(l, path_history(node));
  if (sampled_) {
    auto q = sampler.distribution(l);
    const std::size_t pick = draw(q, *request_.rng);
    const std::int32_t token = q[pick].first;
    const double log_q = std::log(static_cast<double>(q[pick].second));
    add_child(node, token, log_q, std::move(q));
    return;
  }
  const double lse = log_sum_exp(l);
  if (!std::isfinite(lse)) return;
  std::vector<std::int32_t> ids(l.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto b = std::min<std::size_t>(static_cast<std::size_t>(request_.branching), ids.size());
  const auto logit = [&](std::int32_t id) { return l[static_cast<std::size_t>(id)]; };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(b), ids.end(), [&](std::int32_t x, std::int32_t y) {
    return logit(x) > logit(y) || (logit(x) == logit(y) && x < y);
  });
  for (std::size_t i = 0; i < b; ++i) add_child(node, ids[i], logit(ids[i]) - lse, {});
}

std::vector<std::int32_t> DraftTreeBuilder::frontier() {
  std::vector<std::int32_t> level = std::move(level_);
  level_.clear();
  std::sort(level.begin(), level.end(), [&](std::int32_t a, std::int32_t b) { return better(a, b); });
  std::vector<std::int32_t> out;
  for (std::int32_t n : level) {
    if (static_cast<std::int32_t>(out.size()) == request_.branching) break;
    if (depth(n) >= depth_limit_ || std::exp(score_[static_cast<std::size_t>(n)]) < min_confidence_) continue;
    std::int32_t rank = 0;
    for (std::int32_t m = 0; m < static_cast<std::int32_t>(nodes_.size()); ++m) rank += better(m, n) ? 1 : 0;
    if (rank < request_.max_nodes) out.push_back(n);
  }
  return out;
}

DraftTree DraftTreeBuilder::finish() const {
  std::vector<std::int32_t> order(nodes_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return better(a, b); });
  order.resize(std::min(order.size(), static_cast<std::size_t>(request_.max_nodes)));
  // Children lists of the kept nodes (slot 0: the root), each by decreasing score since
  // `order` is; then breadth-first from the root.
  std::vector<std::vector<std::int32_t>> children(nodes_.size() + 1);
  for (std::int32_t n : order) children[static_cast<std::size_t>(nodes_[static_cast<std::size_t>(n)].parent + 1)].push_back(n);
  DraftTree tree;
  std::vector<std::int32_t> new_index(nodes_.size(), -1);
  std::vector<std::int32_t> queue = children[0];
  for (std::size_t head = 0; head < queue.size(); ++head) {
    const std::int32_t n = queue[head];
    DraftNode node = nodes_[static_cast<std::size_t>(n)];
    node.parent = node.parent < 0 ? -1 : new_index[static_cast<std::size_t>(node.parent)];
    new_index[static_cast<std::size_t>(n)] = static_cast<std::int32_t>(tree.nodes.size());
    tree.nodes.push_back(std::move(node));
    const auto& kids = children[static_cast<std::size_t>(n + 1)];
    queue.insert(queue.end(), kids.begin(), kids.end());
  }
  return tree;
}

}  // namespace peregrine
