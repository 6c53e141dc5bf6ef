#include "peregrine/kernels/cpu/matmul/quantize_activations.h"

#include <algorithm>
#include <cmath>

#include "peregrine/quant/fp16.h"
#include "peregrine/quant/unpack_int8.h"

#ifndef PEREGRINE_KERNELS_CPU_QUANTIZE_ACTIVATIONS_SCALES
#define PEREGRINE_KERNELS_CPU_QUANTIZE_ACTIVATIONS_SCALES
namespace peregrine::quantize_activations_detail {

// One block's multiplier and scales as ggml computes them (quantize_row_q8_0 / _q8_1 / _q8_K and
// the repacked variants): q = nearest-even(x · inv) with inv = 127 / amax; Q8_0's d is stored in
// f16 (block_q8_0), Q8_1's sum s = f16(amax/127 · Σq) (block_q8_1, with the unrounded scale),
// and Q8_K's d = 1 / inv in f32. Where f16 would overflow (|v| >= 65520, e.g. s of a block
// whose amax passes 2047) the value stays f32, where ggml's would become infinite.
struct BlockScales {
  float inv = 0.0f, d = 0.0f;
};

inline float rounded_to_f16(float v) { return std::fabs(v) < 65520.0f ? f16_to_f32(f32_to_f16(v)) : v; }

inline BlockScales block_scales(float amax, std::int64_t block) {
  if (amax == 0.0f) return {};
  const float inv = 127.0f / amax;
  return {inv, block == kActivationBlockQ8_0 ? rounded_to_f16(amax / 127.0f) : 1.0f / inv};
}

inline float q8_1_sum(float amax, std::int32_t sum_q) { return rounded_to_f16(amax / 127.0f * static_cast<float>(sum_q)); }

}  // namespace peregrine::quantize_activations_detail
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul/quantize_activations.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Blocks [0, n_blocks) of `block` values (a multiple of 32) from x → q (block each), d (one
// each) and, for blocks of 32, s (one each).
void QuantizeBlocks(const float* x, std::int64_t n_blocks, std::int64_t block, std::int8_t* q, float* d, float* s) {
  const hn::CappedTag<float, kQuantBlock> df;
  const hn::Rebind<std::int32_t, decltype(df)> di32;
  const hn::Rebind<std::int8_t, decltype(df)> di8;
  const std::size_t n = hn::Lanes(df), values = static_cast<std::size_t>(block);
  for (std::int64_t b = 0; b < n_blocks; ++b, x += block, q += block) {
    auto amax = hn::Zero(df);
    for (std::size_t j = 0; j < values; j += n) amax = hn::Max(amax, hn::Abs(hn::LoadU(df, x + j)));
    const float max_abs = hn::GetLane(hn::MaxOfLanes(df, amax));
    const auto scales = quantize_activations_detail::block_scales(max_abs, block);
    const auto inv = hn::Set(df, scales.inv);
    auto sum = hn::Zero(di32);
    for (std::size_t j = 0; j < values; j += n) {
      const auto qi = hn::NearestInt(hn::Mul(hn::LoadU(df, x + j), inv));
      sum = hn::Add(sum, qi);
      hn::StoreU(hn::DemoteTo(di8, qi), di8, q + j);
    }
    d[b] = scales.d;
    if (block == kActivationBlockQ8_0) s[b] = quantize_activations_detail::q8_1_sum(max_abs, hn::GetLane(hn::SumOfLanes(di32, sum)));
  }
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {
namespace {

HWY_EXPORT(QuantizeBlocks);

void resize(QuantizedActivations& out, std::int64_t n_tokens, std::int64_t in, std::int64_t block) {
  out.n_tokens = n_tokens;
  out.in = in;
  out.block = block;
  out.q.resize(static_cast<std::size_t>(n_tokens * in));
  out.d.resize(static_cast<std::size_t>(n_tokens * in / block));
  out.s.resize(block == kActivationBlockQ8_0 ? out.d.size() : 0);
}

}  // namespace

void quantize_activations(std::span<const float> x, std::int64_t n_tokens, std::int64_t in,
                          QuantizedActivations& out, ThreadPool& pool,
                          std::int64_t min_parallel_values, std::int64_t block) {
  resize(out, n_tokens, in, block);
  const std::int64_t blocks_per_row = in / block;
  auto rows = [&](std::int64_t begin, std::int64_t end) {
    HWY_DYNAMIC_DISPATCH(QuantizeBlocks)(x.data() + begin * in, (end - begin) * blocks_per_row, block,
                                         out.q.data() + begin * in, out.d.data() + begin * blocks_per_row,
                                         out.s.empty() ? nullptr : out.s.data() + begin * blocks_per_row);
  };
  if (n_tokens * in < min_parallel_values) {
    rows(0, n_tokens);
    return;
  }
  pool.parallel_for(n_tokens, rows);
}

void quantize_activations_reference(std::span<const float> x, std::int64_t n_tokens,
                                    std::int64_t in, QuantizedActivations& out, std::int64_t block) {
  resize(out, n_tokens, in, block);
  const auto values = static_cast<std::size_t>(block);
  for (std::size_t b = 0; b < out.d.size(); ++b) {
    const float* xb = x.data() + b * values;
    float amax = 0.0f;
    for (std::size_t j = 0; j < values; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const auto scales = quantize_activations_detail::block_scales(amax, block);
    std::int32_t sum = 0;
    for (std::size_t j = 0; j < values; ++j) {
      // nearbyint rounds half to even in the default rounding mode, like the SIMD conversion.
      out.q[b * values + j] = static_cast<std::int8_t>(std::nearbyint(xb[j] * scales.inv));
      sum += out.q[b * values + j];
    }
    out.d[b] = scales.d;
    if (!out.s.empty()) out.s[b] = quantize_activations_detail::q8_1_sum(amax, sum);
  }
}

}  // namespace peregrine
#endif  // HWY_ONCE
