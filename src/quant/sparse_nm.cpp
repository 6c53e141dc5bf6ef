#include "peregrine/quant/sparse_nm.h"

#include <bit>
#include <string>

#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/quantize_rtn.h"

namespace peregrine {
namespace {

// The m mask bits of group g (m is 4 or 8, so a group never straddles a byte).
unsigned group_bits(const std::uint8_t* mask, std::size_t g, int m) {
  const std::size_t bit = g * static_cast<std::size_t>(m);
  return (mask[bit / 8] >> (bit % 8)) & ((1u << m) - 1u);
}

}  // namespace

Expected<DType> sparse_nm_dtype(SparseBase base, SparsePattern p) {
  const bool s24 = p.n == 2 && p.m == 4;
  if (!s24 && !(p.n == 4 && p.m == 8)) {
    return unsupported("N:M sparsity " + std::to_string(p.n) + ":" + std::to_string(p.m) +
                       " is not stored (supported: 2:4, 4:8)");
  }
  switch (base) {
    case SparseBase::kF16: return s24 ? DType::kF16_S24 : DType::kF16_S48;
    case SparseBase::kBF16: return s24 ? DType::kBF16_S24 : DType::kBF16_S48;
    case SparseBase::kQ8: return s24 ? DType::kQ8_0_S24 : DType::kQ8_0_S48;
    case SparseBase::kQ4: return s24 ? DType::kQ4_0_S24 : DType::kQ4_0_S48;
  }
  return invalid_argument("unknown SparseBase");
}

Expected<SparseEncoded> encode_sparse_nm(std::span<const float> w, std::int64_t rows, std::int64_t cols,
                                         SparsePattern p, SparseBase base) {
  PEREGRINE_ASSIGN_OR_RETURN(const DType dtype, sparse_nm_dtype(base, p));
  const SparseNmFormat f = *sparse_nm_format(dtype);
  const std::string name(dtype_name(dtype));
  if (rows < 1 || cols < 1 || static_cast<std::uint64_t>(w.size()) != static_cast<std::uint64_t>(rows) * static_cast<std::uint64_t>(cols)) {
    return invalid_argument(name + ": " + std::to_string(w.size()) + " values do not make a [" + std::to_string(rows) +
                            ", " + std::to_string(cols) + "] matrix");
  }
  if (cols % f.m != 0) {
    return invalid_argument(name + ": row length " + std::to_string(cols) + " is not a multiple of " + std::to_string(f.m));
  }
  const auto row_bytes = dtype_row_bytes(dtype, static_cast<std::uint64_t>(cols));
  if (!row_bytes) {
    return invalid_argument(name + ": " + std::to_string(cols / f.m * f.n) + " kept values per row are not a multiple of " +
                            std::to_string(dtype_block_size(f.kept)) + " (" + std::string(dtype_name(f.kept)) + " blocks)");
  }
  const auto n_cols = static_cast<std::size_t>(cols), m = static_cast<std::size_t>(f.m);
  const std::size_t kept = n_cols / m * static_cast<std::size_t>(f.n);
  const std::size_t values_bytes = *row_bytes - (n_cols + 7) / 8;
  SparseEncoded e{dtype, std::vector<std::uint8_t>(static_cast<std::size_t>(rows) * *row_bytes, 0)};
  std::vector<float> values(kept);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    const float* row = w.data() + r * n_cols;
    std::uint8_t* dst = e.bytes.data() + r * *row_bytes;
    std::uint8_t* mask = dst + values_bytes;
    std::size_t k = 0;
    for (std::size_t g = 0; g < n_cols / m; ++g) {
      int nonzeros = 0;
      for (std::size_t j = 0; j < m; ++j) nonzeros += row[g * m + j] != 0.0f;
      if (nonzeros > f.n) {
        return invalid_argument(name + ": row " + std::to_string(r) + " group " + std::to_string(g) + " (columns " +
                                std::to_string(g * m) + ".." + std::to_string(g * m + m - 1) + ") has " +
                                std::to_string(nonzeros) + " nonzeros, more than " + std::to_string(f.n) + " of " +
                                std::to_string(f.m));
      }
      int zeros_to_keep = f.n - nonzeros;
      for (std::size_t j = 0; j < m; ++j) {
        const std::size_t c = g * m + j;
        const bool nonzero = row[c] != 0.0f;
        if (!nonzero && zeros_to_keep == 0) continue;
        zeros_to_keep -= nonzero ? 0 : 1;
        values[k++] = nonzero ? row[c] : 0.0f;
        mask[c / 8] = static_cast<std::uint8_t>(mask[c / 8] | (1u << (c % 8)));
      }
    }
    quantize_rtn(f.kept, values, dst);
  }
  return e;
}

void decode_sparse_nm_row(DType t, const std::uint8_t* src, std::span<float> out) {
  const SparseNmFormat f = *sparse_nm_format(t);
  const std::size_t cols = out.size(), m = static_cast<std::size_t>(f.m);
  const std::size_t kept = cols / m * static_cast<std::size_t>(f.n);
  const std::uint8_t* mask = src + *dtype_row_bytes(f.kept, kept);
  // The kept values go to out[0, kept), then move to their columns from the last one down: the
  // value of column c comes from index < c+1 of what is left, so nothing unread is overwritten.
  dequantize(f.kept, src, out.first(kept));
  std::size_t k = kept;
  for (std::size_t g = cols / m; g-- > 0;) {
    const unsigned bits = group_bits(mask, g, f.m);
    int slots = f.n;
    for (std::size_t j = m; j-- > 0;) {
      const bool take = ((bits >> j) & 1u) != 0 && k > 0 && std::popcount(bits >> j) <= slots;
      out[g * m + j] = take ? out[--k] : 0.0f;
    }
  }
}

Status validate_sparse_nm(const TensorView& w) {
  const auto f = sparse_nm_format(w.dtype);
  const auto row_bytes = w.row_bytes();
  if (!f || !row_bytes || w.nbytes != *row_bytes * static_cast<std::size_t>(w.n_rows())) {
    return invalid_argument("tensor '" + w.name + "' is not an N:M sparse tensor of " + std::to_string(w.nbytes) + " bytes");
  }
  const auto cols = static_cast<std::size_t>(w.row_length()), m = static_cast<std::size_t>(f->m);
  const std::size_t mask_bytes = (cols + 7) / 8;
  for (std::size_t r = 0; r < static_cast<std::size_t>(w.n_rows()); ++r) {
    const std::uint8_t* mask = static_cast<const std::uint8_t*>(w.data) + (r + 1) * *row_bytes - mask_bytes;
    for (std::size_t g = 0; g < cols / m; ++g) {
      if (std::popcount(group_bits(mask, g, f->m)) != f->n) {
        return invalid_argument("tensor '" + w.name + "' (" + std::string(dtype_name(w.dtype)) + ") row " + std::to_string(r) +
                                " group " + std::to_string(g) + ": the position mask does not mark exactly " +
                                std::to_string(f->n) + " of " + std::to_string(f->m) + " columns (corrupt file?)");
      }
    }
    if (cols % 8 != 0 && (mask[mask_bytes - 1] >> (cols % 8)) != 0) {
      return invalid_argument("tensor '" + w.name + "' row " + std::to_string(r) + ": position mask bits set past column " +
                              std::to_string(cols - 1) + " (corrupt file?)");
    }
  }
  return Status::ok();
}

}  // namespace peregrine
