#include "peregrine/kv/prefix_cache.h"

#include <algorithm>
#include <queue>
#include <tuple>

namespace peregrine {

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

std::vector<std::int32_t> PrefixCache::match(std::span<const std::int32_t> tokens, std::int64_t max_blocks, std::int32_t ns) {
  const std::int64_t full = static_cast<std::int64_t>(tokens.size()) / cache_->block_size();
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(0, std::min(full, max_blocks)));
  ++clock_;
  std::vector<std::int32_t> blocks;
  Node* node = &root_;
  for (std::size_t i = 0; i < n; ++i) {
    const auto it = node->children.find(block_key(tokens, i, ns));
    if (it == node->children.end()) break;
    node = it->second.get();
    node->last_used = clock_;
    cache_->pool().ref(node->block);
    blocks.push_back(node->block);
  }
  tokens_queried_ += static_cast<std::int64_t>(tokens.size());
  tokens_hit_ += static_cast<std::int64_t>(blocks.size()) * cache_->block_size();
  return blocks;
}

void PrefixCache::insert(std::span<const std::int32_t> tokens, std::span<const std::int32_t> blocks, std::int32_t ns) {
  const std::size_t n = std::min(tokens.size() / static_cast<std::size_t>(cache_->block_size()), blocks.size());
  ++clock_;
  Node* node = &root_;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::int32_t> key = block_key(tokens, i, ns);
    auto& child = node->children[key];
    if (!child) {
      child = std::make_unique<Node>(Node{blocks[i], node, std::move(key), 0, {}});
      cache_->pool().ref(blocks[i]);
      ++n_cached_;
    } else if (child->block != blocks[i] && cache_->pool().ref_count(child->block) == 1) {
      // Only the cache holds the node's copy: adopt the live one and free the duplicate, so a
      // node never sits, unevictable, above the blocks of a running sequence.
      cache_->pool().unref(child->block);
      cache_->pool().ref(blocks[i]);
      child->block = blocks[i];
    }
    node = child.get();
    node->last_used = clock_;
  }
}

std::int64_t PrefixCache::evict(std::int64_t n) {
  // Min-heap of evictable leaves by last use; a parent whose last child goes joins the heap.
  using Entry = std::tuple<std::uint64_t, Node*>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> leaves;
  const auto offer = [&](Node* node) {
    if (node != &root_ && node->children.empty() && cache_->pool().ref_count(node->block) == 1) {
      leaves.emplace(node->last_used, node);
    }
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
    cache_->pool().unref(leaf->block);
    parent->children.erase(parent->children.find(leaf->key));  // destroys leaf
    --n_cached_;
    ++freed;
    offer(parent);
  }
  return freed;
}

void PrefixCache::clear() {
  std::vector<Node*> stack{&root_};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    if (node != &root_) cache_->pool().unref(node->block);
    for (auto& [key, child] : node->children) stack.push_back(child.get());
  }
  root_.children.clear();
  n_cached_ = 0;
}

std::int64_t PrefixCache::n_cached_blocks() const { return n_cached_; }

// Evictable blocks under `node`: a node goes once all its children have gone and only the
// cache references its block. `all` says whether the whole subtree can go.
std::int64_t PrefixCache::count_evictable(const Node& node, bool& all) const {
  std::int64_t n = 0;
  all = true;
  for (const auto& [key, child] : node.children) {
    bool child_all = false;
    n += count_evictable(*child, child_all);
    all = all && child_all;
  }
  if (&node == &root_) return n;
  all = all && cache_->pool().ref_count(node.block) == 1;
  return n + (all ? 1 : 0);
}

std::int64_t PrefixCache::n_evictable_blocks() const {
  bool all = false;
  return count_evictable(root_, all);
}

std::int64_t PrefixCache::tokens_queried() const { return tokens_queried_; }
std::int64_t PrefixCache::tokens_hit() const { return tokens_hit_; }

}  // namespace peregrine
