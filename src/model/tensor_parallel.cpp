#include "peregrine/model/tensor_parallel.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace peregrine {
namespace {

// How a canonical tensor is split: rows or columns in `parts` equal parts, or replicated.
enum class Split { kReplicate, kRows, kColumns };

// "blk.L.<rest>" → rest; other names → nullopt.
std::optional<std::string> layer_suffix(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return std::nullopt;
  const std::size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return std::nullopt;
  return name.substr(dot + 1);
}

// "ffn_gate.7.weight" → "ffn_gate.weight" (an expert's matrix split as the dense one is).
std::string without_expert_index(const std::string& rest) {
  const std::size_t a = rest.find('.');
  const std::size_t b = a == std::string::npos ? a : rest.find('.', a + 1);
  if (b == std::string::npos) return rest;
  const std::string middle = rest.substr(a + 1, b - a - 1);
  if (middle.empty() || middle.find_first_not_of("0123456789") != std::string::npos) return rest;
  return rest.substr(0, a) + rest.substr(b);
}

// How a layer tensor is split, by its name without layer and expert index ("attn_q.weight").
Split split_of(const std::string& base) {
  for (const char* rows : {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias",
                           "ffn_gate.weight", "ffn_up.weight", "ffn_gate_shexp.weight", "ffn_up_shexp.weight"}) {
    if (base == rows) return base.ends_with(".bias") ? Split::kColumns : Split::kRows;  // a bias is one row
  }
  for (const char* cols : {"attn_output.weight", "ffn_down.weight", "ffn_down_shexp.weight"}) {
    if (base == cols) return Split::kColumns;
  }
  return Split::kReplicate;
}

// Whether a row of `t` is a sequence of independent blocks (any whole number of them is a row
// of the same dtype): the float types and the ggml block formats.
bool block_rows(DType t) {
  switch (t) {
    case DType::kF32: case DType::kF16: case DType::kBF16: case DType::kQ8_0: case DType::kQ4_0:
    case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1: case DType::kIQ4_NL: case DType::kQ2_K:
    case DType::kQ3_K: case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K: case DType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}

// Rows [r0, r1) of the 2-D `t`: a view of its bytes.
Expected<TensorView> row_slice(const TensorView& t, std::int64_t r0, std::int64_t r1) {
  const std::optional<std::size_t> rb = t.row_bytes();
  if (t.shape.size() != 2 || !rb) return invalid_argument("tensor parallelism cannot split the rows of " + t.name);
  TensorView v = t;
  v.shape = {r1 - r0, t.shape[1]};
  v.data = static_cast<const std::uint8_t*>(t.data) + static_cast<std::size_t>(r0) * *rb;
  v.nbytes = static_cast<std::size_t>(r1 - r0) * *rb;
  return v;
}

// Copies bits [from, from + n) of `src` to bits [0, n) of `dst` (LSB-first within bytes).
void copy_bits(const std::uint8_t* src, std::int64_t from, std::uint8_t* dst, std::int64_t n) {
  if (from % 8 == 0 && n % 8 == 0) {  // whole bytes
    std::memcpy(dst, src + from / 8, static_cast<std::size_t>(n / 8));
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t b = from + i;
    if ((src[b / 8] >> (b % 8)) & 1) dst[i / 8] = static_cast<std::uint8_t>(dst[i / 8] | (1u << (i % 8)));
  }
}

// How columns [c0, c1) of one stored row of `t` become a row of the slice: its bytes, its
// QuantParams, and the copy.
struct ColumnSlicer {
  std::size_t row_bytes = 0;
  QuantParams quant;
  std::function<void(const std::uint8_t* src, std::uint8_t* dst)> copy;
};

Status block_split_error(const TensorView& t, std::int64_t c0, std::int64_t c1, std::int64_t block) {
  return invalid_argument("tensor parallelism would split a " + std::string(dtype_name(t.dtype)) + " block of " + t.name +
                          " (columns " + std::to_string(c0) + ".." + std::to_string(c1) + " of " + std::to_string(t.row_length()) +
                          ", blocks of " + std::to_string(block) + "); use fewer ranks");
}

// Float and ggml block rows (whole blocks), or row-scaled ones (the scale, then the bytes).
Expected<ColumnSlicer> block_slicer(const TensorView& t, std::int64_t c0, std::int64_t c1) {
  const bool row_scaled = t.dtype == DType::kI8 || t.dtype == DType::kF8E4M3 || t.dtype == DType::kF8E5M2;
  const std::int64_t block = static_cast<std::int64_t>(dtype_block_size(t.dtype)), width = c1 - c0;
  if (c0 % block != 0 || width % block != 0) return block_split_error(t, c0, c1, block);
  const std::size_t head = row_scaled ? kRowScaleBytes : 0;
  const std::size_t from = row_scaled ? head + static_cast<std::size_t>(c0) : *dtype_row_bytes(t.dtype, static_cast<std::uint64_t>(c0));
  const std::size_t body = row_scaled ? static_cast<std::size_t>(width) : *dtype_row_bytes(t.dtype, static_cast<std::uint64_t>(width));
  return ColumnSlicer{head + body, t.quant, [=](const std::uint8_t* src, std::uint8_t* dst) {
                        std::memcpy(dst, src, head);
                        std::memcpy(dst + head, src + from, body);
                      }};
}

// Group-wise int rows {f16 scale[G]; u8 zero[G] if asymmetric; bit-packed codes}: whole groups
// (a per-channel row keeps its one scale and zero, its group becoming the slice's width).
Expected<ColumnSlicer> int_slicer(const TensorView& t, std::int64_t c0, std::int64_t c1) {
  const QuantParams& p = t.quant;
  const std::int64_t cols = t.row_length(), width = c1 - c0;
  const bool per_channel = p.group_size == cols;
  if (!per_channel && (c0 % p.group_size != 0 || width % p.group_size != 0)) return block_split_error(t, c0, c1, p.group_size);
  QuantParams q = p;
  if (per_channel) q.group_size = width;
  const std::int64_t groups = cols / p.group_size, g0 = per_channel ? 0 : c0 / p.group_size;
  const std::int64_t new_groups = per_channel ? 1 : width / p.group_size;
  const std::size_t meta = p.asymmetric ? 3 : 2;  // f16 scale (+ u8 zero) per group
  const std::size_t row = *row_bytes(DType::kInt, q, static_cast<std::uint64_t>(width));
  return ColumnSlicer{row, q, [=](const std::uint8_t* src, std::uint8_t* dst) {
                        std::memset(dst, 0, row);
                        std::memcpy(dst, src + g0 * 2, static_cast<std::size_t>(new_groups) * 2);
                        if (p.asymmetric) std::memcpy(dst + new_groups * 2, src + groups * 2 + g0, static_cast<std::size_t>(new_groups));
                        copy_bits(src + groups * static_cast<std::int64_t>(meta), c0 * p.bits,
                                  dst + new_groups * static_cast<std::int64_t>(meta), width * p.bits);
                      }};
}

// N:M sparse rows {kept values in column order; 1-bit column mask}: whole groups of m columns
// (each keeps n values) and, for a block-quantized kept type, whole blocks of kept values.
Expected<ColumnSlicer> sparse_slicer(const TensorView& t, const SparseNmFormat& f, std::int64_t c0, std::int64_t c1) {
  const std::int64_t cols = t.row_length(), width = c1 - c0, k0 = c0 / f.m * f.n, k_width = width / f.m * f.n;
  const auto kept_bytes = [&](std::int64_t k) { return dtype_row_bytes(f.kept, static_cast<std::uint64_t>(k)); };
  if (c0 % f.m != 0 || width % f.m != 0 || !kept_bytes(k0) || !kept_bytes(k_width)) {
    return block_split_error(t, c0, c1, f.kept == DType::kQ8_0 || f.kept == DType::kQ4_0 ? 32 * f.m / f.n : f.m);
  }
  const std::size_t from = *kept_bytes(k0), body = *kept_bytes(k_width), mask_at = *kept_bytes(cols / f.m * f.n);
  const std::size_t row = *dtype_row_bytes(t.dtype, static_cast<std::uint64_t>(width));
  return ColumnSlicer{row, t.quant, [=](const std::uint8_t* src, std::uint8_t* dst) {
                        std::memset(dst, 0, row);
                        std::memcpy(dst, src + from, body);
                        copy_bits(src + mask_at, c0, dst + body, width);
                      }};
}

// Columns [c0, c1) of every row of `t` (1-D: one row), copied into a buffer added to `storage`.
Expected<TensorView> column_slice(const TensorView& t, std::int64_t c0, std::int64_t c1,
                                  std::vector<std::shared_ptr<const void>>& storage) {
  const std::optional<std::size_t> full = t.row_bytes();
  const std::optional<SparseNmFormat> sparse = sparse_nm_format(t.dtype);
  const bool row_scaled = t.dtype == DType::kI8 || t.dtype == DType::kF8E4M3 || t.dtype == DType::kF8E5M2;
  if (!full || (!block_rows(t.dtype) && !row_scaled && t.dtype != DType::kInt && !sparse)) {
    return unsupported("tensor parallelism cannot split the columns of " + t.name + " (" + t.format_string() +
                       "): shard a float or GGUF-block model and convert after (--dtype)");
  }
  PEREGRINE_ASSIGN_OR_RETURN(const ColumnSlicer slicer, t.dtype == DType::kInt ? int_slicer(t, c0, c1)
                                                        : sparse              ? sparse_slicer(t, *sparse, c0, c1)
                                                                              : block_slicer(t, c0, c1));
  const std::int64_t rows = t.n_rows();
  auto bytes = std::make_shared<std::vector<std::uint8_t>>(static_cast<std::size_t>(rows) * slicer.row_bytes);
  const auto* src = static_cast<const std::uint8_t*>(t.data);
  for (std::int64_t r = 0; r < rows; ++r) {
    slicer.copy(src + static_cast<std::size_t>(r) * *full, bytes->data() + static_cast<std::size_t>(r) * slicer.row_bytes);
  }
  TensorView v = t;
  v.shape.back() = c1 - c0;
  v.quant = slicer.quant;
  v.data = bytes->data();
  v.nbytes = bytes->size();
  storage.push_back(std::move(bytes));
  return v;
}

// The width split of a row- or column-split tensor: its dimension along the split, which must
// be a multiple of `size`.
Status check_divisible(const std::string& what, std::int64_t n, int size) {
  if (n % size == 0) return Status::ok();
  return invalid_argument("tensor parallelism over " + std::to_string(size) + " ranks needs " + what + " (" + std::to_string(n) +
                          ") divisible by " + std::to_string(size));
}

// Rank `rank`'s range [begin, end) of the `n` entries of tensor `name` (`base`: its name without
// layer and expert index) along its split: rows (out) for a row split, the last dim (in) for a
// column split; K / V by KV heads, each replicated over size / n_kv_heads ranks when there are
// fewer KV heads than ranks.
Expected<std::pair<std::int64_t, std::int64_t>> split_range(const std::string& name, const std::string& base, std::int64_t n,
                                                            const ModelConfig& c, int rank, int size) {
  if (base.starts_with("attn_k.") || base.starts_with("attn_v.")) {
    const std::int64_t head = n / c.n_kv_heads, per_rank = std::max<std::int64_t>(c.n_kv_heads / size, 1);
    const std::int64_t begin = rank * c.n_kv_heads / size * head;
    return std::make_pair(begin, begin + per_rank * head);
  }
  PEREGRINE_RETURN_IF_ERROR(check_divisible("the split dimension of " + name, n, size));
  return std::make_pair(n / size * rank, n / size * (rank + 1));
}

Status check_config(const ModelConfig& c, int size) {
  PEREGRINE_RETURN_IF_ERROR(check_divisible("n_heads", c.n_heads, size));
  if (c.n_kv_heads % size != 0 && size % c.n_kv_heads != 0) {
    return invalid_argument("tensor parallelism over " + std::to_string(size) + " ranks needs n_kv_heads (" + std::to_string(c.n_kv_heads) +
                            ") divisible by " + std::to_string(size) + " or dividing it");
  }
  PEREGRINE_RETURN_IF_ERROR(check_divisible("ffn_dim", c.ffn_dim, size));
  PEREGRINE_RETURN_IF_ERROR(check_divisible("expert_ffn_dim", c.expert_ffn_dim, size));
  return check_divisible("shared_expert_ffn_dim", c.shared_expert_ffn_dim, size);
}

}  // namespace

Expected<ModelFile> shard_model_file(const ModelFile& full, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size) {
    return invalid_argument("tensor parallel rank " + std::to_string(rank) + " of " + std::to_string(size) + " is out of range");
  }
  const ModelConfig& c = full.config;
  PEREGRINE_RETURN_IF_ERROR(check_config(c, size));
  if (c.ffn_down_hadamard && size > 1) {
    return unsupported("tensor parallelism does not split a Hadamard-rotated FFN (the rotation spans every FFN column)");
  }
  ModelFile shard;
  shard.format = full.format;
  shard.path = full.path;
  shard.config = c;
  shard.storage = full.storage;
  shard.gguf = full.gguf;
  shard.config.n_heads /= size;
  shard.config.n_kv_heads = std::max<std::int64_t>(c.n_kv_heads / size, 1);
  shard.config.ffn_dim /= size;
  shard.config.expert_ffn_dim /= size;
  shard.config.shared_expert_ffn_dim /= size;
  for (const auto& [name, t] : full.tensors) {
    const std::optional<std::string> rest = layer_suffix(name);
    const std::string base = rest ? without_expert_index(*rest) : name;
    const bool whole_norm = rest && (base == "attn_q_norm.weight" || base == "attn_k_norm.weight") && t.numel() != c.head_dim;
    if (whole_norm && base == "attn_k_norm.weight" && c.n_kv_heads < size) {
      return unsupported("tensor parallelism does not split " + name + ": a K norm over the whole projection (" + c.arch +
                         ") with KV heads replicated over ranks");
    }
    const Split split = whole_norm ? Split::kColumns : rest ? split_of(base) : Split::kReplicate;
    if (split == Split::kReplicate || size == 1) {
      shard.tensors.emplace(name, t);
      continue;
    }
    const std::int64_t n = split == Split::kRows ? t.shape.front() : t.row_length();
    PEREGRINE_ASSIGN_OR_RETURN(const auto range, split_range(name, base, n, c, rank, size));
    const auto [begin, end] = range;
    Expected<TensorView> v = split == Split::kRows ? row_slice(t, begin, end) : column_slice(t, begin, end, shard.storage);
    if (!v) return v.status();
    shard.tensors.emplace(name, std::move(*v));
  }
  return shard;
}

Expected<LoraAdapter> shard_lora_adapter(const LoraAdapter& full, const ModelConfig& config, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size) {
    return invalid_argument("tensor parallel rank " + std::to_string(rank) + " of " + std::to_string(size) + " is out of range");
  }
  LoraAdapter out = full;
  if (size == 1) return out;
  for (auto& [name, pair] : out.tensors) {
    const std::optional<std::string> rest = layer_suffix(name);
    const Split split = rest ? split_of(without_expert_index(*rest)) : Split::kReplicate;
    if (split == Split::kReplicate) continue;
    // B's rows follow the weight's rows; A's columns its columns (the all-reduce after the
    // weight sums every rank's B · (A_r · x_r) into B · A · x).
    const std::int64_t n = split == Split::kRows ? pair.out : pair.in;
    PEREGRINE_ASSIGN_OR_RETURN(const auto range, split_range(name, without_expert_index(*rest), n, config, rank, size));
    const auto [begin, end] = range;
    if (split == Split::kRows) {
      pair.b.assign(full.tensors.at(name).b.begin() + begin * pair.rank, full.tensors.at(name).b.begin() + end * pair.rank);
      pair.out = end - begin;
      continue;
    }
    const std::vector<float>& a = full.tensors.at(name).a;
    pair.a.clear();
    for (std::int64_t r = 0; r < pair.rank; ++r) pair.a.insert(pair.a.end(), a.begin() + r * pair.in + begin, a.begin() + r * pair.in + end);
    pair.in = end - begin;
  }
  return out;
}

}  // namespace peregrine
