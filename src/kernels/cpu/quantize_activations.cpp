#include "peregrine/kernels/cpu/quantize_activations.h"

#include <algorithm>
#include <cmath>

#include "peregrine/quant/unpack_int8.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/quantize_activations.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Blocks [0, n_blocks) of `block` values (a multiple of 32) from x → q (block each) and d (one each).
void QuantizeBlocks(const float* x, std::int64_t n_blocks, std::int64_t block, std::int8_t* q, float* d) {
  const hn::CappedTag<float, kQuantBlock> df;
  const hn::Rebind<std::int8_t, decltype(df)> di8;
  const std::size_t n = hn::Lanes(df), values = static_cast<std::size_t>(block);
  for (std::int64_t b = 0; b < n_blocks; ++b, x += block, q += block) {
    auto amax = hn::Zero(df);
    for (std::size_t j = 0; j < values; j += n) amax = hn::Max(amax, hn::Abs(hn::LoadU(df, x + j)));
    const float scale = hn::GetLane(hn::MaxOfLanes(df, amax)) / 127.0f;
    const auto inv = hn::Set(df, scale != 0.0f ? 1.0f / scale : 0.0f);
    for (std::size_t j = 0; j < values; j += n) {
      const auto qi = hn::NearestInt(hn::Mul(hn::LoadU(df, x + j), inv));
      hn::StoreU(hn::DemoteTo(di8, qi), di8, q + j);
    }
    d[b] = scale;
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
}

}  // namespace

void quantize_activations(std::span<const float> x, std::int64_t n_tokens, std::int64_t in,
                          QuantizedActivations& out, ThreadPool& pool,
                          std::int64_t min_parallel_values, std::int64_t block) {
  resize(out, n_tokens, in, block);
  const std::int64_t blocks_per_row = in / block;
  auto rows = [&](std::int64_t begin, std::int64_t end) {
    HWY_DYNAMIC_DISPATCH(QuantizeBlocks)(x.data() + begin * in, (end - begin) * blocks_per_row, block,
                                         out.q.data() + begin * in, out.d.data() + begin * blocks_per_row);
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
    const float scale = amax / 127.0f, inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    for (std::size_t j = 0; j < values; ++j) {
      // nearbyint rounds half to even in the default rounding mode, like the SIMD conversion.
      out.q[b * values + j] = static_cast<std::int8_t>(std::nearbyint(xb[j] * inv));
    }
    out.d[b] = scale;
  }
}

}  // namespace peregrine
#endif  // HWY_ONCE
