#include "peregrine/kernels/cpu/matmul/gemm_nf4.h"

#include <algorithm>
#include <cstring>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul/gemm_nf4.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "peregrine/kernels/cpu/matmul/float_matmul.h"
#include "peregrine/kernels/cpu/matmul/gemm_float.h"
#include "peregrine/kernels/cpu/matmul/gemv_float.h"
#include "peregrine/quant/nf4.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The fused decode GEMV over NF4 rows on targets with 16 f32 lanes (AVX-512): per 32 weights,
// 16 code bytes widened to 16 u32 lanes, their high nibbles (the even weights) and low nibbles
// (the odd ones) looked up in the 16-entry codebook held in one vector (vpermps), each
// multiplied by the token's even / odd activations (staged de-interleaved once per call); per
// block of 64 the sum is scaled by the block's absmax. Returns false on other targets (the
// caller decodes rows to f32 instead).
bool Nf4Gemv(const TensorView& w, const float* x, std::int64_t n_tokens, float* y, std::int64_t row_begin,
             std::int64_t row_end) {
  const hn::ScalableTag<float> d;
  if constexpr (hn::MaxLanes(d) != 16) {
    return false;
  } else {
    if (hn::Lanes(d) != 16) return false;
    const hn::Rebind<std::uint8_t, decltype(d)> d8;
    const hn::RebindToUnsigned<decltype(d)> du;
    const std::int64_t in = w.row_length(), out = w.n_rows();
    const std::int64_t blocks = in / kNf4BlockSize, groups = (blocks + kNf4AbsmaxGroup - 1) / kNf4AbsmaxGroup;
    const std::size_t row_bytes = *w.row_bytes();
    // x de-interleaved per token: for each 32 values, the 16 even ones then the 16 odd ones.
    thread_local std::vector<float> staged;
    staged.resize(static_cast<std::size_t>(n_tokens * in));
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x + t * in;
      float* st = staged.data() + t * in;
      for (std::int64_t c = 0; c < in; c += 32) {
        for (std::int64_t j = 0; j < 16; ++j) {
          st[c + j] = xt[c + 2 * j];
          st[c + 16 + j] = xt[c + 2 * j + 1];
        }
      }
    }
    const auto table = hn::LoadU(d, kNf4Codebook.data());
    const auto& map = nf4_absmax_map();
    for (std::int64_t o = row_begin; o < row_end; ++o) {
      const auto* src = static_cast<const std::uint8_t*>(w.data) + static_cast<std::size_t>(o) * row_bytes;
      float mean = 0.0f;
      std::memcpy(&mean, src, 4);
      const std::uint8_t* absmax_codes = src + 4 + 4 * groups;
      const std::uint8_t* codes = absmax_codes + blocks;
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        const float* st = staged.data() + t * in;
        auto total = hn::Zero(d);
        for (std::int64_t b = 0; b < blocks; ++b) {
          float group = 0.0f;
          std::memcpy(&group, src + 4 + 4 * (b / kNf4AbsmaxGroup), 4);
          const float absmax = map[absmax_codes[b]] * group + mean;
          auto block = hn::Zero(d);
          for (std::int64_t half = 0; half < 2; ++half) {
            const std::int64_t c = b * kNf4BlockSize + half * 32;
            const auto bytes = hn::PromoteTo(du, hn::LoadU(d8, codes + c / 2));
            const auto hi = hn::TableLookupLanes(table, hn::IndicesFromVec(d, hn::ShiftRight<4>(bytes)));
            const auto lo = hn::TableLookupLanes(table, hn::IndicesFromVec(d, hn::And(bytes, hn::Set(du, 15u))));
            block = hn::MulAdd(hi, hn::LoadU(d, st + c), block);
            block = hn::MulAdd(lo, hn::LoadU(d, st + c + 16), block);
          }
          total = hn::MulAdd(block, hn::Set(d, absmax), total);
        }
        y[t * out + o] = hn::GetLane(hn::SumOfLanes(d, total));
      }
    }
    return true;
  }
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {
namespace {

HWY_EXPORT(Nf4Gemv);

constexpr std::int64_t kDecodeRows = 64;  // rows decoded per pass: 64 · in f32 (L2-resident)

// Rows decoded to f32 64 at a time, then the float GEMV / GEMM.
void decoded_nf4(const TensorView& w, std::span<const float> x, std::int64_t n_tokens, std::span<float> y,
                 std::int64_t row_begin, std::int64_t row_end) {
  const std::int64_t in = w.row_length(), out = w.n_rows();
  const std::size_t row_bytes = *w.row_bytes();
  thread_local std::vector<float> rows, part;  // decoded rows [k, in], their products [n_tokens, k]
  for (std::int64_t r0 = row_begin; r0 < row_end; r0 += kDecodeRows) {
    const std::int64_t k = std::min(kDecodeRows, row_end - r0);
    rows.resize(static_cast<std::size_t>(k * in));
    part.resize(static_cast<std::size_t>(n_tokens * k));
    for (std::int64_t j = 0; j < k; ++j) {
      nf4_decode_row(static_cast<const std::uint8_t*>(w.data) + static_cast<std::size_t>(r0 + j) * row_bytes,
                     std::span<float>(rows).subspan(static_cast<std::size_t>(j * in), static_cast<std::size_t>(in)));
    }
    const TensorView decoded = f32_matrix_view(w.name, rows, k, in);
    if (n_tokens >= kGemmMinTokens) {
      gemm_float(decoded, x, n_tokens, part, 0, k);
    } else {
      gemv_float(decoded, x, n_tokens, part, 0, k);
    }
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      std::copy_n(part.begin() + t * k, k, y.begin() + t * out + r0);
    }
  }
}

}  // namespace

void gemm_nf4(const TensorView& w, std::span<const float> x, std::int64_t n_tokens, std::span<float> y,
              std::int64_t row_begin, std::int64_t row_end) {
  if (n_tokens <= kNf4FusedTokens && HWY_DYNAMIC_DISPATCH(Nf4Gemv)(w, x.data(), n_tokens, y.data(), row_begin, row_end)) return;
  decoded_nf4(w, x, n_tokens, y, row_begin, row_end);
}

}  // namespace peregrine
#endif  // HWY_ONCE
