#include "peregrine/spec/pld_drafter.h"

#include <algorithm>

#include "draft_requests.h"

namespace peregrine {
namespace {

/// `length` tokens following position e of `tokens`; past the end, the continuation repeats
/// itself (it is what the sequence would say next if the occurrence's period held).
std::vector<std::int32_t> continuation(std::span<const std::int32_t> tokens, std::int32_t e, std::int32_t length) {
  const auto size = static_cast<std::int64_t>(tokens.size());
  std::vector<std::int32_t> c(static_cast<std::size_t>(length));
  for (std::int64_t i = 0; i < length; ++i) {
    const std::int64_t at = e + i;
    c[static_cast<std::size_t>(i)] = at < size ? tokens[static_cast<std::size_t>(at)] : c[static_cast<std::size_t>(at - size)];
  }
  return c;
}

/// A trie of `conts` (best first) filled level by level while nodes remain: parents before
/// children, siblings in the rank order of the first continuation reaching them.
DraftTree build_trie(const std::vector<std::vector<std::int32_t>>& conts, std::int32_t max_nodes) {
  DraftTree tree;
  std::vector<std::int32_t> at(conts.size(), -1);  // each continuation's node at the last level
  const std::size_t length = conts.empty() ? 0 : conts.front().size();
  for (std::size_t d = 0; d < length; ++d) {
    for (std::size_t c = 0; c < conts.size(); ++c) {
      const std::int32_t token = conts[c][d], parent = at[c];
      const auto same = std::find_if(tree.nodes.begin(), tree.nodes.end(),
                                     [&](const DraftNode& n) { return n.parent == parent && n.token == token; });
      if (same != tree.nodes.end()) {
        at[c] = static_cast<std::int32_t>(same - tree.nodes.begin());
        continue;
      }
      if (tree.size() == max_nodes) return tree;
      at[c] = static_cast<std::int32_t>(tree.size());
      tree.nodes.push_back(DraftNode{token, parent, 0.0f, {}});
    }
  }
  return tree;
}

}  // namespace

Expected<std::unique_ptr<PldDrafter>> PldDrafter::create(const PldOptions& options) {
  if (auto index = NgramIndex::create(options.min_ngram, options.max_ngram); !index) return index.status();
  return std::unique_ptr<PldDrafter>(new PldDrafter(options));
}

std::vector<std::vector<std::int32_t>> PldDrafter::continuations(const NgramIndex& index, std::int32_t wanted,
                                                                 std::int32_t length) const {
  std::vector<std::vector<std::int32_t>> conts;
  std::vector<std::int32_t> starts;
  for (std::int32_t n = index.max_n(); n >= index.min_n(); --n) {
    starts.clear();
    index.find(n, wanted == 1 ? 1 : kMaxScan, starts);
    for (std::int32_t e : starts) {
      auto c = continuation(index.tokens(), e, length);
      if (std::find(conts.begin(), conts.end(), c) != conts.end()) continue;
      conts.push_back(std::move(c));
      if (static_cast<std::int32_t>(conts.size()) == wanted) return conts;
    }
  }
  return conts;
}

Status PldDrafter::draft(std::span<const DraftRequest> requests, std::vector<DraftTree>& trees, ThreadPool&) {
  PEREGRINE_RETURN_IF_ERROR(validate_draft_requests(requests));
  trees.assign(requests.size(), DraftTree{});
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    auto it = index_.find(r.seq);
    if (it == index_.end()) it = index_.emplace(r.seq, *NgramIndex::create(options_.min_ngram, options_.max_ngram)).first;
    it->second.sync(r.tokens);
    trees[i] = build_trie(continuations(it->second, r.branching, r.max_nodes), r.max_nodes);
  }
  return Status::ok();
}

void PldDrafter::release(std::int32_t seq) { index_.erase(seq); }

}  // namespace peregrine
