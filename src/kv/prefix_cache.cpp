#include "peregrine/kv/prefix_cache.h"

#include <algorithm>
#include <queue>
#include <tuple>

namespace peregrine {
namespace {

// The first position block whose window-group blocks the next position after `depth` blocks
// still sees: (depth · bs - window + 1) / bs, at least 0.
std::int64_t first_seen_block(std::int64_t depth, std::int64_t window, std::int32_t bs) {
  return std::max<std::int64_t>(0, (depth * bs - window + 1) / bs);
}

}  // namespace

PrefixCache::PrefixCache(KvCache& cache) : cache_(&cache) {}

PrefixCache::~PrefixCache() { clear(); }

// Block i's tokens; the first block's key carries the namespace in front (so keys of different
// namespaces differ, and the base's keys, one element shorter, differ from all of them).
std::vector<std::int32_t> PrefixCache::block_key(std::span<const std::int32_t> tokens, std::size_t i, std::int32_t ns) const {
  const auto bs = static_cast<std::size_t>(cache_->block_size());
  const auto t = tokens.subspan(i * bs, bs);
  std::vector<std::int32_t> key;
  key.reserve(bs + 1);
  if (i == 0 && ns >= 0) key.push_back(ns);
  key.insert(key.end(), t.begin(), t.end());
  return key;
}

// The longest prefix of `path` (in blocks) whose window groups hold every block its next
// position sees; all of it when the cache has no window group.
std::int64_t PrefixCache::window_depth(const std::vector<Node*>& path) const {
  for (auto d = static_cast<std::int64_t>(path.size()); d > 0; --d) {
    bool held = true;
    for (std::int32_t g = 0; g < cache_->n_groups() && held; ++g) {
      const std::int64_t window = cache_->group_window(g);
      for (std::int64_t i = window > 0 ? first_seen_block(d, window, cache_->block_size()) : d; i < d && held; ++i) {
        held = path[static_cast<std::size_t>(i)]->blocks[static_cast<std::size_t>(g)] != kReleasedBlock;
      }
    }
    if (held) return d;
  }
  return 0;
}

std::vector<std::int32_t> PrefixCache::match(std::span<const std::int32_t> tokens, std::int64_t max_blocks, std::int32_t ns) {
  const std::int64_t full = static_cast<std::int64_t>(tokens.size()) / cache_->block_size();
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(0, std::min(full, max_blocks)));
  ++clock_;
  std::vector<Node*> path;
  Node* node = &root_;
  for (std::size_t i = 0; i < n; ++i) {
    const auto it = node->children.find(block_key(tokens, i, ns));
    if (it == node->children.end()) break;
    node = it->second.get();
    path.push_back(node);
  }
  const std::int64_t depth = window_depth(path);
  std::vector<std::int32_t> blocks;
  for (std::int64_t i = 0; i < depth; ++i) {
    Node& hit = *path[static_cast<std::size_t>(i)];
    hit.last_used = clock_;
    for (std::int32_t g = 0; g < cache_->n_groups(); ++g) {
      const std::int64_t window = cache_->group_window(g);
      const bool seen = window == 0 || i >= first_seen_block(depth, window, cache_->block_size());
      const std::int32_t id = seen ? hit.blocks[static_cast<std::size_t>(g)] : kReleasedBlock;
      if (id != kReleasedBlock) cache_->pool().ref(id);
      blocks.push_back(id);
    }
  }
  tokens_queried_ += static_cast<std::int64_t>(tokens.size());
  tokens_hit_ += depth * cache_->block_size();
  return blocks;
}

void PrefixCache::insert(std::span<const std::int32_t> tokens, std::span<const std::int32_t> blocks, std::int32_t ns) {
  const auto n_groups = static_cast<std::size_t>(cache_->n_groups());
  const std::size_t n = std::min(tokens.size() / static_cast<std::size_t>(cache_->block_size()), blocks.size() / n_groups);
  ++clock_;
  Node* node = &root_;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::int32_t> key = block_key(tokens, i, ns);
    auto& child = node->children[key];
    const auto live = blocks.subspan(i * n_groups, n_groups);
    if (!child) {
      child = std::make_unique<Node>(Node{{live.begin(), live.end()}, node, std::move(key), 0, {}});
      for (std::int32_t id : live) {
        if (id != kReleasedBlock) cache_->pool().ref(id);
      }
      n_cached_ += n_blocks(*child);
    } else {
      for (std::size_t g = 0; g < n_groups; ++g) {
        std::int32_t& cached = child->blocks[g];
        if (live[g] == kReleasedBlock || cached == live[g]) continue;
        if (cached != kReleasedBlock && cache_->pool().ref_count(cached) > 1) continue;
        // Only the cache holds the node's copy (or it has none): adopt the live one and free the
        // duplicate, so a node never sits, unevictable, above the blocks of a running sequence.
        if (cached != kReleasedBlock) {
          cache_->pool().unref(cached);
        } else {
          ++n_cached_;
        }
        cache_->pool().ref(live[g]);
        cached = live[g];
      }
    }
    node = child.get();
    node->last_used = clock_;
  }
}

bool PrefixCache::only_cached(const Node& node) const {
  return std::all_of(node.blocks.begin(), node.blocks.end(),
                     [&](std::int32_t id) { return id == kReleasedBlock || cache_->pool().ref_count(id) == 1; });
}

std::int64_t PrefixCache::n_blocks(const Node& node) {
  return static_cast<std::int64_t>(node.blocks.size()) - std::count(node.blocks.begin(), node.blocks.end(), kReleasedBlock);
}

std::int64_t PrefixCache::unref_blocks(const Node& node) {
  std::int64_t n = 0;
  for (std::int32_t id : node.blocks) {
    if (id == kReleasedBlock) continue;
    cache_->pool().unref(id);
    ++n;
  }
  n_cached_ -= n;
  return n;
}

std::int64_t PrefixCache::evict(std::int64_t n) {
  // Min-heap of evictable leaves by last use; a parent whose last child goes joins the heap.
  using Entry = std::tuple<std::uint64_t, Node*>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> leaves;
  const auto offer = [&](Node* node) {
    if (node != &root_ && node->children.empty() && only_cached(*node)) leaves.emplace(node->last_used, node);
  };
  std::vector<Node*> stack{&root_};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    offer(node);
    for (auto& [key, child] : node->children) stack.push_back(child.get());
  }
  std::int64_t freed = 0;
  while (freed < n && !leaves.empty()) {
    Node* leaf = std::get<1>(leaves.top());
    leaves.pop();
    Node* parent = leaf->parent;
    freed += unref_blocks(*leaf);
    parent->children.erase(parent->children.find(leaf->key));  // destroys leaf
    offer(parent);
  }
  return freed;
}

void PrefixCache::clear() {
  std::vector<Node*> stack{&root_};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    unref_blocks(*node);
    for (auto& [key, child] : node->children) stack.push_back(child.get());
  }
  root_.children.clear();
  n_cached_ = 0;
}

std::int64_t PrefixCache::n_cached_blocks() const { return n_cached_; }

// Evictable blocks under `node`: a node goes once all its children have gone and only the
// cache references its blocks. `all` says whether the whole subtree can go.
std::int64_t PrefixCache::count_evictable(const Node& node, bool& all) const {
  std::int64_t n = 0;
  all = true;
  for (const auto& [key, child] : node.children) {
    bool child_all = false;
    n += count_evictable(*child, child_all);
    all = all && child_all;
  }
  if (&node == &root_) return n;
  all = all && only_cached(node);
  return n + (all ? n_blocks(node) : 0);
}

std::int64_t PrefixCache::n_evictable_blocks() const {
  bool all = false;
  return count_evictable(root_, all);
}

std::int64_t PrefixCache::tokens_queried() const { return tokens_queried_; }
std::int64_t PrefixCache::tokens_hit() const { return tokens_hit_; }

}  // namespace peregrine
