// What a pruning method removes from a Linear weight W [rows = out, cols = in], and the masks
// that say which weights stay.
//
// Unstructured sparsity removes a fraction of the weights anywhere (magnitude: Janowsky 1989 /
// Han et al. 2015; Wanda: Sun et al., ICLR 2024; SparseGPT: Frantar & Alistarh, ICML 2023).
// N:M semi-structured sparsity keeps at most N nonzeros in every M consecutive input columns of a
// row (Mishra et al. 2021, "Accelerating Sparse Deep Neural Networks": NVIDIA's 2:4), the pattern
// that a kernel can turn into fewer bytes read (quant/sparse_nm.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "peregrine/core/status.h"

namespace peregrine {

/// One of: `sparsity` in (0, 1) (unstructured: that fraction of the weights removed), or an N:M
/// pattern (n > 0: keep n of every m consecutive columns of a row; sparsity ignored).
struct SparsityTarget {
  double sparsity = 0.0;
  int n = 0, m = 0;

  bool nm() const { return n > 0; }
  /// The fraction of weights removed: sparsity, or 1 − n/m.
  double removed_fraction() const { return nm() ? 1.0 - static_cast<double>(n) / m : sparsity; }
  /// "50%" or "2:4".
  std::string describe() const;
  /// Errors: kInvalidArgument — sparsity outside (0, 1) for unstructured; for N:M, m outside
  /// [2, 64] or n outside [1, m) ("a pattern N:M with N >= M removes nothing").
  Status validate() const;
};

/// Parses "2:4" into n = 2, m = 4 (validated). Errors: kInvalidArgument naming the text.
Expected<SparsityTarget> parse_nm_pattern(const std::string& text);

/// Which weights an unstructured target compares against each other.
enum class MaskScope : std::uint8_t {
  kPerRow,     // each output row loses round(sparsity · cols) weights (Wanda's per-output group)
  kPerTensor,  // the whole matrix loses round(sparsity · rows · cols) (magnitude pruning per layer)
};

/// The keep mask of W [rows, cols] from importance `scores` [rows, cols] f32 row-major (higher =
/// more important): 1 keeps a weight, 0 prunes it. Unstructured: the lowest scores within the
/// `scope` are pruned (ties broken by lower index first, so the result is deterministic). N:M:
/// in every whole group of m consecutive columns of a row the n highest scores stay (scope
/// ignored); when m does not divide cols, the last cols % m columns of each row all stay (a
/// tail the pattern cannot cover). Preconditions: t.validate() ok, scores.size() == rows · cols,
/// scores finite.
std::vector<std::uint8_t> select_mask(std::span<const float> scores, std::int64_t rows, std::int64_t cols,
                                      const SparsityTarget& t, MaskScope scope);

/// The same rule on one row's group of columns: keeps the n highest of `scores` [m] (N:M) or
/// all but the `n_pruned` lowest (unstructured), writing 1/0 into `keep` [scores.size()].
void keep_highest(std::span<const float> scores, std::int64_t n_pruned, std::span<std::uint8_t> keep);

/// Zeroes w where mask is 0. Precondition: w.size() == mask.size().
void apply_mask(std::span<float> w, std::span<const std::uint8_t> mask);

/// Whether every whole group of m consecutive columns of every row of w [rows, cols] has at most
/// n nonzeros (true for unstructured targets; a tail of cols % m columns is not checked).
bool follows_pattern(std::span<const float> w, std::int64_t rows, std::int64_t cols, const SparsityTarget& t);

}  // namespace peregrine
