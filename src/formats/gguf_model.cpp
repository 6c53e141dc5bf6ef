#include "peregrine/formats/gguf_model.h"

#include "json_util.h"

namespace peregrine {
namespace {

Expected<std::int64_t> required_int(const GgufFile& g, const std::string& key, const std::string& path) {
  auto v = g.get_int(key);
  if (!v) return corrupt_file(path + ": " + v.status().message() + " (required hyper-parameter)");
  return *v;
}

Expected<ModelConfig> read_llama_config(const GgufFile& g, const std::string& path) {
  ModelConfig c;
  PEREGRINE_ASSIGN_OR_RETURN(c.dim, required_int(g, "llama.embedding_length", path));
  PEREGRINE_ASSIGN_OR_RETURN(c.n_layers, required_int(g, "llama.block_count", path));
  PEREGRINE_ASSIGN_OR_RETURN(c.ffn_dim, required_int(g, "llama.feed_forward_length", path));
  PEREGRINE_ASSIGN_OR_RETURN(c.n_heads, required_int(g, "llama.attention.head_count", path));
  PEREGRINE_ASSIGN_OR_RETURN(c.max_seq_len, required_int(g, "llama.context_length", path));
  auto kv = g.get_int("llama.attention.head_count_kv");
  c.n_kv_heads = kv ? *kv : c.n_heads;
  c.head_dim = c.n_heads > 0 ? c.dim / c.n_heads : 0;
  if (auto rot = g.get_int("llama.rope.dimension_count"); rot && *rot != c.head_dim) {
    return unsupported(path + ": GGUF llama.rope.dimension_count " + std::to_string(*rot) +
                       " != head_dim " + std::to_string(c.head_dim) + " (partial RoPE)");
  }
  if (auto eps = g.get_float("llama.attention.layer_norm_rms_epsilon")) c.rms_eps = static_cast<float>(*eps);
  if (auto theta = g.get_float("llama.rope.freq_base")) c.rope_theta = static_cast<float>(*theta);
  c.rope_style = RopeStyle::kInterleaved;
  return c;
}

}  // namespace

Expected<ModelFile> load_gguf_model(const std::string& path) {
  PEREGRINE_ASSIGN_OR_RETURN(GgufFile g, GgufFile::open(path));
  auto arch = g.get_string("general.architecture");
  if (!arch) return corrupt_file(path + ": " + arch.status().message());
  if (*arch != "llama") {
    return unsupported(path + ": architecture '" + *arch + "' is not supported (only llama)");
  }
  ModelFile m;
  m.format = ModelFormat::kGguf;
  m.path = path;
  PEREGRINE_ASSIGN_OR_RETURN(m.config, read_llama_config(g, path));
  for (const auto& t : g.tensors()) m.tensors.emplace(t.name, t);
  if (const TensorView* emb = m.find("token_embd.weight"); emb && emb->shape.size() == 2) {
    m.config.vocab_size = emb->shape[0];
  }
  m.config.tied_embeddings = m.find("output.weight") == nullptr;
  m.storage.push_back(g.file());
  m.gguf = std::move(g);
  PEREGRINE_RETURN_IF_ERROR(validate_llama_tensors(m));
  return m;
}

}  // namespace peregrine
