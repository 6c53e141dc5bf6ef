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

// Names of the per-layer tensors "blk.L.<suffix>" m holds (by the tensors present, not by
// n_layers: a damaged file's count).
std::vector<std::string> layer_tensors_ending(const ModelFile& m, std::string_view suffix) {
  std::vector<std::string> out;
  for (const auto& [name, t] : m.tensors) {
    if (name.starts_with("blk.") && name.size() > suffix.size() && name.ends_with(suffix) &&
        name[name.size() - suffix.size() - 1] == '.') {
      out.push_back(name);
    }
  }
  return out;
}

constexpr std::string_view kExpertProjections[] = {"ffn_gate", "ffn_up", "ffn_down"};
constexpr std::string_view kStackedSuffix = "_exps.weight";

// Splits stacked expert tensor `name` ("blk.L.<proj>_exps.weight") into per-expert views.
Status split_experts(ModelFile& m, const std::string& name, std::string_view proj) {
  const TensorView t = m.tensors.at(name);
  const auto want = llama_tensor_shape(m.config, name);
  const auto rb = t.row_bytes();
  if (!want || t.shape != *want || !rb || *rb * static_cast<std::size_t>(t.n_rows()) != t.nbytes) {
    TensorView expected;
    expected.shape = want.value_or(std::vector<std::int64_t>{});
    return corrupt_file(m.path + ": tensor '" + name + "' " + t.shape_string() + " of " + t.format_string() + ", expected " +
                        expected.shape_string() + ": expert_count " + std::to_string(m.config.n_experts) +
                        " experts of whole rows");
  }
  const std::string prefix = name.substr(0, name.size() - proj.size() - kStackedSuffix.size());  // "blk.L."
  const std::int64_t rows = t.shape[1];
  for (std::int64_t e = 0; e < t.shape[0]; ++e) {
    const std::string part = prefix + std::string(proj) + "." + std::to_string(e) + ".weight";
    if (m.find(part)) return corrupt_file(m.path + ": both '" + name + "' and '" + part + "' (stacked and per-expert forms)");
    TensorView v = row_view(t, part, e * rows, rows, *rb);
    v.shape = {rows, t.shape[2]};
    m.tensors.emplace(part, std::move(v));
  }
  m.tensors.erase(name);
  return Status::ok();
}

}  // namespace

Status split_expert_tensors(ModelFile& m) {
  for (std::string_view proj : kExpertProjections) {
    const std::string suffix = std::string(proj) + std::string(kStackedSuffix);
    for (const std::string& name : layer_tensors_ending(m, suffix)) PEREGRINE_RETURN_IF_ERROR(split_experts(m, name, proj));
  }
  return Status::ok();
}

std::optional<std::pair<std::string, std::int64_t>> stacked_expert_name(std::string_view name) {
  constexpr std::string_view kWeight = ".weight";
  if (!name.starts_with("blk.") || !name.ends_with(kWeight)) return std::nullopt;
  name.remove_suffix(kWeight.size());
  const std::size_t dot = name.rfind('.');
  const std::string_view index = name.substr(dot + 1), head = name.substr(0, dot);  // "blk.L.<proj>"
  if (index.empty() || index.size() > 9 || index.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  for (std::string_view proj : kExpertProjections) {
    if (head.ends_with(proj) && head.size() > proj.size() && head[head.size() - proj.size() - 1] == '.') {
      return std::pair{std::string(head) + std::string(kStackedSuffix), std::stoll(std::string(index))};
    }
  }
  return std::nullopt;
}

std::vector<const TensorView*> expert_parts(const ModelFile& m, const std::string& stacked) {
  const std::string head = stacked.substr(0, stacked.size() - kStackedSuffix.size());  // "blk.L.<proj>"
  std::vector<const TensorView*> parts;
  for (std::int64_t e = 0; e < m.config.n_experts; ++e) parts.push_back(m.find(head + "." + std::to_string(e) + ".weight"));
  return parts;
}

void name_gguf_fused_gate_up(ModelFile& m) {
  constexpr std::string_view kUp = "ffn_up.weight";
  for (const std::string& up : layer_tensors_ending(m, kUp)) {
    auto node = m.tensors.extract(up);
    node.key() = node.mapped().name = up.substr(0, up.size() - kUp.size()) + "ffn_gate_up.weight";
    m.tensors.insert(std::move(node));
  }
}

Status split_fused_projections(ModelFile& m) {
  const ModelConfig& c = m.config;
  const std::int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  const std::pair<const char*, std::int64_t> qkv[] = {{"attn_q", q_dim}, {"attn_k", kv_dim}, {"attn_v", kv_dim}};
  const std::pair<const char*, std::int64_t> gate_up[] = {{"ffn_gate", c.ffn_dim}, {"ffn_up", c.ffn_dim}};
  constexpr std::string_view kQkv = "attn_qkv.weight", kGateUp = "ffn_gate_up.weight";
  for (const std::string& name : layer_tensors_ending(m, kQkv)) PEREGRINE_RETURN_IF_ERROR(split(m, name, kQkv, qkv));
  for (const std::string& name : layer_tensors_ending(m, kGateUp)) PEREGRINE_RETURN_IF_ERROR(split(m, name, kGateUp, gate_up));
  return Status::ok();
}

Status check_concat_rows(const std::string& name, std::span<const TensorView* const> parts) {
  for (const TensorView* p : parts) {
    if (!p) return invalid_argument("cannot write '" + name + "': one of the tensors it fuses is missing");
    const TensorView& first = *parts[0];
    const auto rb = p->row_bytes();
    if (p->dtype != first.dtype || p->shape.size() != 2 || first.shape.size() != 2 || p->shape[1] != first.shape[1] ||
        p->quant != first.quant || !rb || *rb * static_cast<std::size_t>(p->shape[0]) != p->nbytes) {
      return invalid_argument("cannot fuse '" + p->name + "' (" + p->format_string() + " " + p->shape_string() + ") into '" + name +
                              "' with '" + first.name + "' (" + first.format_string() + " " + first.shape_string() +
                              "): one tensor holds one dtype");
    }
  }
  return Status::ok();
}

Expected<OwnedTensor> concat_rows(const std::string& name, std::span<const TensorView* const> parts) {
  PEREGRINE_RETURN_IF_ERROR(check_concat_rows(name, parts));
  TensorView meta = *parts[0];
  meta.name = name;
  meta.shape[0] = 0;
  std::vector<std::uint8_t> bytes;
  for (const TensorView* p : parts) {
    meta.shape[0] += p->shape[0];
    const auto* data = static_cast<const std::uint8_t*>(p->data);
    bytes.insert(bytes.end(), data, data + p->nbytes);
  }
  return own_tensor(std::move(meta), std::move(bytes));
}

}  // namespace peregrine
