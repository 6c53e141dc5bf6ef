#include "peregrine/kernels/cpu/matmul/matmul.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/row_split.h"
#include "peregrine/kernels/cpu/matmul/bf16_activations.h"
#include "peregrine/kernels/cpu/matmul/float_matmul.h"
#include "peregrine/kernels/cpu/matmul/gemm_float.h"
#include "peregrine/kernels/cpu/matmul/gemm_fp8.h"
#include "peregrine/kernels/cpu/matmul/gemm_nf4.h"
#include "peregrine/kernels/cpu/matmul/gemm_ggml.h"
#include "peregrine/kernels/cpu/matmul/gemm_int.h"
#include "peregrine/kernels/cpu/matmul/gemm_int8_act.h"
#include "peregrine/kernels/cpu/matmul/gemm_quant.h"
#include "peregrine/kernels/cpu/matmul/gemv_bf16_dot.h"
#include "peregrine/kernels/cpu/matmul/gemv_float.h"
#include "peregrine/kernels/cpu/matmul/half_packed.h"
#include "peregrine/kernels/cpu/matmul/quant_packed.h"
#include "peregrine/kernels/cpu/matmul/quantize_activations.h"
#include "peregrine/kernels/cpu/sparse/sparse_nm_matmul.h"
#include "peregrine/kernels/cpu/sparse/sparse_nm_packed.h"
#include "peregrine/kernels/cpu/sparse/sparse_nm_q8.h"
#include "peregrine/kernels/cpu/sparse/sparse_nm_q8_packed.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/fp16.h"

namespace peregrine {
namespace {

using RowKernel = void (*)(const TensorView&, std::span<const float>, std::int64_t, std::span<float>,
                           std::int64_t, std::int64_t);

// A decoding kernel (gemm_int, gemm_fp8) over the output rows, split in whole tiles of its path.
void split_decoded(RowKernel kernel, const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                   std::span<float> y, ThreadPool& pool, std::int64_t min_parallel_macs) {
  const std::int64_t tile = n_tokens >= kGemmMinTokens ? kGemmRows : kGemvRows;
  split_rows(w.n_rows(), w.row_length() * n_tokens, tile, pool, min_parallel_macs,
             [&](std::int64_t begin, std::int64_t end) { kernel(w, x, n_tokens, y, begin, end); });
}

// Each product's x as Q8_0 blocks, each distinct x (by address) quantized once, into buffers
// this thread keeps between calls (valid until its next call).
std::vector<const QuantizedActivations*> quantize_inputs(std::span<const MatmulProduct> products, std::int64_t n_tokens,
                                                         ThreadPool& pool) {
  thread_local std::vector<QuantizedActivations> quantized;
  if (quantized.size() < products.size()) quantized.resize(products.size());
  std::vector<const float*> inputs;
  std::vector<const QuantizedActivations*> xq;
  for (const MatmulProduct& p : products) {
    const auto at = std::find(inputs.begin(), inputs.end(), p.x.data());
    QuantizedActivations& q = quantized[static_cast<std::size_t>(at - inputs.begin())];
    if (at == inputs.end()) {
      inputs.push_back(p.x.data());
      quantize_activations(p.x, n_tokens, p.w->row_length(), q, pool, kMinParallelQuantize, kActivationBlockQ8_0);
    }
    xq.push_back(&q);
  }
  return xq;
}

// x rounded to BF16 (nearest even) and widened back to f32, into `buf`.
std::span<const float> bf16_rounded(std::span<const float> x, std::vector<float>& buf) {
  buf.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) buf[i] = bf16_to_f32(f32_to_bf16(x[i]));
  return buf;
}

// The products with BF16 weights take their x rounded to BF16, each distinct x (by address)
// rounded once, into buffers this thread keeps between calls (valid until its next call).
std::vector<MatmulProduct> with_bf16_inputs(std::span<const MatmulProduct> products) {
  thread_local std::vector<std::vector<float>> rounded;
  std::vector<const float*> inputs;
  std::vector<MatmulProduct> out(products.begin(), products.end());
  for (MatmulProduct& p : out) {
    if (p.w->dtype != DType::kBF16) continue;
    const auto at = std::find(inputs.begin(), inputs.end(), p.x.data());
    const auto i = static_cast<std::size_t>(at - inputs.begin());
    if (at == inputs.end()) {
      inputs.push_back(p.x.data());
      if (rounded.size() < inputs.size()) rounded.resize(inputs.size());
      bf16_rounded(p.x, rounded[i]);
    }
    p.x = {rounded[i].data(), p.x.size()};
  }
  return out;
}

}  // namespace

void matmul(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
            std::span<float> y, ThreadPool& pool, std::int64_t min_parallel_macs) {
  if (w.packed != nullptr && is_float_dtype(w.dtype) && n_tokens >= 1 && n_tokens <= kHalfPackedTokens) {
    const MatmulProduct product{&w, x, y};
    matmul_fused({&product, 1}, n_tokens, pool, min_parallel_macs);  // the packed GEMVs
    return;
  }
  if (w.dtype == DType::kBF16 && bf16_activations() == Bf16Activations::kBf16 && !uses_bf16_dot(w, n_tokens)) {
    thread_local std::vector<float> rounded;  // reused: no allocation per call
    x = bf16_rounded(x, rounded);
  }
  if (is_float_dtype(w.dtype)) {
    matmul_float(w, x, n_tokens, y, pool, min_parallel_macs);
    return;
  }
  if (const auto sparse = sparse_nm_format(w.dtype)) {
    const bool quantized_kept = sparse->kept == DType::kQ8_0 || sparse->kept == DType::kQ4_0;
    if (w.packed != nullptr && quantized_kept && n_tokens >= 1) {
      const MatmulProduct product{&w, x, y};
      matmul_fused({&product, 1}, n_tokens, pool, min_parallel_macs);
    } else if (w.packed != nullptr && !quantized_kept && n_tokens <= kSparsePackedTokens) {
      const MatmulProduct product{&w, x, y};
      gemv_sparse_packed({&product, 1}, n_tokens, pool, min_parallel_macs);
    } else if (quantized_kept && n_tokens <= kSparseQ8Tokens && sparse_q8_supported()) {
      thread_local QuantizedActivations xq;  // reused: no allocation per call
      quantize_activations(x, n_tokens, w.row_length(), xq, pool, kMinParallelQuantize, kActivationBlockQ8_0);
      gemv_sparse_q8(w, xq, y, pool, min_parallel_macs);
    } else {
      matmul_sparse_nm(w, x, n_tokens, y, pool, min_parallel_macs);
    }
    return;
  }
  if (w.dtype == DType::kInt && w.quant.act_bits == 8) {
    gemm_int8_act(w, x, n_tokens, y, pool, min_parallel_macs);
    return;
  }
  if (w.dtype == DType::kInt) {
    split_decoded(gemm_int, w, x, n_tokens, y, pool, min_parallel_macs);
    return;
  }
  if (w.dtype == DType::kF8E4M3 || w.dtype == DType::kF8E5M2) {
    split_decoded(gemm_fp8, w, x, n_tokens, y, pool, min_parallel_macs);
    return;
  }
  if (w.dtype == DType::kNF4) {
    split_decoded(gemm_nf4, w, x, n_tokens, y, pool, min_parallel_macs);
    return;
  }
  // ggml block formats: integer dot products against 8-bit activation blocks.
  thread_local QuantizedActivations xq;  // reused: no allocation per call
  const bool ggml_format = is_ggml_gemm_dtype(w.dtype);
  quantize_activations(x, n_tokens, w.row_length(), xq, pool, kMinParallelQuantize,
                       ggml_format ? ggml_activation_block(w.dtype) : kActivationBlockQ8_0);
  if (ggml_format) {
    thread_local GgmlActivations xa;
    prepare_ggml_activations(xq, w.dtype, xa);
    gemm_ggml(w, xa, y, pool, min_parallel_macs);
    return;
  }
  gemm_quant(w, xq, y, pool, min_parallel_macs);
}

void matmul_fused(std::span<const MatmulProduct> products, std::int64_t n_tokens, ThreadPool& pool,
                  std::int64_t min_parallel_macs) {
  const auto all_packed = [&](auto is_type) {
    return std::all_of(products.begin(), products.end(),
                       [&](const MatmulProduct& p) { return p.w->packed != nullptr && is_type(p.w->dtype); });
  };
  if (n_tokens >= 1 && n_tokens <= kHalfPackedTokens && all_packed(is_float_dtype)) {
    const bool bf16_inputs = bf16_activations() == Bf16Activations::kBf16;
    if (bf16_inputs && std::all_of(products.begin(), products.end(),
                                   [](const MatmulProduct& p) { return gemv_bf16_dot_takes(*p.w); })) {
      gemv_bf16_dot(products, n_tokens, pool, min_parallel_macs);
      return;
    }
    const bool round_bf16 = bf16_inputs && std::any_of(products.begin(), products.end(),
                                                       [](const MatmulProduct& p) { return p.w->dtype == DType::kBF16; });
    if (round_bf16) {
      gemv_half_packed(with_bf16_inputs(products), n_tokens, pool, min_parallel_macs);
    } else {
      gemv_half_packed(products, n_tokens, pool, min_parallel_macs);
    }
    return;
  }
  const auto is_half_sparse = [](DType t) { return t == DType::kF16_S24 || t == DType::kBF16_S24; };
  if (n_tokens >= 1 && n_tokens <= kSparsePackedTokens && all_packed(is_half_sparse)) {
    gemv_sparse_packed(products, n_tokens, pool, min_parallel_macs);
    return;
  }
  const bool quant = all_packed([](DType t) { return t == DType::kQ4_0 || t == DType::kQ8_0; });
  const bool sparse_q8 = all_packed([](DType t) { return t == DType::kQ4_0_S24 || t == DType::kQ8_0_S24; });
  if (!(quant || sparse_q8) || n_tokens < 1) {
    for (const MatmulProduct& p : products) matmul(*p.w, p.x, n_tokens, p.y, pool, min_parallel_macs);
    return;
  }
  const std::vector<const QuantizedActivations*> xq = quantize_inputs(products, n_tokens, pool);
  if (sparse_q8) {
    std::vector<SparseQ8Product> sparse;
    for (std::size_t i = 0; i < products.size(); ++i) sparse.push_back({products[i].w, xq[i], products[i].y});
    gemv_sparse_q8_packed(sparse, pool, min_parallel_macs);
    return;
  }
  std::vector<PackedProduct> packed;
  for (std::size_t i = 0; i < products.size(); ++i) {
    const TensorView& w = *products[i].w;
    packed.push_back({w.dtype, static_cast<const std::uint8_t*>(w.packed), w.n_rows(), xq[i], products[i].y});
  }
  gemv_quant_packed(packed, pool, min_parallel_macs);
}

void matmul_reference(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                      std::span<float> y) {
  if (w.dtype == DType::kInt && w.quant.act_bits == 8) {
    gemm_int8_act_reference(w, x, n_tokens, y);
    return;
  }
  std::vector<float> rounded;
  if (w.dtype == DType::kBF16 && bf16_activations() == Bf16Activations::kBf16) x = bf16_rounded(x, rounded);
  const std::int64_t out = w.n_rows(), in = w.row_length();
  std::vector<float> full(static_cast<std::size_t>(out * in));
  for (std::int64_t o = 0; o < out; ++o) {
    dequantize_row(w, o, std::span<float>(full).subspan(static_cast<std::size_t>(o * in), static_cast<std::size_t>(in)));
  }
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    for (std::int64_t o = 0; o < out; ++o) {
      double s = 0.0;
      for (std::int64_t i = 0; i < in; ++i) s += static_cast<double>(full[o * in + i]) * x[t * in + i];
      y[t * out + o] = static_cast<float>(s);
    }
  }
}

}  // namespace peregrine
