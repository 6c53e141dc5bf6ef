#include "peregrine/quant/dequantize.h"

#include <cstring>

#include "peregrine/quant/fp16.h"
#include "peregrine/quant/nf4.h"
#include "peregrine/quant/fp8.h"
#include "peregrine/quant/int_group.h"
#include "peregrine/quant/sparse_nm.h"
#include "quant/ggml_dequantize.h"

namespace peregrine {
namespace {

std::uint16_t load_u16(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void dequantize_q8_0(const std::uint8_t* src, std::span<float> out) {
  for (std::size_t b = 0; b < out.size() / 32; ++b, src += 34) {
    const float d = f16_to_f32(load_u16(src));
    const auto* q = reinterpret_cast<const std::int8_t*>(src + 2);
    for (int j = 0; j < 32; ++j) out[b * 32 + j] = d * static_cast<float>(q[j]);
  }
}

void dequantize_q4_0(const std::uint8_t* src, std::span<float> out) {
  for (std::size_t b = 0; b < out.size() / 32; ++b, src += 18) {
    const float d = f16_to_f32(load_u16(src));
    const std::uint8_t* qs = src + 2;
    for (int j = 0; j < 16; ++j) {
      out[b * 32 + j] = d * static_cast<float>((qs[j] & 0x0f) - 8);
      out[b * 32 + j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
    }
  }
}

float load_f32(const std::uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void dequantize_row_scaled(const std::uint8_t* src, std::span<float> out, float (*decode)(std::uint8_t)) {
  const float s = load_f32(src);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = s * decode(src[kRowScaleBytes + i]);
}

float int8_value(std::uint8_t v) { return static_cast<float>(static_cast<std::int8_t>(v)); }

}  // namespace

void dequantize(DType t, const void* src, std::span<float> out) {
  const auto* p = static_cast<const std::uint8_t*>(src);
  if (sparse_nm_format(t)) {
    decode_sparse_nm_row(t, p, out);
    return;
  }
  switch (t) {
    case DType::kF32:
      std::memcpy(out.data(), p, out.size() * sizeof(float));
      return;
    case DType::kF16:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = f16_to_f32(load_u16(p + 2 * i));
      return;
    case DType::kBF16:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(load_u16(p + 2 * i));
      return;
    case DType::kQ8_0: dequantize_q8_0(p, out); return;
    case DType::kQ4_0: dequantize_q4_0(p, out); return;
    case DType::kI8: dequantize_row_scaled(p, out, int8_value); return;
    case DType::kF8E4M3: dequantize_row_scaled(p, out, fp8_e4m3_to_f32); return;
    case DType::kF8E5M2: dequantize_row_scaled(p, out, fp8_e5m2_to_f32); return;
    case DType::kNF4: nf4_decode_row(p, out); return;
    case DType::kInt: return;  // precondition: use dequantize_row
    default: dequantize_ggml_blocks(t, p, out); return;
  }
}

void dequantize_row(const TensorView& w, std::int64_t row, std::span<float> out) {
  const auto* src = static_cast<const std::uint8_t*>(w.data) + static_cast<std::size_t>(row) * *w.row_bytes();
  if (w.dtype == DType::kInt) {
    dequantize_int_row(w.quant, src, out);
  } else {
    dequantize(w.dtype, src, out);
  }
}

}  // namespace peregrine
