// The activation of a gated FFN: a model's property (model/spec/model_config.h) that the
// activation kernels (kernels/cpu/elementwise/elementwise.h gated_activation) take as an argument.
#pragma once

#include <cstdint>

namespace peregrine {

/// The activation of the gated FFN: down(act(gate(x)) · up(x)).
enum class FfnActivation : std::uint8_t {
  kSilu,      // SwiGLU (Llama, Qwen, Phi-3): config.json hidden_act "silu"
  kGeluTanh,  // GeGLU with the tanh GELU (Gemma 2): "gelu_pytorch_tanh"
};

}  // namespace peregrine
