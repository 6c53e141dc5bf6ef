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

/// `c` as family `arch` with head_dim, rms_eps and the Llama 3 RoPE scaling given where the
/// published config differs from llama()'s defaults.
ModelConfig family(ModelConfig c, const char* arch, float rms_eps, std::int64_t head_dim = 0) {
  c.arch = arch;
  c.rms_eps = rms_eps;
  if (head_dim > 0) c.head_dim = head_dim;
  return c;
}

/// `c` with a Mixture-of-Experts FFN.
ModelConfig moe(ModelConfig c, std::int64_t n_experts, std::int64_t top_k, std::int64_t expert_ffn, std::int64_t shared_ffn,
                bool renormalize) {
  c.n_experts = n_experts;
  c.n_experts_used = top_k;
  c.expert_ffn_dim = expert_ffn;
  c.shared_expert_ffn_dim = shared_ffn;
  c.expert_weights_norm = renormalize;
  return c;
}

ModelConfig mistral_7b() {
  ModelConfig c = llama(4096, 32, 32, 8, 14336, 32000, 32768, 10000.0f, false);
  c.sliding_window = 4096;
  return c;
}

ModelConfig gemma2_2b() {
  ModelConfig c = llama(2304, 26, 8, 4, 9216, 256000, 8192, 10000.0f, true);
  c.head_dim = 256;
  c.rms_eps = 1e-6f;
  apply_architecture(c, *find_architecture("gemma2"));
  c.sliding_window = 4096;
  c.attn_scale = 1.0f / 16.0f;  // query_pre_attn_scalar 256
  c.attn_softcap = 50.0f;
  c.final_softcap = 30.0f;
  return c;
}

ModelConfig llama3_2_1b() {
  ModelConfig c = llama(2048, 16, 32, 8, 8192, 128256, 131072, 500000.0f, true);
  c.rope_scaling = {RopeScaling::Kind::kLlama3, 32.0f, 1.0f, 4.0f, 8192};
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
      // The families of model/spec/architecture.h. Their own vocabularies (128256, 151936, 50304,
      // 256000 tokens) are not in ../shared: those files say tokenizer.ggml.model "none", as llama.cpp
      // reads a model without a vocabulary (bench and llama-bench need none).
      {"llama3.2-1b", llama3_2_1b(), "", "", "meta-llama/Llama-3.2-1B config.json (rope_scaling llama3)"},
      {"mistral-7b", mistral_7b(), kLlamaVocab, kLlamaSpm,
       "mistralai/Mistral-7B-v0.1 config.json (sliding window 4096; Llama 2's 32000-token vocabulary)"},
      {"gemma2-2b", gemma2_2b(), "", "", "google/gemma-2-2b config.json"},
      {"qwen2.5-0.5b", family(llama(896, 24, 14, 2, 4864, 151936, 32768, 1e6f, true), "qwen2", 1e-6f), "", "",
       "Qwen/Qwen2.5-0.5B config.json"},
      {"qwen3-0.6b", family(llama(1024, 28, 16, 8, 3072, 151936, 40960, 1e6f, true), "qwen3", 1e-6f, 128), "", "",
       "Qwen/Qwen3-0.6B config.json"},
      {"phi3-mini", family(llama(3072, 32, 32, 32, 8192, 32064, 4096, 10000.0f, false), "phi3", 1e-5f),
       "tokenizers/gguf-vocab/ggml-vocab-phi-3.gguf", "", "microsoft/Phi-3-mini-4k-instruct config.json"},
      {"mixtral-8x7b", moe(llama(4096, 32, 32, 8, 14336, 32000, 32768, 1e6f, false), 8, 2, 14336, 0, true), kLlamaVocab,
       kLlamaSpm, "mistralai/Mixtral-8x7B-v0.1 config.json (~26 GB as Q4_0: for machines with more memory)"},
      {"olmoe-1b-7b", moe(family(llama(2048, 16, 16, 16, 1024, 50304, 4096, 10000.0f, false), "olmoe", 1e-5f), 64, 8, 1024, 0, false),
       "", "", "allenai/OLMoE-1B-7B-0924 config.json"},
      {"olmoe-1b-7b-dense", llama(2048, 16, 16, 16, 8 * 1024, 50304, 4096, 10000.0f, false), "", "",
       "olmoe-1b-7b's active parameters as a dense llama: the FFN of its 8 chosen experts"},
      {"qwen1.5-moe-a2.7b",
       moe(family(llama(2048, 24, 16, 16, 5632, 151936, 8192, 1e6f, false), "qwen2moe", 1e-6f), 60, 4, 1408, 5632, false), "", "",
       "Qwen/Qwen1.5-MoE-A2.7B config.json"},
      {"qwen1.5-moe-a2.7b-dense", family(llama(2048, 24, 16, 16, 4 * 1408 + 5632, 151936, 8192, 1e6f, false), "qwen2", 1e-6f),
       "", "", "qwen1.5-moe-a2.7b's active parameters as a dense qwen2: its 4 chosen experts' FFN and the shared one"},
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
