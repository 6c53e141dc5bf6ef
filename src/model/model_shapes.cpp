#include "peregrine/model/model_shapes.h"

namespace peregrine {
namespace {

constexpr const char* kLlamaVocab = "tokenizers/gguf-vocab/ggml-vocab-llama-spm.gguf";
constexpr const char* kLlamaSpm = "tokenizers/llama2/tokenizer.model";

ModelConfig llama(std::int64_t dim, std::int64_t n_layers, std::int64_t n_heads, std::int64_t n_kv_heads,
                  std::int64_t ffn_dim, std::int64_t vocab_size, std::int64_t ctx, float rope_theta, bool tied) {
  ModelConfig c;
  c.dim = dim;
  c.n_layers = n_layers;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = dim / n_heads;
  c.ffn_dim = ffn_dim;
  c.vocab_size = vocab_size;
  c.max_seq_len = ctx;
  c.rope_theta = rope_theta;
  c.rms_eps = 1e-5f;
  c.rope_style = RopeStyle::kInterleaved;
  c.tied_embeddings = tied;
  return c;
}

}  // namespace

const std::vector<ModelShape>& model_shapes() {
  static const std::vector<ModelShape> shapes = {
      {"tinyllama-1.1b", llama(2048, 22, 32, 4, 5632, 32000, 2048, 10000.0f, false), kLlamaVocab, kLlamaSpm,
       "TinyLlama/TinyLlama-1.1B-Chat-v1.0 config.json"},
      {"llama2-7b", llama(4096, 32, 32, 32, 11008, 32000, 4096, 10000.0f, false), kLlamaVocab, kLlamaSpm,
       "meta-llama/Llama-2-7b-hf config.json"},
      // SmolLM2's own 49152-token BPE vocabulary is not in ../shared; StarCoder's has the same
      // size and kind (GPT-2 byte-level BPE), so tokenization cost is comparable.
      {"smollm2-135m", llama(576, 30, 9, 3, 1536, 49152, 8192, 100000.0f, true),
       "tokenizers/gguf-vocab/ggml-vocab-starcoder.gguf", "", "HuggingFaceTB/SmolLM2-135M config.json"},
      {"stories110m", llama(768, 12, 12, 12, 2048, 32000, 1024, 10000.0f, true), kLlamaVocab, kLlamaSpm,
       "karpathy/llama2.c stories110M.bin header (shared classifier)"},
      {"stories260k", llama(64, 5, 8, 4, 172, 512, 512, 10000.0f, true), "models/stories260K/stories260K.gguf", "",
       "karpathy/llama2.c stories260K.bin header"},
  };
  return shapes;
}

const ModelShape* find_model_shape(std::string_view name) {
  for (const auto& s : model_shapes()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace peregrine
