// Captures the residual stream after the last decoder layer of a LlamaModel::forward (before
// the final norm) for every row of the batch: the "features" Medusa heads (Cai et al. 2024) and
// EAGLE (Li et al. 2024) draft from, once LlamaModel::output_norm has been applied.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/model/activation_observer.h"

namespace peregrine {

class FinalHiddenCapture final : public ActivationObserver {
 public:
  /// `n_layers`: the number of decoder layers the forward runs (its observe_hidden call with
  /// layer == n_layers carries the output of the last one).
  explicit FinalHiddenCapture(std::int64_t n_layers) : n_layers_(n_layers) {}
  void observe(std::int64_t, LinearInput, std::span<const float>, std::int64_t) override {}
  void observe_hidden(std::int64_t layer, std::span<const float> h, std::int64_t n_rows) override;

  /// [n_rows, dim] f32 of the last forward observed (empty before one).
  const std::vector<float>& values() const { return h_; }

 private:
  std::int64_t n_layers_;
  std::vector<float> h_;
};

}  // namespace peregrine
