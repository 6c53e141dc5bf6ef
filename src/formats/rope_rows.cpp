#include "formats/rope_rows.h"

#include <cstring>
#include <string_view>

namespace peregrine {
namespace {

bool is_rope_tensor(std::string_view name) {
  return name.ends_with(".attn_q.weight") || name.ends_with(".attn_k.weight");
}

/// Interleaved row r (head h, dim 2i + half) holds NeoX row h·hd + half·hd/2 + i.
std::int64_t neox_row_of_interleaved(std::int64_t r, std::int64_t head_dim) {
  const std::int64_t within = r % head_dim;
  return r - within + (within % 2) * (head_dim / 2) + within / 2;
}

/// NeoX row j (head h, dim half·hd/2 + i) holds interleaved row h·hd + 2i + half.
std::int64_t interleaved_row_of_neox(std::int64_t j, std::int64_t head_dim) {
  const std::int64_t within = j % head_dim, half = head_dim / 2;
  return j - within + 2 * (within % half) + within / half;
}

}  // namespace

Expected<OwnedTensor> in_rope_order(const TensorView& t, std::int64_t head_dim, RopeStyle from, RopeStyle to) {
  const auto rb = t.row_bytes();
  const auto n = static_cast<std::size_t>(t.n_rows());
  if (!rb || *rb * n != t.nbytes) {
    return invalid_argument("tensor '" + t.name + "' " + t.shape_string() + " of " + std::string(dtype_name(t.dtype)) +
                            " does not match its " + std::to_string(t.nbytes) + " bytes");
  }
  const bool head_dim_entries = t.name.ends_with(".attn_q.bias") || t.name.ends_with(".attn_k.bias") ||
                                t.name.ends_with(".attn_q_norm.weight") || t.name.ends_with(".attn_k_norm.weight");
  if (from != to && head_dim_entries) {
    return unsupported("tensor '" + t.name + "' is indexed by head dim: converting it to the other RoPE pairing is not supported");
  }
  if (from == to || !is_rope_tensor(t.name)) return OwnedTensor{t, nullptr};
  if (head_dim < 2 || t.n_rows() % head_dim != 0) {
    return invalid_argument("tensor '" + t.name + "' has " + std::to_string(t.n_rows()) + " rows, not whole heads of " +
                            std::to_string(head_dim));
  }
  std::vector<std::uint8_t> bytes(*rb * n);
  const auto* src = static_cast<const std::uint8_t*>(t.data);
  for (std::size_t r = 0; r < n; ++r) {
    const auto row = static_cast<std::int64_t>(r);
    const std::int64_t from_row =
        to == RopeStyle::kNeox ? interleaved_row_of_neox(row, head_dim) : neox_row_of_interleaved(row, head_dim);
    std::memcpy(bytes.data() + r * *rb, src + static_cast<std::size_t>(from_row) * *rb, *rb);
  }
  return own_tensor(t, std::move(bytes));
}

}  // namespace peregrine
