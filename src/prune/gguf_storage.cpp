#include "peregrine/prune/gguf_storage.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/fp16.h"
#include "peregrine/quant/int_group.h"
#include "peregrine/quant/sparse_nm.h"

namespace peregrine {
namespace {

constexpr std::int64_t kBlock = 32;

bool block_compatible(const TensorView& t) {
  const QuantParams& p = t.quant;
  return !p.asymmetric && p.act_bits == 16 && (p.bits == 4 || p.bits == 8) && p.group_size % kBlock == 0 &&
         t.row_length() % kBlock == 0;
}

// One row of kInt codes as Q4_0 ({f16 d; 16 bytes: value j low nibble, j + 16 high}) or Q8_0
// ({f16 d; int8 q[32]}) blocks; d = the group's scale, q = code (Q4_0) or code − 128 (Q8_0).
void write_blocks(const QuantParams& p, const IntRow& row, std::uint8_t* dst) {
  const std::size_t block_bytes = p.bits == 4 ? 18 : 34;
  for (std::size_t b = 0; b * kBlock < row.codes.size(); ++b) {
    std::uint8_t* out = dst + b * block_bytes;
    const std::uint16_t d = f32_to_f16(row.groups[b * kBlock / static_cast<std::size_t>(p.group_size)].scale);
    std::memcpy(out, &d, sizeof d);
    const std::uint8_t* q = row.codes.data() + b * kBlock;
    for (std::size_t j = 0; j < kBlock; ++j) {
      if (p.bits == 8) {
        out[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(q[j] - 128));
      } else if (j < kBlock / 2) {
        out[2 + j] = static_cast<std::uint8_t>(q[j] | (q[j + kBlock / 2] << 4));
      }
    }
  }
}

struct Converted {
  TensorView view;
  std::shared_ptr<std::vector<std::uint8_t>> bytes;
};

Converted to_blocks(const TensorView& t) {
  const DType d = t.quant.bits == 4 ? DType::kQ4_0 : DType::kQ8_0;
  const std::int64_t cols = t.row_length();
  const std::size_t src_rb = *t.row_bytes(), dst_rb = *dtype_row_bytes(d, static_cast<std::uint64_t>(cols));
  auto bytes = std::make_shared<std::vector<std::uint8_t>>(dst_rb * static_cast<std::size_t>(t.n_rows()));
  for (std::int64_t r = 0; r < t.n_rows(); ++r) {
    const IntRow row = unpack_int_row(t.quant, static_cast<const std::uint8_t*>(t.data) + src_rb * static_cast<std::size_t>(r), cols);
    write_blocks(t.quant, row, bytes->data() + dst_rb * static_cast<std::size_t>(r));
  }
  return {TensorView{t.name, d, t.shape, bytes->data(), bytes->size(), {}}, bytes};
}

Converted to_f16(const TensorView& t) {
  const std::int64_t cols = t.row_length();
  auto bytes = std::make_shared<std::vector<std::uint8_t>>(static_cast<std::size_t>(t.numel()) * 2);
  std::vector<float> row(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < t.n_rows(); ++r) {
    dequantize_row(t, r, row);
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::uint16_t h = f32_to_f16(row[static_cast<std::size_t>(j)]);
      std::memcpy(bytes->data() + static_cast<std::size_t>(r * cols + j) * 2, &h, 2);
    }
  }
  return {TensorView{t.name, DType::kF16, t.shape, bytes->data(), bytes->size(), {}}, bytes};
}

// Which columns of a row a sparse tensor keeps: the nonzero ones, and in a group of m with fewer
// than n, its first zero columns (quant/sparse_nm.h's rule).
std::vector<bool> kept_columns(std::vector<bool> keep, const SparsityTarget& t) {
  for (std::size_t g = 0; g < keep.size(); g += static_cast<std::size_t>(t.m)) {
    auto missing = t.n - std::count(keep.begin() + static_cast<std::ptrdiff_t>(g), keep.begin() + static_cast<std::ptrdiff_t>(g) + t.m, true);
    for (std::size_t j = g; missing > 0; ++j) {
      if (!keep[j]) keep[j] = true, --missing;
    }
  }
  return keep;
}

// A kInt linear as Q4_0 / Q8_0 sparse rows: the kept codes as blocks of 32 with their group's
// scale, then the mask (bit c of byte c / 8 set for a kept column).
Converted to_sparse_blocks(const TensorView& t, DType sparse) {
  const std::int64_t cols = t.row_length();
  const SparseNmFormat f = *sparse_nm_format(sparse);
  QuantParams kept_params = t.quant;  // groups over the kept codes: 32 of them per group
  kept_params.group_size = t.quant.group_size * f.n / f.m;
  const std::size_t src_rb = *t.row_bytes(), dst_rb = *dtype_row_bytes(sparse, static_cast<std::uint64_t>(cols));
  const std::size_t values_bytes = *dtype_row_bytes(f.kept, static_cast<std::uint64_t>(cols * f.n / f.m));
  auto bytes = std::make_shared<std::vector<std::uint8_t>>(dst_rb * static_cast<std::size_t>(t.n_rows()));
  for (std::int64_t r = 0; r < t.n_rows(); ++r) {
    IntRow row = unpack_int_row(t.quant, static_cast<const std::uint8_t*>(t.data) + src_rb * static_cast<std::size_t>(r), cols);
    std::vector<bool> nonzero(static_cast<std::size_t>(cols));
    for (std::size_t j = 0; j < nonzero.size(); ++j) nonzero[j] = row.codes[j] != row.groups[j / static_cast<std::size_t>(t.quant.group_size)].zero;
    const std::vector<bool> keep = kept_columns(std::move(nonzero), {0.0, f.n, f.m});
    IntRow kept{std::move(row.groups), {}};
    std::uint8_t* out = bytes->data() + dst_rb * static_cast<std::size_t>(r);
    for (std::size_t j = 0; j < keep.size(); ++j) {
      if (!keep[j]) continue;
      kept.codes.push_back(row.codes[j]);
      out[values_bytes + j / 8] |= static_cast<std::uint8_t>(1u << (j % 8));
    }
    write_blocks(kept_params, kept, out);
  }
  return {TensorView{t.name, sparse, t.shape, bytes->data(), bytes->size(), {}}, bytes};
}

// A float linear as F16 (BF16) sparse rows through encode_sparse_nm.
Expected<Converted> to_sparse_float(const TensorView& t, const SparsityTarget& target) {
  std::vector<float> values(static_cast<std::size_t>(t.numel()));
  const std::int64_t cols = t.row_length();
  for (std::int64_t r = 0; r < t.n_rows(); ++r) {
    dequantize_row(t, r, std::span(values).subspan(static_cast<std::size_t>(r * cols), static_cast<std::size_t>(cols)));
  }
  const SparseBase base = t.dtype == DType::kBF16 ? SparseBase::kBF16 : SparseBase::kF16;
  PEREGRINE_ASSIGN_OR_RETURN(auto e, encode_sparse_nm(values, t.n_rows(), cols, {target.n, target.m}, base));
  auto bytes = std::make_shared<std::vector<std::uint8_t>>(std::move(e.bytes));
  return Converted{TensorView{t.name, e.dtype, t.shape, bytes->data(), bytes->size(), {}}, bytes};
}

// The sparse dtype a pruned linear can take under `target`, or nullopt (stays dense).
std::optional<DType> sparse_dtype_for(const TensorView& t, const SparsityTarget& target) {
  if (!target.nm() || 2 * target.n != target.m || t.row_length() % target.m != 0) return std::nullopt;
  SparseBase base = t.dtype == DType::kBF16 ? SparseBase::kBF16 : SparseBase::kF16;
  if (t.dtype == DType::kInt) {
    if (!block_compatible(t) || t.quant.group_size * target.n / target.m != kBlock) return std::nullopt;
    base = t.quant.bits == 4 ? SparseBase::kQ4 : SparseBase::kQ8;
  }
  auto d = sparse_nm_dtype(base, {target.n, target.m});
  return d ? std::optional<DType>(*d) : std::nullopt;
}

}  // namespace

Expected<ModelFile> gguf_storage(const ModelFile& pruned, const SparsityTarget& target, const std::vector<std::string>& linears,
                                 std::vector<std::string>& notes) {
  ModelFile out = pruned;
  bool rounded = false;
  for (auto& [name, t] : out.tensors) {
    if (!t.row_bytes() || *t.row_bytes() * static_cast<std::size_t>(t.n_rows()) != t.nbytes) {
      return invalid_argument("gguf storage: tensor '" + name + "' does not match its " + std::to_string(t.nbytes) + " bytes");
    }
    const bool pruned_linear = std::find(linears.begin(), linears.end(), name) != linears.end();
    const std::optional<DType> sparse = pruned_linear ? sparse_dtype_for(t, target) : std::nullopt;
    Converted c;
    if (sparse && t.dtype == DType::kInt) {
      c = to_sparse_blocks(t, *sparse);
    } else if (sparse) {
      PEREGRINE_ASSIGN_OR_RETURN(c, to_sparse_float(t, target));
      rounded = rounded || t.dtype == DType::kF32;
    } else if (t.dtype == DType::kInt) {
      c = block_compatible(t) ? to_blocks(t) : to_f16(t);
      if (c.view.dtype == DType::kF16) {
        notes.push_back(name + ": " + t.format_string() + " rows of " + std::to_string(t.row_length()) +
                        " values are not whole Q4_0 / Q8_0 blocks: stored as F16 of its values");
      }
    } else {
      continue;
    }
    t = std::move(c.view);
    out.storage.push_back(std::move(c.bytes));
  }
  if (rounded) notes.push_back("the N:M linears of this F32 model keep their values as f16 (the sparse types hold f16 / bf16, q8_0, q4_0)");
  return out;
}

}  // namespace peregrine
