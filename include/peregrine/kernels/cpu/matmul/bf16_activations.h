// What matmul multiplies BF16 weights by: the activations rounded to BF16 (the default, as
// PyTorch's and llama.cpp's BF16 linears compute; it lets the prefill GEMM run as VDPBF16PS
// pair dot products, gemm_bf16_dot.h, at twice the f32 FMA rate) or the f32 activations as
// given (exact products, the slower f32 GEMM). A process-wide setting, as PyTorch's
// torch.set_float32_matmul_precision is; the CLI's --bf16-activations sets it.
//
// Quality (stories260K converted to BF16 on load, tinystories_valid_excerpt, 15,554 tokens,
// against its f32 weights): mean KL 1.91e-4 nats with f32 activations, 2.81e-4 with BF16 ones
// (perplexity 13.0942 / 13.0975, f32 13.0692).
#pragma once

namespace peregrine {

enum class Bf16Activations {
  kBf16,  // x rounded to BF16 (nearest even) on every path, batch-size independent
  kF32,   // x as given
};

/// Sets the mode for every later matmul of this process (thread-safe; takes effect at the next
/// call).
void set_bf16_activations(Bf16Activations mode);

/// The current mode (kBf16 unless set).
Bf16Activations bf16_activations();

/// Sets a mode for the lifetime of this object, then restores the previous one (tests).
class ScopedBf16Activations {
 public:
  explicit ScopedBf16Activations(Bf16Activations mode) : previous_(bf16_activations()) { set_bf16_activations(mode); }
  ~ScopedBf16Activations() { set_bf16_activations(previous_); }
  ScopedBf16Activations(const ScopedBf16Activations&) = delete;
  ScopedBf16Activations& operator=(const ScopedBf16Activations&) = delete;

 private:
  Bf16Activations previous_;
};

}  // namespace peregrine
