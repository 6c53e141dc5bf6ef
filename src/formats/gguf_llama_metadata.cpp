#include "peregrine/formats/gguf_llama_metadata.h"

namespace peregrine {

std::uint32_t llama_file_type(DType t) {
  switch (t) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ8_0: return 7;
    case DType::kBF16: return 32;
    default: return 0;  // no GGUF file type (the writer rejects these tensors)
  }
  return 0;
}

Status add_llama_metadata(GgufWriter& w, const std::string& name, const ModelConfig& c, DType matrix_dtype) {
  auto u32 = [](std::int64_t v) { return gguf_u32(static_cast<std::uint32_t>(v)); };
  PEREGRINE_RETURN_IF_ERROR(w.add("general.architecture", gguf_string("llama")));
  PEREGRINE_RETURN_IF_ERROR(w.add("general.name", gguf_string(name)));
  PEREGRINE_RETURN_IF_ERROR(w.add("general.file_type", gguf_u32(llama_file_type(matrix_dtype))));
  if (dtype_block_size(matrix_dtype) > 1) PEREGRINE_RETURN_IF_ERROR(w.add("general.quantization_version", gguf_u32(2)));
  PEREGRINE_RETURN_IF_ERROR(w.add("llama.vocab_size", u32(c.vocab_size)));
  PEREGRINE_RETURN_IF_ERROR(w.add("llama.context_length", u32(c.max_seq_len)));
  PEREGRINE_RETURN_IF_ERROR(w.add("llama.embedding_length", u32(c.dim)));
  PEREGRINE_RETURN_IF_ERROR(w.add("llama.block_count", u32(c.n_layers)));
  PEREGRINE_RETURN_IF_ERROR(w.add("llama.feed_forward_length", u32(c.ffn_dim)));
  PEREGRINE_RETURN_IF_ERROR(w.add("llama.rope.dimension_count", u32(c.head_dim)));
  PEREGRINE_RETURN_IF_ERROR(w.add("llama.attention.head_count", u32(c.n_heads)));
  PEREGRINE_RETURN_IF_ERROR(w.add("llama.attention.head_count_kv", u32(c.n_kv_heads)));
  PEREGRINE_RETURN_IF_ERROR(w.add("llama.attention.layer_norm_rms_epsilon", gguf_f32(c.rms_eps)));
  return w.add("llama.rope.freq_base", gguf_f32(c.rope_theta));
}

Status copy_tokenizer_metadata(GgufWriter& w, const std::string& path, std::int64_t vocab_size) {
  PEREGRINE_ASSIGN_OR_RETURN(GgufFile vocab, GgufFile::open(path));
  auto tokens = vocab.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) return invalid_argument(path + ": " + tokens.status().message() + " (not a vocabulary GGUF)");
  if (static_cast<std::int64_t>(tokens->size()) != vocab_size) {
    return invalid_argument(path + " has " + std::to_string(tokens->size()) + " tokens but the model's vocabulary has " +
                            std::to_string(vocab_size));
  }
  for (const auto& [key, value] : vocab.metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) PEREGRINE_RETURN_IF_ERROR(w.add(key, value));
  }
  return Status::ok();
}

}  // namespace peregrine
