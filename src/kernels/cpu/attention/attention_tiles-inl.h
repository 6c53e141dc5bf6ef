// Per-target pieces shared by the attention kernels (attention.cpp, attention_head_rows-inl.h):
// loading KV tiles from the paged cache (one KV head's rows of a KvLayerView in f32, f16, q8_0,
// or per-row scaled i8 / f8, as runs of f32 rows read in place or widened into a workspace
// buffer), prefetching the next tile's rows, the loop over a KV range tile by tile, and score
// soft-capping.
//
// Highway "-inl.h" convention: re-included once per target by foreach_target, so the include
// guard toggles with HWY_TARGET_TOGGLE instead of #pragma once.
#if defined(PEREGRINE_KERNELS_CPU_ATTENTION_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PEREGRINE_KERNELS_CPU_ATTENTION_TILES_INL_H_
#undef PEREGRINE_KERNELS_CPU_ATTENTION_TILES_INL_H_
#else
#define PEREGRINE_KERNELS_CPU_ATTENTION_TILES_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include <hwy/cache_control.h>
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include "kernels/cpu/attention/attention_detail.h"
#include "kernels/cpu/matmul/float_weight_load-inl.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using namespace attention_detail;  // NOLINT(google-build-using-namespace)

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// out[0, 32 · n_blocks) = the q8_0 blocks at src widened to f32 (x = d · q).
void dequantize_q8_0(const std::uint8_t* src, std::int64_t n_blocks, float* HWY_RESTRICT out) {
  const D d;
  const hn::Rebind<std::int8_t, D> d8;
  const hn::RebindToSigned<D> di;
  const auto n = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t b = 0; b < n_blocks; ++b, src += 34, out += 32) {
    const V scale = hn::Set(d, ScalarAsF32(reinterpret_cast<const hwy::float16_t*>(src)));
    const auto* q = reinterpret_cast<const std::int8_t*>(src + 2);
    for (std::int64_t i = 0; i < 32; i += n) {
      hn::StoreU(hn::Mul(scale, hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, q + i)))), d, out + i);
    }
  }
}

// out[0, n) = n f16 values at src widened to f32.
void widen_f16(const std::uint8_t* src, std::int64_t n_values, float* HWY_RESTRICT out) {
  const D d;
  const auto n = static_cast<std::int64_t>(hn::Lanes(d));
  const auto* h = reinterpret_cast<const hwy::float16_t*>(src);
  std::int64_t i = 0;
  for (; i + n <= n_values; i += n) hn::StoreU(LoadAsF32(d, h + i), d, out + i);
  for (; i < n_values; ++i) out[i] = ScalarAsF32(h + i);
}

// Highway 1.0.3 widens f16 by arithmetic where the CPU has no F16C (x86 below AVX2, the
// portable fallbacks), and gives exponent 31 a finite value; this puts E5M2's infinities and
// NaNs (exponent bits all set) back into x, the widened bytes at p. Elsewhere x as it is.
V e5m2_specials(D d, const std::uint8_t* HWY_RESTRICT p, V x) {
  if constexpr (HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128 || (HWY_ARCH_X86 && HWY_TARGET > HWY_AVX2)) {
    const hn::Rebind<std::uint32_t, D> du32;
    const auto b = hn::PromoteTo(du32, hn::LoadU(hn::Rebind<std::uint8_t, D>(), p));
    const auto special = hn::RebindMask(d, hn::Eq(hn::And(b, hn::Set(du32, 0x7c)), hn::Set(du32, 0x7c)));
    const auto nan = hn::RebindMask(d, hn::Ne(hn::And(b, hn::Set(du32, 0x03)), hn::Zero(du32)));
    const V inf = hn::CopySign(hn::Set(d, std::numeric_limits<float>::infinity()), x);
    return hn::IfThenElse(special, hn::IfThenElse(nan, hn::Set(d, NAN), inf), x);
  } else {
    (void)p;
    return x;
  }
}

// One vector of FP8 bytes at p as f32, exactly, through f16 (F16C): an E5M2 byte is the top
// byte of the f16 of the same value; E4M3's 7 magnitude bits go 3 bits lower, into an f16
// whose exponent bias (15) exceeds E4M3's (7) by 8, so the widened value times 2^8 is exact
// (E4M3 subnormals become f16 subnormals). E4M3's NaN (magnitude 0x7f) lands on ±480, which
// no E4M3 byte encodes, and is replaced by NaN.
V widen_fp8(DType t, const std::uint8_t* HWY_RESTRICT p) {
  const D d;
  const hn::Rebind<std::uint8_t, D> du8;
  const hn::Rebind<std::uint16_t, D> du16;
  const hn::Rebind<hwy::float16_t, D> df16;
  const auto b = hn::PromoteTo(du16, hn::LoadU(du8, p));
  if (t == DType::kF8E5M2) return e5m2_specials(d, p, hn::PromoteTo(d, hn::BitCast(df16, hn::ShiftLeft<8>(b))));
  const auto h = hn::Or(hn::ShiftLeft<7>(hn::And(b, hn::Set(du16, 0x7f))), hn::ShiftLeft<8>(hn::And(b, hn::Set(du16, 0x80))));
  const V x = hn::Mul(hn::PromoteTo(d, hn::BitCast(df16, h)), hn::Set(d, 256.0f));
  return hn::IfThenElse(hn::Eq(hn::Abs(x), hn::Set(d, 480.0f)), hn::Set(d, NAN), x);
}

// out[0, n) = s · value(b) for the n bytes b at `values` of an i8 / f8 row whose f32 scale s
// starts the row at `row` (i8: the signed byte; f8: its FP8 value, widen_fp8 or, for the
// tail, the decode table). The same products as quant/dequantize, so the reference reads
// identical values.
void widen_row_scaled(DType t, const std::uint8_t* row, const std::uint8_t* values, std::int64_t n_values,
                      float* HWY_RESTRICT out) {
  const D d;
  const auto n = static_cast<std::int64_t>(hn::Lanes(d));
  float s;
  std::memcpy(&s, row, sizeof s);
  const V scale = hn::Set(d, s);
  std::int64_t i = 0;
  if (t == DType::kI8) {
    const hn::RebindToSigned<D> di;
    const hn::Rebind<std::int8_t, D> d8;
    const auto* q = reinterpret_cast<const std::int8_t*>(values);
    for (; i + n <= n_values; i += n) hn::StoreU(hn::Mul(scale, hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, q + i)))), d, out + i);
    for (; i < n_values; ++i) out[i] = s * static_cast<float>(q[i]);
    return;
  }
  for (; i + n <= n_values; i += n) hn::StoreU(hn::Mul(scale, widen_fp8(t, values + i)), d, out + i);
  const float* table = fp8_table(t);
  for (; i < n_values; ++i) out[i] = s * table[values[i]];
}

// out[0, head_dim) = the values of KV head `kv_head` in `row` (a row of view.dtype) as f32.
void widen_head(const KvLayerView& view, const std::uint8_t* row, std::int64_t kv_head, std::int64_t head_dim,
                float* row_tmp, float* HWY_RESTRICT out) {
  const HeadSlice slice = head_slice(view, kv_head, head_dim);
  switch (view.dtype) {
    case DType::kF16: return widen_f16(row + slice.offset, head_dim, out);
    case DType::kQ8_0:
      if (head_dim % 32 == 0) return dequantize_q8_0(row + slice.offset, head_dim / 32, out);
      dequantize_q8_0(row, view.row_bytes / 34, row_tmp);
      std::copy_n(row_tmp + kv_head * head_dim, head_dim, out);
      return;
    case DType::kI8:
    case DType::kF8E4M3:
    case DType::kF8E5M2: return widen_row_scaled(view.dtype, row, row + slice.offset, head_dim, out);
    default: std::memcpy(out, row + slice.offset, static_cast<std::size_t>(head_dim) * sizeof(float));
  }
}

// Lays out the rows of KV head `kv_head` at positions [t, t + n_keys) of `view` as f32 runs:
// in place for f32 blocks of >= kMinDirectRows rows, else widened into buf [n_keys, head_dim].
void load_tile(const KvLayerView& view, std::int64_t kv_head, std::int64_t head_dim, std::int64_t t,
               std::int64_t n_keys, float* buf, float* row_tmp, TileRuns& out) {
  out.n = 0;
  if (view.dtype == DType::kF32 && view.block_size >= kMinDirectRows) {
    const auto stride = static_cast<std::size_t>(view.row_bytes) / sizeof(float);
    for_each_block_run(view, t, n_keys, [&](std::int64_t, const std::uint8_t* row, std::int64_t n_rows) {
      out.runs[out.n++] = {reinterpret_cast<const float*>(row) + kv_head * head_dim, stride, static_cast<std::size_t>(n_rows)};
    });
    return;
  }
  for_each_block_run(view, t, n_keys, [&](std::int64_t j, const std::uint8_t* row, std::int64_t n_rows) {
    for (std::int64_t r = 0; r < n_rows; ++r) widen_head(view, row + r * view.row_bytes, kv_head, head_dim, row_tmp, buf + (j + r) * head_dim);
  });
  out.runs[out.n++] = {buf, static_cast<std::size_t>(head_dim), static_cast<std::size_t>(n_keys)};
}

// Prefetches the rows [begin, end) of one KV head in `view`: a decode tile takes ~2 µs, so
// fetching the next tile's rows while computing this one hides the memory latency of the
// strided per-head rows (n_ctx 8192 decode: ~2.0 → ~1.4 ms, measured).
void prefetch_rows(const KvLayerView& view, std::int64_t kv_head, std::int64_t head_dim, std::int64_t begin,
                   std::int64_t end) {
  if (begin >= end) return;
  const HeadSlice slice = head_slice(view, kv_head, head_dim);
  for_each_block_run(view, begin, end - begin, [&](std::int64_t, const std::uint8_t* row, std::int64_t n_rows) {
    for (std::int64_t r = 0; r < n_rows; ++r) {
      const std::uint8_t* p = row + r * view.row_bytes;
      if (slice.row_scale) hwy::Prefetch(p);
      for (std::int64_t b = 0; b < slice.bytes; b += 64) hwy::Prefetch(p + slice.offset + b);
    }
  });
}

// ptrs[j] = the address of row j of a tile laid out as `runs` (one pointer per key, so a tile's
// keys may come from many blocks).
inline void row_pointers(const TileRuns& runs, std::array<const float*, kKvTile>& ptrs) {
  std::size_t j = 0;
  for (std::size_t r = 0; r < runs.n; ++r) {
    const RowRun& run = runs.runs[r];
    for (std::size_t i = 0; i < run.n_rows; ++i) ptrs[j++] = run.p + i * run.stride;
  }
}

// Walks KV positions [begin, end) of KV head `kv_head` in tiles of kKvTile: prefetches the next
// tile's K/V rows, lays out this tile's in ws.k_runs / ws.v_runs (load_tile), then calls
// fold(t, n_keys) for the tile's positions [t, t + n_keys).
template <class Fold>
void attend_range(const KvLayerView& k, const KvLayerView& v, std::int64_t head_dim, std::int64_t kv_head,
                  std::int64_t begin, std::int64_t end, Workspace& ws, const Fold& fold) {
  for (std::int64_t t = begin; t < end; t += kKvTile) {
    const std::int64_t n_keys = std::min(kKvTile, end - t), next_end = std::min(end, t + 2 * kKvTile);
    prefetch_rows(k, kv_head, head_dim, t + kKvTile, next_end);
    prefetch_rows(v, kv_head, head_dim, t + kKvTile, next_end);
    load_tile(k, kv_head, head_dim, t, n_keys, ws.kbuf, ws.row_tmp, ws.k_runs);
    load_tile(v, kv_head, head_dim, t, n_keys, ws.vbuf, ws.row_tmp, ws.v_runs);
    fold(t, static_cast<std::size_t>(n_keys));
  }
}

// Attention-score soft-capping (Gemma 2): st → softcap · tanh(st · cap_scale) for the n_keys
// score rows of a tile.
inline void softcap_scores(std::size_t n_keys, std::size_t r_pad, float softcap, float cap_scale, float* HWY_RESTRICT st) {
  const D d;
  const V cap = hn::Set(d, softcap), in_scale = hn::Set(d, cap_scale);
  for (std::size_t i = 0; i < n_keys * r_pad; i += hn::Lanes(d)) {
    hn::Store(hn::Mul(cap, hn::Tanh(d, hn::Mul(hn::Load(d, st + i), in_scale))), d, st + i);
  }
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // PEREGRINE_KERNELS_CPU_ATTENTION_TILES_INL_H_
