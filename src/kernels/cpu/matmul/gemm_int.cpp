#include "peregrine/kernels/cpu/matmul/gemm_int.h"

#include <cstddef>
#include <cstdint>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul/gemm_int.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/matmul/decoded_matmul-inl.h"
#include "kernels/cpu/matmul/int_decode-inl.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {

template <int kBits>
void GemmIntBits(const TensorView& w, const float* x, std::int64_t n_tokens, float* y,
                 std::int64_t row_begin, std::int64_t row_end) {
  IntRowDecoder<kBits> dec(IntRowLayout(w), static_cast<const std::uint8_t*>(w.data));
  DecodedMatmulRows(dec, static_cast<std::size_t>(w.row_length()), x, static_cast<std::size_t>(n_tokens), y,
                    static_cast<std::size_t>(w.n_rows()), static_cast<std::size_t>(row_begin),
                    static_cast<std::size_t>(row_end));
}

void GemmInt(const TensorView& w, const float* x, std::int64_t n_tokens, float* y,
             std::int64_t row_begin, std::int64_t row_end) {
  switch (w.quant.bits) {
    case 2: return GemmIntBits<2>(w, x, n_tokens, y, row_begin, row_end);
    case 3: return GemmIntBits<3>(w, x, n_tokens, y, row_begin, row_end);
    case 4: return GemmIntBits<4>(w, x, n_tokens, y, row_begin, row_end);
    default: return GemmIntBits<8>(w, x, n_tokens, y, row_begin, row_end);
  }
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {

HWY_EXPORT(GemmInt);

void gemm_int(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
              std::span<float> y, std::int64_t row_begin, std::int64_t row_end) {
  HWY_DYNAMIC_DISPATCH(GemmInt)(w, x.data(), n_tokens, y.data(), row_begin, row_end);
}

}  // namespace peregrine
#endif  // HWY_ONCE
