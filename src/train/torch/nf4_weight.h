// An NF4 weight (quant/nf4.h) inside libtorch, as QLoRA keeps its frozen base (Dettmers et al.
// 2023, §3): the packed 4-bit codes and the 8-bit double-quantized absmax codes as uint8 tensors,
// the group scales and mean as f32, dequantized by table lookups in every forward — no f32 copy
// of the weight is kept between forwards.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "peregrine/quant/nf4.h"

namespace peregrine::train {

class Nf4Weight {
 public:
  /// Copies the codes and constants of `t` into torch tensors.
  static Nf4Weight from(const Nf4Tensor& t);

  /// The weight [shape] f32: codebook[code] · (absmax_map[absmax code] · group scale + mean),
  /// the values nf4_dequantize gives (up to the f32 rounding of one multiply-add).
  torch::Tensor dequantize() const;

  /// x ↦ x·Wᵀ with W dequantized now (W [out, in], x [..., in]).
  torch::Tensor project(const torch::Tensor& x) const { return torch::matmul(x, dequantize().t()); }

 private:
  std::vector<std::int64_t> shape_;
  std::int64_t numel_ = 0;
  torch::Tensor codes_;         // uint8 [ceil(numel / 2)], high nibble first
  torch::Tensor absmax_codes_;  // uint8 [n_blocks]
  torch::Tensor group_absmax_;  // f32 [n_groups]
  float mean_ = 0.0f;
};

}  // namespace peregrine::train
