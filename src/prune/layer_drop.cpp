#include "peregrine/prune/layer_drop.h"

#include <cmath>
#include <numbers>
#include <string>

#include "peregrine/quant/calibration.h"

namespace peregrine {
namespace {

// Keeps the hidden states of the current forward and adds the distances of its tokens.
class DistanceObserver final : public ActivationObserver {
 public:
  DistanceObserver(std::int64_t n_layers, std::int64_t n)
      : n_layers_(n_layers), n_(n), hidden_(static_cast<std::size_t>(n_layers + 1)),
        sum_(static_cast<std::size_t>(n_layers - n + 1)) {}

  void observe(std::int64_t, LinearInput, std::span<const float>, std::int64_t) override {}

  void observe_hidden(std::int64_t layer, std::span<const float> h, std::int64_t n_rows) override {
    hidden_[static_cast<std::size_t>(layer)].assign(h.begin(), h.end());
    if (layer == n_layers_) add_distances(n_rows);
  }

  std::vector<double> mean() const {
    std::vector<double> out(sum_.size());
    for (std::size_t l = 0; l < out.size(); ++l) out[l] = sum_[l] / static_cast<double>(tokens_);
    return out;
  }

 private:
  void add_distances(std::int64_t n_rows) {
    const std::int64_t dim = static_cast<std::int64_t>(hidden_[0].size()) / n_rows;
    for (std::size_t l = 0; l < sum_.size(); ++l) {
      const auto& a = hidden_[l];
      const auto& b = hidden_[l + static_cast<std::size_t>(n_)];
      for (std::int64_t t = 0; t < n_rows; ++t) {
        double ab = 0, aa = 0, bb = 0;
        for (std::int64_t j = t * dim; j < (t + 1) * dim; ++j) {
          const auto i = static_cast<std::size_t>(j);
          ab += static_cast<double>(a[i]) * b[i];
          aa += static_cast<double>(a[i]) * a[i];
          bb += static_cast<double>(b[i]) * b[i];
        }
        const double cosine = aa > 0 && bb > 0 ? std::clamp(ab / std::sqrt(aa * bb), -1.0, 1.0) : 1.0;
        sum_[l] += std::acos(cosine) / std::numbers::pi;
      }
    }
    tokens_ += n_rows;
  }

  std::int64_t n_layers_, n_;
  std::vector<std::vector<float>> hidden_;  // [n_layers + 1][n_rows * dim]
  std::vector<double> sum_;                 // [n_layers − n + 1]
  std::int64_t tokens_ = 0;
};

// "blk.L." → L, or -1 for a tensor outside the blocks.
std::int64_t block_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::stoll(name.substr(4, name.find('.', 4) - 4));
}

}  // namespace

Expected<std::vector<double>> block_distances(const LlamaModel& model, std::span<const std::vector<std::int32_t>> chunks,
                                              std::int64_t n, ThreadPool& pool) {
  const std::int64_t n_layers = model.config().n_layers;
  if (n < 1 || n >= n_layers) {
    return invalid_argument("layer-drop: " + std::to_string(n) + " blocks is outside [1, " + std::to_string(n_layers) + ")");
  }
  DistanceObserver observer(n_layers, n);
  PEREGRINE_RETURN_IF_ERROR(observe_chunks(model, chunks, observer, n_layers, pool));
  return observer.mean();
}

void drop_blocks(FloatModel& fm, std::int64_t first, std::int64_t n) {
  const std::int64_t n_layers = fm.config().n_layers;
  const std::vector<std::string> names = fm.names();
  for (const std::string& name : names) {
    const std::int64_t l = block_of(name);
    if (l >= first && l < first + n) fm.erase(name);
  }
  for (std::int64_t l = first + n; l < n_layers; ++l) {  // upwards: block l − n is free by now
    const std::string prefix = "blk." + std::to_string(l) + ".";
    for (const std::string& name : names) {
      if (name.rfind(prefix, 0) == 0) fm.rename(name, "blk." + std::to_string(l - n) + "." + name.substr(prefix.size()));
    }
  }
  fm.config().n_layers -= n;
}

}  // namespace peregrine
