#include "peregrine/quant/lora_merge.h"

#include <cmath>
#include <string>
#include <vector>

namespace peregrine {

Status merge_lora(FloatModel& m, const LoraAdapter& adapter, float user_scale) {
  if (!std::isfinite(user_scale)) return invalid_argument("LoRA scale " + std::to_string(user_scale) + " is not a finite number");
  for (const auto& [name, p] : adapter.tensors) {
    if (!m.has(name)) return invalid_argument("LoRA adapter " + adapter.path + " adapts " + name + ", which the model does not have");
    const std::vector<std::int64_t> expected = {p.out, p.in};
    if (m.shape(name) != expected) {
      return invalid_argument("LoRA adapter " + adapter.path + ": " + name + " is [" + std::to_string(p.out) + ", " + std::to_string(p.in) +
                              "] in the adapter, not the model's shape");
    }
    if (p.rank < 1 || p.a.size() != static_cast<std::size_t>(p.rank * p.in) || p.b.size() != static_cast<std::size_t>(p.out * p.rank)) {
      return invalid_argument("LoRA adapter " + adapter.path + ": the A / B of " + name + " do not hold rank " + std::to_string(p.rank) +
                              " × their shape's values");
    }
  }
  const float s = user_scale * adapter.scale();
  for (const auto& [name, p] : adapter.tensors) {
    std::span<float> w = m.tensor(name);
    const auto in = static_cast<std::size_t>(p.in), rank = static_cast<std::size_t>(p.rank);
    for (std::size_t o = 0; o < static_cast<std::size_t>(p.out); ++o) {
      float* row = w.data() + o * in;
      for (std::size_t k = 0; k < rank; ++k) {
        const float c = s * p.b[o * rank + k];
        const float* a = p.a.data() + k * in;
        for (std::size_t i = 0; i < in; ++i) row[i] += c * a[i];
      }
    }
  }
  return Status::ok();
}

}  // namespace peregrine
