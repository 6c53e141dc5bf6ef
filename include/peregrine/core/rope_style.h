// How RoPE (Su et al. 2021, RoFormer) pairs the dims of a head: a model's property
// (model/spec/model_config.h) that the RoPE kernels (kernels/cpu/elementwise/elementwise.h, kernels/cuda)
// take as an argument.
#pragma once

#include <cstdint>

namespace peregrine {

/// How RoPE pairs the dims of a head.
enum class RopeStyle : std::uint8_t {
  kInterleaved,  // pairs (2i, 2i+1): Meta/llama2.c/llama-arch GGUF
  kNeox,         // pairs (i, i + hd/2): Hugging Face rotate_half, NEOX-type GGUF architectures
};

}  // namespace peregrine
