#include "peregrine/quant/gguf_file_type.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace peregrine {
namespace {

struct FileTypeInfo {
  GgufFileType type;
  std::string_view name;
  std::uint32_t llama_ftype;  // LLAMA_FTYPE_* (llama.h)
  DType dtype;                // the mix's main type
};

constexpr FileTypeInfo kFileTypes[] = {
    {GgufFileType::kF32, "F32", 0, DType::kF32},          {GgufFileType::kF16, "F16", 1, DType::kF16},
    {GgufFileType::kBF16, "BF16", 32, DType::kBF16},      {GgufFileType::kQ4_0, "Q4_0", 2, DType::kQ4_0},
    {GgufFileType::kQ4_1, "Q4_1", 3, DType::kQ4_1},       {GgufFileType::kQ5_0, "Q5_0", 8, DType::kQ5_0},
    {GgufFileType::kQ5_1, "Q5_1", 9, DType::kQ5_1},       {GgufFileType::kQ8_0, "Q8_0", 7, DType::kQ8_0},
    {GgufFileType::kQ2_K, "Q2_K", 10, DType::kQ2_K},      {GgufFileType::kQ3_K_S, "Q3_K_S", 11, DType::kQ3_K},
    {GgufFileType::kQ3_K_M, "Q3_K_M", 12, DType::kQ3_K},  {GgufFileType::kQ3_K_L, "Q3_K_L", 13, DType::kQ3_K},
    {GgufFileType::kQ4_K_S, "Q4_K_S", 14, DType::kQ4_K},  {GgufFileType::kQ4_K_M, "Q4_K_M", 15, DType::kQ4_K},
    {GgufFileType::kQ5_K_S, "Q5_K_S", 16, DType::kQ5_K},  {GgufFileType::kQ5_K_M, "Q5_K_M", 17, DType::kQ5_K},
    {GgufFileType::kQ6_K, "Q6_K", 18, DType::kQ6_K},      {GgufFileType::kIQ4_NL, "IQ4_NL", 25, DType::kIQ4_NL},
    {GgufFileType::kIQ4_XS, "IQ4_XS", 30, DType::kIQ4_XS},
};

const FileTypeInfo& info(GgufFileType t) {
  return *std::find_if(std::begin(kFileTypes), std::end(kFileTypes), [t](const FileTypeInfo& i) { return i.type == t; });
}

bool same_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
         });
}

// The layers that get more bits in the _M mixes: the first and last eighth, and every third
// layer between (llama-quant.cpp use_more_bits).
bool use_more_bits(std::int64_t layer, std::int64_t n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

// Layer index of "blk.N.…" (-1 otherwise). llama-quantize counts attn_v / ffn_down tensors in
// its (layer, name) order, which for one attn_v and one ffn_down per layer is the layer index.
std::int64_t layer_of(const std::string& name) {
  long long layer = -1;
  if (std::sscanf(name.c_str(), "blk.%lld.", &layer) != 1) return -1;
  return layer;
}

bool contains(const std::string& name, std::string_view part) { return name.find(part) != std::string::npos; }

using F = GgufFileType;

// llama_tensor_get_type's choice before the block-size fallback.
DType mix_dtype(F t, const ModelConfig& c, const std::string& name, std::int64_t in) {
  const DType main = gguf_file_type_dtype(t);
  const std::int64_t layer = layer_of(name), n = c.n_layers;
  const std::int64_t n_gqa = c.n_kv_heads > 0 ? c.n_heads / c.n_kv_heads : 1;
  const bool is_70b = c.arch == "llama" && n == 80 && c.n_heads != c.n_kv_heads;  // LLM_TYPE_70B
  const bool iq4 = t == F::kIQ4_NL || t == F::kIQ4_XS;
  if (name == "output.weight" || (c.tied_embeddings && name == "token_embd.weight")) {
    if (in % static_cast<std::int64_t>(dtype_block_size(main)) != 0) return DType::kQ8_0;
    return main == DType::kQ8_0 ? main : DType::kQ6_K;
  }
  if (name == "token_embd.weight") return main;
  if (contains(name, "attn_v.weight")) {
    DType d = main;
    if (t == F::kQ2_K) d = n_gqa >= 4 ? DType::kQ4_K : DType::kQ3_K;
    else if (t == F::kQ3_K_M) d = layer < 2 ? DType::kQ5_K : DType::kQ4_K;
    else if (t == F::kQ3_K_L) d = DType::kQ5_K;
    else if (iq4 && n_gqa >= 4) d = DType::kQ5_K;
    else if ((t == F::kQ4_K_M || t == F::kQ5_K_M) && use_more_bits(layer, n)) d = DType::kQ6_K;
    else if (t == F::kQ4_K_S && layer < 4) d = DType::kQ5_K;
    if (is_70b && (d == DType::kQ3_K || d == DType::kQ4_K)) d = DType::kQ5_K;
    return d;
  }
  if (contains(name, "ffn_down")) {
    if (t == F::kQ2_K) return DType::kQ3_K;
    if (t == F::kQ3_K_M) return layer < n / 16 ? DType::kQ5_K : DType::kQ4_K;
    if (t == F::kQ3_K_L) return DType::kQ5_K;
    if (t == F::kQ4_K_M) return use_more_bits(layer, n) ? DType::kQ6_K : main;
    if (iq4 && layer < n / 8) return DType::kQ5_K;
    if (t == F::kQ5_K_M && use_more_bits(layer, n)) return DType::kQ6_K;
    if (t == F::kQ4_K_S && layer < n / 8) return DType::kQ5_K;
    return main;
  }
  if (contains(name, "attn_output.weight")) {
    if (t == F::kQ2_K) return DType::kQ3_K;
    if (t == F::kQ3_K_M) return DType::kQ4_K;
    if (t == F::kQ3_K_L) return DType::kQ5_K;
  }
  return main;
}

}  // namespace

std::string_view gguf_file_type_name(GgufFileType t) { return info(t).name; }

std::optional<GgufFileType> gguf_file_type_from_name(std::string_view name) {
  for (const FileTypeInfo& i : kFileTypes) {
    if (same_ignoring_case(i.name, name)) return i.type;
  }
  return std::nullopt;
}

std::string gguf_file_type_names() {
  std::string names;
  for (const FileTypeInfo& i : kFileTypes) names += (names.empty() ? "" : ", ") + std::string(i.name);
  return names;
}

std::uint32_t llama_ftype_id(GgufFileType t) { return info(t).llama_ftype; }

DType gguf_file_type_dtype(GgufFileType t) { return info(t).dtype; }

Expected<DType> gguf_tensor_dtype(GgufFileType t, const ModelConfig& c, const std::string& name,
                                  std::span<const std::int64_t> shape) {
  // Norms, and a Mixture-of-Experts router (llama-quantize leaves ffn_gate_inp unquantized).
  if (shape.size() < 2 || contains(name, "_norm.weight") || contains(name, "ffn_gate_inp")) return DType::kF32;
  const DType main = gguf_file_type_dtype(t);
  if (main == DType::kF32 || main == DType::kF16 || main == DType::kBF16) return main;
  const std::int64_t in = shape.back();
  DType d = mix_dtype(t, c, name, in);
  auto whole_blocks = [in](DType x) { return in % static_cast<std::int64_t>(dtype_block_size(x)) == 0; };
  if (whole_blocks(d)) return d;
  switch (d) {  // llama_tensor_get_type's fallback for rows that are not whole blocks
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kIQ4_XS: d = DType::kIQ4_NL; break;
    case DType::kQ4_K: d = DType::kQ5_0; break;
    case DType::kQ5_K: d = DType::kQ5_1; break;
    case DType::kQ6_K: d = DType::kQ8_0; break;
    default:
      return unsupported(name + ": rows of " + std::to_string(in) + " values are not whole " +
                         std::string(dtype_name(d)) + " blocks of " + std::to_string(dtype_block_size(d)) +
                         " (llama-quantize has no fallback for " + std::string(gguf_file_type_name(t)) + " either)");
  }
  return whole_blocks(d) ? d : DType::kF16;
}

}  // namespace peregrine
