#include "peregrine/kernels/cpu/matmul/bf16_activations.h"

#include <atomic>

namespace peregrine {
namespace {

std::atomic<Bf16Activations> g_mode{Bf16Activations::kBf16};

}  // namespace

void set_bf16_activations(Bf16Activations mode) { g_mode.store(mode, std::memory_order_relaxed); }

Bf16Activations bf16_activations() { return g_mode.load(std::memory_order_relaxed); }

}  // namespace peregrine
