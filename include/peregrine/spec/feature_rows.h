// The target's features (final hidden states after its final norm: what Medusa heads and EAGLE
// read) of a run of consecutive positions of one sequence, as the engine collects them between
// two draft() calls and as the EAGLE drafter keeps them until its KV cache holds their rows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace peregrine {

struct FeatureRows {
  std::int64_t begin = 0;     // position of the first row
  std::vector<float> values;  // [n, dim] f32

  std::int64_t size(std::int64_t dim) const { return static_cast<std::int64_t>(values.size()) / dim; }
  /// Stores `rows` [n, dim] as positions first .. first + n - 1. Rows at or past `first`
  /// already held are replaced (a recomputation); a gap after the held rows, or a first
  /// position before `begin`, drops every held row first.
  void put(std::int64_t first, std::span<const float> rows, std::int64_t dim);
  /// The row of position p ([dim] f32), or an empty span when it is not held.
  std::span<const float> row(std::int64_t p, std::int64_t dim) const;
  /// Drops the rows of positions < p.
  void drop_before(std::int64_t p, std::int64_t dim);
  void clear() { values.clear(); }
};

}  // namespace peregrine
