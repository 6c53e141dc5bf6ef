#include "formats/fused_projections.h"

#include <cstring>
#include <vector>

namespace peregrine {
namespace {

// Rows [begin, begin + count) of `t` (whole rows of its dtype) as a view named `name`.
TensorView row_view(const TensorView& t, std::string name, std::int64_t begin, std::int64_t count, std::size_t row_bytes) {
  TensorView v = t;
  v.name = std::move(name);
  v.shape[0] = count;
  v.data = static_cast<const std::uint8_t*>(t.data) + static_cast<std::size_t>(begin) * row_bytes;
  v.nbytes = static_cast<std::size_t>(count) * row_bytes;
  return v;
}

// Splits the fused tensor `name` ("blk.L.<fused>.weight") into `parts` (suffix, rows) in order.
Status split(ModelFile& m, const std::string& name, std::string_view fused,
             std::span<const std::pair<const char*, std::int64_t>> parts) {
  const std::string prefix = name.substr(0, name.size() - fused.size());  // "blk.L."
  const auto it = m.tensors.find(name);
  const TensorView t = it->second;
  std::int64_t rows = 0;
  for (const auto& [part, n] : parts) {
    rows += n;
    if (m.find(prefix + part + ".weight")) {
      return corrupt_file(m.path + ": both '" + name + "' and '" + prefix + part + ".weight' (fused and split forms)");
    }
  }
  const auto rb = t.row_bytes();
  if (t.shape.size() != 2 || t.shape[0] != rows || t.shape[1] != m.config.dim || !rb ||
      *rb * static_cast<std::size_t>(rows) != t.nbytes) {
    return corrupt_file(m.path + ": tensor '" + name + "' " + t.shape_string() + " of " + t.format_string() + " is not " +
                        std::to_string(rows) + " whole rows of " + std::to_string(m.config.dim));
  }
  std::int64_t begin = 0;
  for (const auto& [part, n] : parts) {
    const std::string part_name = prefix + part + ".weight";
    m.tensors.emplace(part_name, row_view(t, part_name, begin, n, *rb));
    begin += n;
  }
  m.tensors.erase(name);
  return Status::ok();
}

}  // namespace

Status split_fused_projections(ModelFile& m) {
  const ModelConfig& c = m.config;
  const std::int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  const std::pair<const char*, std::int64_t> qkv[] = {{"attn_q", q_dim}, {"attn_k", kv_dim}, {"attn_v", kv_dim}};
  const std::pair<const char*, std::int64_t> gate_up[] = {{"ffn_gate", c.ffn_dim}, {"ffn_up", c.ffn_dim}};
  constexpr std::string_view kQkv = "attn_qkv.weight", kGateUp = "ffn_gate_up.weight";
  std::vector<std::string> fused;  // by the tensors present, not by n_layers (a damaged file's count)
  for (const auto& [name, t] : m.tensors) {
    if (name.starts_with("blk.") && (name.ends_with("." + std::string(kQkv)) || name.ends_with("." + std::string(kGateUp)))) {
      fused.push_back(name);
    }
  }
  for (const std::string& name : fused) {
    const bool is_qkv = name.ends_with(kQkv);
    using Parts = std::span<const std::pair<const char*, std::int64_t>>;
    PEREGRINE_RETURN_IF_ERROR(split(m, name, is_qkv ? kQkv : kGateUp, is_qkv ? Parts(qkv) : Parts(gate_up)));
  }
  return Status::ok();
}

Expected<OwnedTensor> concat_rows(const std::string& name, std::span<const TensorView* const> parts) {
  TensorView meta = *parts[0];
  meta.name = name;
  meta.shape[0] = 0;
  std::vector<std::uint8_t> bytes;
  for (const TensorView* p : parts) {
    const auto rb = p->row_bytes();
    if (p->dtype != meta.dtype || p->shape.size() != 2 || p->shape[1] != meta.shape[1] || !(p->quant == meta.quant) || !rb ||
        *rb * static_cast<std::size_t>(p->shape[0]) != p->nbytes) {
      return invalid_argument("cannot fuse '" + p->name + "' (" + p->format_string() + " " + p->shape_string() + ") into '" + name +
                              "' with '" + parts[0]->name + "' (" + parts[0]->format_string() + " " + parts[0]->shape_string() +
                              "): one tensor holds one dtype");
    }
    meta.shape[0] += p->shape[0];
    const auto* data = static_cast<const std::uint8_t*>(p->data);
    bytes.insert(bytes.end(), data, data + p->nbytes);
  }
  return own_tensor(std::move(meta), std::move(bytes));
}

}  // namespace peregrine
