#include "peregrine/spec/ngram_index.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace peregrine {
namespace {

// SplitMix64's finalizer (Steele et al. 2014): spreads every input bit over the word.
std::uint64_t mix(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

Expected<NgramIndex> NgramIndex::create(std::int32_t min_n, std::int32_t max_n) {
  if (min_n < 1 || min_n > max_n || max_n > kMaxNgram) {
    return invalid_argument("n-gram lengths must satisfy 1 <= min <= max <= " + std::to_string(kMaxNgram) + " (got min " +
                            std::to_string(min_n) + ", max " + std::to_string(max_n) + ")");
  }
  return NgramIndex(min_n, max_n);
}

NgramIndex::NgramIndex(std::int32_t min_n, std::int32_t max_n)
    : min_n_(min_n), max_n_(max_n), by_n_(static_cast<std::size_t>(max_n - min_n + 1)) {}

std::uint64_t NgramIndex::key(std::int64_t end, std::int32_t n) const {
  std::uint64_t h = 0;
  for (std::int64_t i = end - n; i < end; ++i) h = mix(h ^ static_cast<std::uint32_t>(tokens_[static_cast<std::size_t>(i)]));
  return h;
}

void NgramIndex::add_position(std::int64_t e) {
  for (std::int32_t n = min_n_; n <= std::min<std::int64_t>(max_n_, e); ++n) {
    by_n_[static_cast<std::size_t>(n - min_n_)][key(e, n)].push_back(static_cast<std::int32_t>(e));
  }
}

void NgramIndex::remove_position(std::int64_t e) {
  for (std::int32_t n = min_n_; n <= std::min<std::int64_t>(max_n_, e); ++n) {
    auto& map = by_n_[static_cast<std::size_t>(n - min_n_)];
    const auto it = map.find(key(e, n));
    assert(it != map.end() && it->second.back() == e);
    it->second.pop_back();
    if (it->second.empty()) map.erase(it);
  }
}

void NgramIndex::sync(std::span<const std::int32_t> tokens) {
  const auto common = static_cast<std::int64_t>(
      std::mismatch(tokens_.begin(), tokens_.end(), tokens.begin(), tokens.end()).first - tokens_.begin());
  // Position e is indexed once tokens_[e] exists; drop the newest first (each is then the back
  // of its lists).
  for (auto e = static_cast<std::int64_t>(tokens_.size()) - 1; e >= std::max<std::int64_t>(common, 1); --e) remove_position(e);
  tokens_.resize(static_cast<std::size_t>(common));
  for (auto e = common; e < static_cast<std::int64_t>(tokens.size()); ++e) {
    tokens_.push_back(tokens[static_cast<std::size_t>(e)]);
    if (e >= 1) add_position(e);
  }
}

void NgramIndex::find(std::int32_t n, std::int32_t max_results, std::vector<std::int32_t>& out) const {
  const auto size = static_cast<std::int64_t>(tokens_.size());
  if (n < min_n_ || n > max_n_ || n >= size) return;
  const auto& map = by_n_[static_cast<std::size_t>(n - min_n_)];
  const auto it = map.find(key(size, n));
  if (it == map.end()) return;
  const auto suffix = tokens_.end() - n;
  std::int32_t found = 0;
  for (auto e = it->second.rbegin(); e != it->second.rend() && found < max_results; ++e) {
    if (std::equal(suffix, tokens_.end(), tokens_.begin() + (*e - n))) {
      out.push_back(*e);
      ++found;
    }
  }
}

}  // namespace peregrine
