#include "peregrine/kernels/cpu/sparse/sparse_nm_packed.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/row_split.h"
#include "kernels/cpu/token_chunks.h"
#include "peregrine/quant/fp16.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/sparse/sparse_nm_packed.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/matmul/float_weight_load-inl.h"

#ifndef PEREGRINE_KERNELS_CPU_SPARSE_NM_PACKED_SHARED
#define PEREGRINE_KERNELS_CPU_SPARSE_NM_PACKED_SHARED
namespace peregrine::sparse_packed_detail {

constexpr std::size_t kRows = 16;          // rows per group (kSparsePackRows)
constexpr std::size_t kGroupCols = 4;      // columns per 2:4 group
constexpr std::size_t kChunkGroups = 4;    // groups per chunk (16 columns)
constexpr std::size_t kSlots = 8;          // kept values per row and chunk
constexpr std::size_t kSums = 4;           // partial sums per output: slot s goes to s mod 4
constexpr std::size_t kPosBytes = kRows * 2;
constexpr std::size_t kChunkBytes = kPosBytes + kSlots * kRows * 2;  // 288

// One product's operands, shared by every target's kernel.
struct Operands {
  const std::uint8_t* packed;
  bool bf16;
  std::size_t in, out;
  const float* x;
  std::size_t n_tokens;
  float* y;

  std::size_t groups() const { return in / kGroupCols; }
  std::size_t chunks() const { return (groups() + kChunkGroups - 1) / kChunkGroups; }
  const std::uint8_t* chunk(std::size_t row_group, std::size_t c) const {
    return packed + (row_group * chunks() + c) * kChunkBytes;
  }
};

inline std::uint16_t load_u16(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// One group of 16 rows for every token, lane by lane: the scalar twin, and the kernel of
// targets without 16 f32 lanes.
inline void GroupScalar(const Operands& op, std::size_t group) {
  for (std::size_t t = 0; t < op.n_tokens; ++t) {
    const float* x = op.x + t * op.in;
    for (std::size_t e = 0; e < kRows; ++e) {
      float s[kSums] = {};
      for (std::size_t c = 0; c < op.chunks(); ++c) {
        const std::uint8_t* chunk = op.chunk(group, c);
        const unsigned pos = load_u16(chunk + 2 * e);
        for (std::size_t j = 0; j < std::min(kChunkGroups, op.groups() - c * kChunkGroups); ++j) {
          for (std::size_t k = 0; k < 2; ++k) {
            const std::size_t slot = 2 * j + k;
            const std::uint16_t bits = load_u16(chunk + kPosBytes + (slot * kRows + e) * 2);
            const float w = op.bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
            const float xi = x[(c * kChunkGroups + j) * kGroupCols + ((pos >> (2 * slot)) & 3u)];
            s[slot % kSums] = std::fma(w, xi, s[slot % kSums]);
          }
        }
      }
      op.y[t * op.out + group * kRows + e] = (s[0] + s[1]) + (s[2] + s[3]);
    }
  }
}

}  // namespace peregrine::sparse_packed_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using sparse_packed_detail::kChunkBytes;
using sparse_packed_detail::kChunkGroups;
using sparse_packed_detail::kGroupCols;
using sparse_packed_detail::kPosBytes;
using sparse_packed_detail::kRows;
using sparse_packed_detail::kSums;
using sparse_packed_detail::Operands;

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2

// The target's f32 vectors: 16 lanes on AVX-512 (a group's 16 rows in one vector), 8 on AVX2
// (the group's rows in two passes, kParts, each with AVX-512's register tile at half width).
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr std::size_t kLanes = hn::MaxLanes(DF());
constexpr std::size_t kParts = kRows / kLanes;
static_assert(kParts * kLanes == kRows);

// Each lane's activation of a group broadcast to every 128-bit block: the one at index
// ctrl mod 4 (vpermilps, in-block, both widths).
HWY_INLINE VF PickInBlocks(VF x, hn::Vec<hn::RebindToSigned<DF>> ctrl) {
#if HWY_TARGET <= HWY_AVX3
  return VF{_mm512_permutevar_ps(x.raw, ctrl.raw)};
#else
  return VF{_mm256_permutevar_ps(x.raw, ctrl.raw)};
#endif
}

// Groups [0, n_groups) (<= 4) of one chunk, rows [row0, row0 + kLanes) of its 16, for T tokens:
// per group the 4 activations of each token broadcast to every 128-bit block, per kept slot one
// load widened to f32, each lane's activation picked by its 2 position bits, one FMA per token.
template <std::size_t T, class WT>
HWY_INLINE void Chunk(const std::uint8_t* HWY_RESTRICT chunk, std::size_t row0, std::size_t n_groups,
                      const float* HWY_RESTRICT x, std::size_t in, VF (&acc)[T][kSums]) {
  const DF d;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<std::uint16_t, DF> du16;
  const auto pos = hn::PromoteTo(di, hn::LoadU(du16, reinterpret_cast<const std::uint16_t*>(chunk) + row0));
  const WT* HWY_RESTRICT w = reinterpret_cast<const WT*>(chunk + kPosBytes) + row0;
  for (std::size_t j = 0; j < n_groups; ++j) {
    VF xg[T];
    for (std::size_t t = 0; t < T; ++t) xg[t] = hn::LoadDup128(d, x + t * in + j * kGroupCols);
    for (std::size_t k = 0; k < 2; ++k) {
      const std::size_t slot = 2 * j + k;
      const auto ctrl = hn::ShiftRightSame(pos, static_cast<int>(2 * slot));
      const VF wv = LoadAsF32(d, w + slot * kRows);
      for (std::size_t t = 0; t < T; ++t) {
        acc[t][slot % kSums] = hn::MulAdd(wv, PickInBlocks(xg[t], ctrl), acc[t][slot % kSums]);
      }
    }
  }
}

// Rows [row0, row0 + kLanes) of row group `g` × T (<= 4) tokens: every chunk in column order,
// then kLanes outputs per store per token. With several tokens the first pass prefetches the
// next group's same chunk into L2 (as in half_packed.cpp: the compute of 2+ tokens outlasts the
// read); AVX2's second pass reads the group again from L1/L2.
template <std::size_t T, class WT>
HWY_INLINE void GroupPart(const Operands& op, std::size_t g, std::size_t row0, const float* HWY_RESTRICT x,
                          float* HWY_RESTRICT y) {
  const DF d;
  VF acc[T][kSums];
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t u = 0; u < kSums; ++u) acc[t][u] = hn::Zero(d);
  }
  const std::size_t chunks = op.chunks(), full = op.groups() / kChunkGroups;
  // Past the matrix's end the addresses are hints, never dereferenced.
  const std::uintptr_t next = reinterpret_cast<std::uintptr_t>(op.chunk(g, 0)) + chunks * kChunkBytes;
  for (std::size_t c = 0; c < full; ++c) {
    if (T > 1 && row0 == 0) {
      for (std::size_t line = 0; line < kChunkBytes; line += 64) {
        __builtin_prefetch(reinterpret_cast<const char*>(next + c * kChunkBytes + line), 0, 2);
      }
    }
    Chunk<T, WT>(op.chunk(g, c), row0, kChunkGroups, x + c * kChunkGroups * kGroupCols, op.in, acc);
  }
  if (full < chunks) {
    Chunk<T, WT>(op.chunk(g, full), row0, op.groups() - full * kChunkGroups, x + full * kChunkGroups * kGroupCols,
                 op.in, acc);
  }
  for (std::size_t t = 0; t < T; ++t) {
    hn::StoreU(hn::Add(hn::Add(acc[t][0], acc[t][1]), hn::Add(acc[t][2], acc[t][3])), d, y + t * op.out + g * kRows + row0);
  }
}

// Row groups [g0, g1) of `op`, every token: each group read from memory once.
void SparseGemvGroups(const Operands& op, std::size_t g0, std::size_t g1) {
  for_groups_in_token_chunks(g0, g1, op.n_tokens, [&]<std::size_t T>(std::size_t g, TokenChunk chunk) {
    const std::size_t t = chunk.first;
    const float* x = op.x + t * op.in;
    float* y = op.y + t * op.out;
    for (std::size_t part = 0; part < kParts; ++part) {
      if (op.bf16) {
        GroupPart<T, hwy::bfloat16_t>(op, g, part * kLanes, x, y);
      } else {
        GroupPart<T, hwy::float16_t>(op, g, part * kLanes, x, y);
      }
    }
  });
}
bool SparseHasSimdKernel() { return true; }

#else
void SparseGemvGroups(const Operands& op, std::size_t g0, std::size_t g1) {
  for (std::size_t g = g0; g < g1; ++g) sparse_packed_detail::GroupScalar(op, g);
}
bool SparseHasSimdKernel() { return false; }
#endif

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {
namespace {

HWY_EXPORT(SparseGemvGroups);
HWY_EXPORT(SparseHasSimdKernel);

using sparse_packed_detail::kChunkBytes;
using sparse_packed_detail::kChunkGroups;
using sparse_packed_detail::kGroupCols;
using sparse_packed_detail::kPosBytes;
using sparse_packed_detail::kRows;
using sparse_packed_detail::Operands;

Operands operands(const TensorView& w, std::span<const float> x, std::int64_t n_tokens, std::span<float> y) {
  return {static_cast<const std::uint8_t*>(w.packed), w.dtype == DType::kBF16_S24, static_cast<std::size_t>(w.row_length()),
          static_cast<std::size_t>(w.n_rows()), x.data(), static_cast<std::size_t>(n_tokens), y.data()};
}

}  // namespace

bool sparse_packed_gemv_available() { return HWY_DYNAMIC_DISPATCH(SparseHasSimdKernel)(); }

bool sparse_packable(const TensorView& w) {
  if ((w.dtype != DType::kF16_S24 && w.dtype != DType::kBF16_S24) || w.shape.size() != 2) return false;
  const auto row_bytes = w.row_bytes();
  const std::int64_t out = w.shape[0];
  return out > 0 && out % kSparsePackRows == 0 && row_bytes && w.nbytes == *row_bytes * static_cast<std::size_t>(out);
}

std::size_t sparse_packed_bytes(const TensorView& w) {
  const Operands op = operands(w, {}, 0, {});
  return op.out / kRows * op.chunks() * kChunkBytes;
}

Status pack_sparse_nm(const TensorView& w, std::span<std::uint8_t> dst) {
  if (!sparse_packable(w)) {
    return invalid_argument("pack_sparse_nm: " + w.name + " is not a 2-D f16_s24 / bf16_s24 matrix of whole 16-row groups");
  }
  const std::size_t bytes = sparse_packed_bytes(w);
  if (dst.size() < bytes) {
    return invalid_argument("pack_sparse_nm: " + std::to_string(dst.size()) + " bytes cannot hold the " +
                            std::to_string(bytes) + " of " + w.name);
  }
  Operands op = operands(w, {}, 0, {});
  op.packed = dst.data();
  std::memset(dst.data(), 0, bytes);
  const std::size_t row_bytes = *w.row_bytes(), values_bytes = op.in;  // 2 kept values × 2 B per 4 columns
  for (std::size_t r = 0; r < op.out; ++r) {
    const auto* row = static_cast<const std::uint8_t*>(w.data) + r * row_bytes;
    const std::uint8_t* mask = row + values_bytes;
    const std::size_t e = r % kRows;
    for (std::size_t gi = 0; gi < op.groups(); ++gi) {
      const unsigned bits = (mask[gi / 2] >> (4 * (gi % 2))) & 0xfu;
      if (std::popcount(bits) != 2) {
        return invalid_argument("pack_sparse_nm: " + w.name + " row " + std::to_string(r) + " group " + std::to_string(gi) +
                                " does not mark exactly 2 of 4 columns");
      }
      std::uint8_t* chunk = dst.data() + (r / kRows * op.chunks() + gi / kChunkGroups) * kChunkBytes;
      const std::size_t j = gi % kChunkGroups;
      const unsigned first = static_cast<unsigned>(std::countr_zero(bits));
      const unsigned second = static_cast<unsigned>(std::countr_zero(bits & (bits - 1)));
      std::uint16_t pos;
      std::memcpy(&pos, chunk + 2 * e, 2);
      pos = static_cast<std::uint16_t>(pos | (first << (4 * j)) | (second << (4 * j + 2)));
      std::memcpy(chunk + 2 * e, &pos, 2);
      for (std::size_t k = 0; k < 2; ++k) {
        std::memcpy(chunk + kPosBytes + ((2 * j + k) * kRows + e) * 2, row + (2 * gi + k) * 2, 2);
      }
    }
  }
  return Status::ok();
}

void gemv_sparse_packed(std::span<const MatmulProduct> products, std::int64_t n_tokens, ThreadPool& pool,
                        std::int64_t min_parallel_macs) {
  std::vector<Operands> ops;
  std::vector<std::int64_t> outs;
  std::int64_t macs = 0;
  std::size_t max_row_bytes = 0;
  for (const MatmulProduct& p : products) {
    ops.push_back(operands(*p.w, p.x, n_tokens, p.y));
    outs.push_back(p.w->n_rows());
    macs += p.w->n_rows() * p.w->row_length() * n_tokens;
    max_row_bytes = std::max(max_row_bytes, *p.w->row_bytes());
  }
  split_products_guided(outs, macs, max_row_bytes, kSparsePackRows, pool, min_parallel_macs,
                        [&](std::size_t p, std::int64_t begin, std::int64_t end) {
                          HWY_DYNAMIC_DISPATCH(SparseGemvGroups)(ops[p], static_cast<std::size_t>(begin / kSparsePackRows),
                                                           static_cast<std::size_t>(end / kSparsePackRows));
                        });
}

void gemv_sparse_packed_reference(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                                  std::span<float> y) {
  const Operands op = operands(w, x, n_tokens, y);
  for (std::size_t g = 0; g < op.out / kRows; ++g) sparse_packed_detail::GroupScalar(op, g);
}

}  // namespace peregrine
#endif  // HWY_ONCE
