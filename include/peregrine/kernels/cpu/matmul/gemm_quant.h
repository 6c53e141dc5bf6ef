// y = x · Wᵀ for Q8_0 / Q4_0 weights with 8-bit quantized activations: integer dot products
// per 32-value block (W8A8 / W4A8), as llama.cpp's ggml_vec_dot_q8_0_q8_0 / _q4_0_q8_0.
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/kernels/cpu/matmul/quantize_activations.h"

namespace peregrine {

/// w: [out, in] in dtype kQ8_0 or kQ4_0 (GGUF block layout, core/dtype.h; may be unaligned).
/// xq: the activations [n_tokens, in] quantized by quantize_activations in blocks of 32
/// (kActivationBlockQ8_0). y: [n_tokens, out] f32,
/// overwritten with
///   y[t, o] = Σ_b (d_w[o, b] · d_x[t, b]) · Σ_{j<32} q_w[o, 32b+j] · q_x[t, 32b+j],
/// the block dot products exact in int32, the sum over blocks in f32 (any order).
/// Decode (n_tokens <= 3) is a GEMV bound by the weight bytes read: tiles of one row × all
/// tokens, each thread streaming its rows in order. Prefill (n_tokens >= 4) repacks 16 weight
/// rows at a time into a rows-in-lanes layout once per pass of tokens, then computes 32 rows ×
/// 4 tokens per register tile with one vpdpbusd per 16 rows × 4 values (the repacked Q4_0
/// GEMMs of llamafile / ggml); rows past a range's last 16-row panel use register tiles of
/// 4 rows × 3 tokens. x86 with AVX-512 VNNI (Highway target AVX3_DL) uses vpdpbusd; other
/// targets unpack each row once and use int16 widening multiply-adds.
/// Q4_0 and Q8_0 weights packed at load (w.packed, kernels/cpu/matmul/quant_packed.h) take the packed
/// GEMV for every token count, with the same formula (Q4_0: faster than these panels at every
/// count measured: tinyllama forwards of 33 / 128 / 512 rows 81–89 / 261–296 / 1063–1076 ms
/// here, 58–61 / 213–219 / 1003–1028 ms there; Q8_0: see quant_packed.h).
/// Threaded over output rows: the pool's threads take ~64 KiB chunks of whole tiles (multiples
/// of 16 rows) from a shared counter; products of fewer than `min_parallel_macs` multiply-adds (see matmul.h) run
/// on the calling thread.
/// Preconditions (matmul's callers check them): in == xq.in, in % 32 == 0, w.nbytes ==
/// out * in/32 * block bytes, y.size() == xq.n_tokens * out; not called from inside a
/// pool.parallel_for.
void gemm_quant(const TensorView& w, const QuantizedActivations& xq, std::span<float> y,
                ThreadPool& pool, std::int64_t min_parallel_macs);

/// Scalar twin of gemm_quant: for every token and row, each weight block is unpacked and dotted
/// with the activation block in int32, then y += (d_w · d_x) · dot in f32, blocks in order.
void gemm_quant_reference(const TensorView& w, const QuantizedActivations& xq, std::span<float> y);

}  // namespace peregrine
