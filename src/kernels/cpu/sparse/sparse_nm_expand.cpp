#include "peregrine/kernels/cpu/sparse/sparse_nm_expand.h"
#include "peregrine/kernels/cpu/isa.h"

#if defined(__x86_64__)  // expand_avx512
#include <immintrin.h>
#endif

#include <bit>

#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/sparse_nm.h"

namespace peregrine {
namespace {

bool mask_bit(const std::uint8_t* mask, std::size_t c) { return ((mask[c / 8] >> (c % 8)) & 1u) != 0; }

// out[0, kept) holds the kept values in column order; moves them to their columns (the set bits
// of `mask`, exactly `kept` of the first `cols`), zeros elsewhere, from the last column down.
void expand_scalar(const std::uint8_t* mask, std::size_t cols, std::size_t kept, float* out, std::size_t down_to = 0) {
  std::size_t k = kept;
  for (std::size_t c = cols; c-- > down_to;) out[c] = mask_bit(mask, c) ? out[--k] : 0.0f;
}

#if defined(__x86_64__)  // AVX-512's VEXPANDPS; other architectures expand with expand_scalar
__attribute__((target("avx512f"))) void expand_avx512(const std::uint8_t* mask, std::size_t cols, std::size_t kept,
                                                     float* out) {
  const std::size_t body = cols / 16 * 16;
  std::size_t k = kept;
  for (std::size_t c = cols; c-- > body;) k -= mask_bit(mask, c) ? 1 : 0;
  expand_scalar(mask, cols, kept, out, body);  // the tail past the last 16 columns
  for (std::size_t c = body; c > 0;) {
    c -= 16;
    const auto bits = static_cast<__mmask16>(mask[c / 8] | (mask[c / 8 + 1] << 8));
    k -= static_cast<std::size_t>(std::popcount(static_cast<unsigned>(bits)));
    // Reads out[k, k + popcount) (k <= c: columns before c hold k kept values) before writing
    // out[c, c + 16); lower chunks read below k only.
    _mm512_storeu_ps(out + c, _mm512_maskz_expandloadu_ps(bits, out + k));
  }
}

bool has_avx512f() { return isa_level() >= IsaLevel::kAvx512; }
#endif  // __x86_64__

}  // namespace

void expand_sparse_nm_row(const TensorView& w, std::int64_t r, std::span<float> out) {
  const SparseNmFormat f = *sparse_nm_format(w.dtype);
  const std::size_t cols = out.size(), kept = cols / static_cast<std::size_t>(f.m) * static_cast<std::size_t>(f.n);
  const std::uint8_t* src = static_cast<const std::uint8_t*>(w.data) + static_cast<std::size_t>(r) * *w.row_bytes();
  const std::uint8_t* mask = src + *dtype_row_bytes(f.kept, kept);
  std::size_t marked = 0;
  for (std::size_t b = 0; b < cols / 8; ++b) marked += static_cast<std::size_t>(std::popcount(mask[b]));
  for (std::size_t c = cols / 8 * 8; c < cols; ++c) marked += mask_bit(mask, c) ? 1 : 0;
  if (marked != kept) {
    decode_sparse_nm_row(w.dtype, src, out);
    return;
  }
  dequantize(f.kept, src, out.first(kept));
#if defined(__x86_64__)
  if (has_avx512f()) return expand_avx512(mask, cols, kept, out.data());
#endif
  expand_scalar(mask, cols, kept, out.data());
}

}  // namespace peregrine
