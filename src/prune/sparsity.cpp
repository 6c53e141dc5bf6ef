#include "peregrine/prune/sparsity.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

namespace peregrine {
namespace {

// round(fraction · count) as an index count.
std::int64_t rounded_count(double fraction, std::int64_t count) {
  return std::llround(fraction * static_cast<double>(count));
}

// Indices of `scores` ordered by increasing score, ties by index.
std::vector<std::int64_t> ascending(std::span<const float> scores) {
  std::vector<std::int64_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&scores](auto a, auto b) {
    return scores[static_cast<std::size_t>(a)] < scores[static_cast<std::size_t>(b)];
  });
  return order;
}

}  // namespace

std::string SparsityTarget::describe() const {
  if (nm()) return std::to_string(n) + ":" + std::to_string(m);
  return std::to_string(std::llround(sparsity * 100.0)) + "%";
}

Status SparsityTarget::validate() const {
  if (nm()) {
    if (m < 2 || m > 64) return invalid_argument("pattern " + describe() + ": M must be in [2, 64]");
    if (n >= m) return invalid_argument("pattern " + describe() + ": N must be below M (N:M keeps N of every M weights; N >= M removes nothing)");
    return Status::ok();
  }
  if (!(sparsity > 0.0 && sparsity < 1.0)) {
    return invalid_argument("sparsity " + std::to_string(sparsity) + " is outside (0, 1)");
  }
  return Status::ok();
}

Expected<SparsityTarget> parse_nm_pattern(const std::string& text) {
  const auto colon = text.find(':');
  SparsityTarget t;
  const auto parse = [](std::string_view s, int& out) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size() && !s.empty();
  };
  if (colon == std::string::npos || !parse(std::string_view(text).substr(0, colon), t.n) ||
      !parse(std::string_view(text).substr(colon + 1), t.m) || t.n < 1) {
    return invalid_argument("pattern '" + text + "' is not N:M with positive integers (e.g. 2:4)");
  }
  PEREGRINE_RETURN_IF_ERROR(t.validate());
  return t;
}

void keep_highest(std::span<const float> scores, std::int64_t n_pruned, std::span<std::uint8_t> keep) {
  std::fill(keep.begin(), keep.end(), std::uint8_t{1});
  const std::vector<std::int64_t> order = ascending(scores);
  for (std::int64_t i = 0; i < n_pruned; ++i) keep[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = 0;
}

std::vector<std::uint8_t> select_mask(std::span<const float> scores, std::int64_t rows, std::int64_t cols,
                                      const SparsityTarget& t, MaskScope scope) {
  std::vector<std::uint8_t> keep(scores.size(), 1);
  if (!t.nm() && scope == MaskScope::kPerTensor) {
    keep_highest(scores, rounded_count(t.sparsity, rows * cols), keep);
    return keep;
  }
  const std::int64_t group = t.nm() ? t.m : cols;
  const std::int64_t pruned = t.nm() ? t.m - t.n : rounded_count(t.sparsity, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c + group <= cols; c += group) {  // an N:M tail of < m columns stays
      const auto at = static_cast<std::size_t>(r * cols + c), len = static_cast<std::size_t>(group);
      keep_highest(scores.subspan(at, len), pruned, std::span(keep).subspan(at, len));
    }
  }
  return keep;
}

void apply_mask(std::span<float> w, std::span<const std::uint8_t> mask) {
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (mask[i] == 0) w[i] = 0.0f;
  }
}

bool follows_pattern(std::span<const float> w, std::int64_t rows, std::int64_t cols, const SparsityTarget& t) {
  if (!t.nm()) return true;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c + t.m <= cols; c += t.m) {
      const auto group = w.subspan(static_cast<std::size_t>(r * cols + c), static_cast<std::size_t>(t.m));
      if (std::count_if(group.begin(), group.end(), [](float v) { return v != 0.0f; }) > t.n) return false;
    }
  }
  return true;
}

}  // namespace peregrine
