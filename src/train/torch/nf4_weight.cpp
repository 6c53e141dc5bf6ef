#include "train/torch/nf4_weight.h"

namespace peregrine::train {
namespace {

torch::Tensor bytes(const std::vector<std::uint8_t>& v) {
  return torch::from_blob(const_cast<std::uint8_t*>(v.data()), {static_cast<std::int64_t>(v.size())}, torch::kUInt8).clone();
}

const torch::Tensor& codebook() {
  static const torch::Tensor t = torch::tensor(std::vector<float>(kNf4Codebook.begin(), kNf4Codebook.end()));
  return t;
}

const torch::Tensor& absmax_map() {
  static const torch::Tensor t = torch::tensor(std::vector<float>(nf4_absmax_map().begin(), nf4_absmax_map().end()));
  return t;
}

}  // namespace

Nf4Weight Nf4Weight::from(const Nf4Tensor& t) {
  Nf4Weight w;
  w.shape_ = t.shape;
  w.numel_ = t.numel;
  w.codes_ = bytes(t.codes);
  w.absmax_codes_ = bytes(t.absmax_codes);
  w.group_absmax_ = torch::tensor(t.group_absmax);
  w.mean_ = t.absmax_mean;
  return w;
}

torch::Tensor Nf4Weight::dequantize() const {
  const std::int64_t blocks = absmax_codes_.size(0);
  const torch::Tensor scale = group_absmax_.repeat_interleave(kNf4AbsmaxGroup).slice(0, 0, blocks);
  const torch::Tensor absmax = absmax_map().index_select(0, absmax_codes_.to(torch::kInt64)) * scale + mean_;  // [blocks]
  const torch::Tensor nibbles = torch::stack({torch::bitwise_right_shift(codes_, 4), torch::bitwise_and(codes_, 15)}, 1).flatten();
  torch::Tensor values = codebook().index_select(0, nibbles.to(torch::kInt64));  // [2 · bytes]
  values = torch::nn::functional::pad(values, torch::nn::functional::PadFuncOptions({0, blocks * kNf4BlockSize - values.size(0)}));
  return (values.view({blocks, kNf4BlockSize}) * absmax.unsqueeze(1)).flatten().slice(0, 0, numel_).view(shape_);
}

}  // namespace peregrine::train
