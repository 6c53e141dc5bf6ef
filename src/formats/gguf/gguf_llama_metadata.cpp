#include "peregrine/formats/gguf/gguf_llama_metadata.h"

#include <cmath>
#include <type_traits>
#include <variant>

#include "peregrine/formats/config_keys.h"

#include "peregrine/core/mapped_file.h"
#include "peregrine/tokenizer/llama2c_tokenizer.h"

namespace peregrine {

std::uint32_t llama_file_type(DType t) {
  switch (t) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ4_1: return 3;
    case DType::kQ8_0: return 7;
    case DType::kQ5_0: return 8;
    case DType::kQ5_1: return 9;
    case DType::kQ2_K: return 10;
    case DType::kQ3_K: return 12;
    case DType::kQ4_K: return 15;
    case DType::kQ5_K: return 17;
    case DType::kQ6_K: return 18;
    case DType::kIQ4_NL: return 25;
    case DType::kIQ4_XS: return 30;
    case DType::kBF16: return 32;
    default: return 0;  // no GGUF file type (the writer rejects these tensors)
  }
  return 0;
}

namespace {

/// The keys of formats/config_keys.h that gguf_model.cpp would not read back without them
/// (config_key_written), and {arch}.attention.scale when set or when llama.cpp's layer-count rule
/// would apply.
Status add_attention_variant_metadata(GgufWriter& w, const ModelConfig& c) {
  const Architecture* family = find_architecture(c.arch);
  for (const ConfigKey& k : config_keys()) {
    if (!config_key_written(k, c, ConfigKeyFormat::kGguf)) continue;
    const std::string key = c.arch + "." + k.gguf;
    PEREGRINE_RETURN_IF_ERROR(std::visit(
        [&](auto field) {
          const auto v = c.*field;
          if constexpr (std::is_same_v<decltype(v), const float>) return w.add(key, gguf_f32(v));
          return w.add(key, gguf_u32(static_cast<std::uint32_t>(v)));
        },
        k.field));
  }
  if (c.attn_scale > 0.0f || (family && family->gguf_scale_dim_layers == c.n_layers)) {
    const float scale = c.attn_scale > 0.0f ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    PEREGRINE_RETURN_IF_ERROR(w.add(c.arch + ".attention.scale", gguf_f32(scale)));
  }
  return Status::ok();
}

}  // namespace

namespace {

/// {arch}.rope.scaling.* for linear and YaRN scaling as llama.cpp reads them (the YaRN betas
/// only where they differ from llama.cpp's 32 / 1; attn_factor as the multiple of YaRN's
/// default 0.1·ln(factor) + 1), and LongRoPE's as convert_hf_to_gguf.py Phi3MiniModel writes
/// them (no type key; original_context_length and the absolute attn_factor, which llama.cpp's
/// rope kernel multiplies cos and sin by; its factors are the caller's tensors). Llama 3
/// scaling is the rope_freqs.weight tensor instead. Errors: kUnsupported for dynamic NTK
/// scaling (llama.cpp has none).
Status add_rope_scaling(GgufWriter& w, const ModelConfig& c) {
  const RopeScaling& r = c.rope_scaling;
  const auto key = [&](const char* k) { return c.arch + ".rope.scaling." + k; };
  const auto original_context = [&] { return w.add(key("original_context_length"), gguf_u32(static_cast<std::uint32_t>(r.original_context))); };
  if (r.kind == RopeScaling::Kind::kDynamic) {
    return unsupported("dynamic NTK RoPE scaling has no GGUF form (llama.cpp has none); save this model as a Hugging Face folder");
  }
  if (r.kind == RopeScaling::Kind::kLongRope) {
    PEREGRINE_RETURN_IF_ERROR(original_context());
    return w.add(key("attn_factor"), gguf_f32(rope_attention_factor(r)));
  }
  if (r.kind != RopeScaling::Kind::kLinear && r.kind != RopeScaling::Kind::kYarn) return Status::ok();
  PEREGRINE_RETURN_IF_ERROR(w.add(key("type"), gguf_string(rope_scaling_name(r.kind))));
  PEREGRINE_RETURN_IF_ERROR(w.add(key("factor"), gguf_f32(r.factor)));
  if (r.kind == RopeScaling::Kind::kLinear) return Status::ok();
  PEREGRINE_RETURN_IF_ERROR(original_context());
  if (r.beta_fast != 32.0f) PEREGRINE_RETURN_IF_ERROR(w.add(key("yarn_beta_fast"), gguf_f32(r.beta_fast)));
  if (r.beta_slow != 1.0f) PEREGRINE_RETURN_IF_ERROR(w.add(key("yarn_beta_slow"), gguf_f32(r.beta_slow)));
  if (r.attention_factor > 0.0f) {
    RopeScaling by_default = r;
    by_default.attention_factor = 0.0f;
    PEREGRINE_RETURN_IF_ERROR(w.add(key("attn_factor"), gguf_f32(r.attention_factor / rope_attention_factor(by_default))));
  }
  return Status::ok();
}

}  // namespace

Status add_llama_metadata(GgufWriter& w, const std::string& name, const ModelConfig& c, DType matrix_dtype,
                          std::optional<std::uint32_t> file_type) {
  auto u32 = [](std::int64_t v) { return gguf_u32(static_cast<std::uint32_t>(v)); };
  const auto key = [&](const char* k) { return c.arch + "." + k; };
  PEREGRINE_RETURN_IF_ERROR(w.add("general.architecture", gguf_string(c.arch)));
  PEREGRINE_RETURN_IF_ERROR(w.add("general.name", gguf_string(name)));
  PEREGRINE_RETURN_IF_ERROR(w.add("general.file_type", gguf_u32(file_type.value_or(llama_file_type(matrix_dtype)))));
  if (dtype_block_size(matrix_dtype) > 1) PEREGRINE_RETURN_IF_ERROR(w.add("general.quantization_version", gguf_u32(2)));
  PEREGRINE_RETURN_IF_ERROR(w.add(key("vocab_size"), u32(c.vocab_size)));
  PEREGRINE_RETURN_IF_ERROR(w.add(key("context_length"), u32(c.max_seq_len)));
  PEREGRINE_RETURN_IF_ERROR(w.add(key("embedding_length"), u32(c.dim)));
  PEREGRINE_RETURN_IF_ERROR(w.add(key("block_count"), u32(c.n_layers)));
  PEREGRINE_RETURN_IF_ERROR(w.add(key("feed_forward_length"), u32(c.ffn_dim)));
  PEREGRINE_RETURN_IF_ERROR(w.add(key("rope.dimension_count"), u32(c.head_dim)));
  PEREGRINE_RETURN_IF_ERROR(w.add(key("attention.head_count"), u32(c.n_heads)));
  PEREGRINE_RETURN_IF_ERROR(w.add(key("attention.head_count_kv"), u32(c.n_kv_heads)));
  if (c.head_dim * c.n_heads != c.dim) {  // as llama.cpp writes Qwen3's
    PEREGRINE_RETURN_IF_ERROR(w.add(key("attention.key_length"), u32(c.head_dim)));
    PEREGRINE_RETURN_IF_ERROR(w.add(key("attention.value_length"), u32(c.head_dim)));
  }
  PEREGRINE_RETURN_IF_ERROR(w.add(key("attention.layer_norm_rms_epsilon"), gguf_f32(c.rms_eps)));
  PEREGRINE_RETURN_IF_ERROR(w.add(key("rope.freq_base"), gguf_f32(c.rope_theta)));
  PEREGRINE_RETURN_IF_ERROR(add_rope_scaling(w, c));
  if (c.ffn_down_hadamard) PEREGRINE_RETURN_IF_ERROR(w.add("peregrine.ffn_down_hadamard", gguf_bool(true)));
  PEREGRINE_RETURN_IF_ERROR(add_attention_variant_metadata(w, c));
  if (c.n_experts == 0) return Status::ok();
  PEREGRINE_RETURN_IF_ERROR(w.add(key("expert_count"), u32(c.n_experts)));
  PEREGRINE_RETURN_IF_ERROR(w.add(key("expert_used_count"), u32(c.n_experts_used)));
  PEREGRINE_RETURN_IF_ERROR(w.add(key("expert_feed_forward_length"), u32(c.expert_ffn_dim)));
  if (c.shared_expert_ffn_dim > 0) {
    PEREGRINE_RETURN_IF_ERROR(w.add(key("expert_shared_feed_forward_length"), u32(c.shared_expert_ffn_dim)));
  }
  const Architecture* arch = find_architecture(c.arch);
  if (arch && arch->expert_weights_norm != c.expert_weights_norm) {
    PEREGRINE_RETURN_IF_ERROR(w.add(key("expert_weights_norm"), gguf_bool(c.expert_weights_norm)));
  }
  return Status::ok();
}

Status copy_tokenizer_metadata(GgufWriter& w, const std::string& path, std::int64_t vocab_size) {
  PEREGRINE_ASSIGN_OR_RETURN(GgufFile vocab, GgufFile::open(path));
  auto tokens = vocab.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) return invalid_argument(path + ": " + tokens.status().message() + " (not a vocabulary GGUF)");
  if (static_cast<std::int64_t>(tokens->size()) != vocab_size) {
    return invalid_argument(path + " has " + std::to_string(tokens->size()) + " tokens but the model's vocabulary has " +
                            std::to_string(vocab_size));
  }
  return copy_tokenizer_metadata(w, vocab, path);
}

Status copy_tokenizer_metadata(GgufWriter& w, const GgufFile& source, const std::string& what) {
  if (!source.find("tokenizer.ggml.model")) return not_found(what + " has no tokenizer (no tokenizer.ggml.model key)");
  for (const auto& [key, value] : source.metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) PEREGRINE_RETURN_IF_ERROR(w.add(key, value));
  }
  return Status::ok();
}

Status add_llama2c_tokenizer_metadata(GgufWriter& w, const std::string& tokenizer_bin, std::int64_t vocab_size) {
  PEREGRINE_ASSIGN_OR_RETURN(auto file, MappedFile::open(tokenizer_bin));
  PEREGRINE_ASSIGN_OR_RETURN(Vocab vocab, parse_llama2c_vocab(file->bytes(), tokenizer_bin));
  if (vocab.size() != vocab_size) {
    return invalid_argument(tokenizer_bin + " has " + std::to_string(vocab.size()) +
                            " tokens but the model's vocabulary has " + std::to_string(vocab_size));
  }
  std::vector<GgufScalar> tokens, scores, types;
  for (std::int32_t id = 0; id < vocab.size(); ++id) {
    tokens.emplace_back(vocab.piece(id));
    scores.emplace_back(static_cast<double>(vocab.score(id)));
    types.emplace_back(static_cast<std::int64_t>(vocab.type(id)));
  }
  PEREGRINE_RETURN_IF_ERROR(w.add("tokenizer.ggml.model", gguf_string("llama")));
  PEREGRINE_RETURN_IF_ERROR(w.add("tokenizer.ggml.tokens", gguf_array(GgufType::kString, std::move(tokens))));
  PEREGRINE_RETURN_IF_ERROR(w.add("tokenizer.ggml.scores", gguf_array(GgufType::kF32, std::move(scores))));
  PEREGRINE_RETURN_IF_ERROR(w.add("tokenizer.ggml.token_type", gguf_array(GgufType::kI32, std::move(types))));
  PEREGRINE_RETURN_IF_ERROR(w.add("tokenizer.ggml.unknown_token_id", gguf_u32(static_cast<std::uint32_t>(vocab.unk_id))));
  PEREGRINE_RETURN_IF_ERROR(w.add("tokenizer.ggml.bos_token_id", gguf_u32(static_cast<std::uint32_t>(vocab.bos_id))));
  return w.add("tokenizer.ggml.eos_token_id", gguf_u32(static_cast<std::uint32_t>(vocab.eos_id)));
}

}  // namespace peregrine
