#include "peregrine/spec/eagle_head.h"

#include <cmath>
#include <filesystem>

#include "formats/hf/config_fields.h"
#include "formats/head_folder.h"

namespace peregrine {
namespace {

constexpr const char* kWeights = "model.safetensors";
constexpr const char* kEmbedding = "embed_tokens.weight";

std::string layer(const char* rest) { return std::string("layers.0.") + rest; }

// A head whose dimensions fit together; the message says which do not.
Status check_dims(const EagleHead& h) {
  if (h.hidden < 1 || h.intermediate < 1 || h.heads < 1 || h.kv_heads < 1 || h.head_dim < 1 || h.vocab < 1 || h.max_positions < 1) {
    return invalid_argument("every dimension must be >= 1");
  }
  if (h.heads % h.kv_heads != 0) {
    return invalid_argument("num_attention_heads " + std::to_string(h.heads) + " is not a multiple of num_key_value_heads " +
                            std::to_string(h.kv_heads));
  }
  if (h.head_dim % 2 != 0) return invalid_argument("head_dim " + std::to_string(h.head_dim) + " is odd (RoPE rotates pairs)");
  if (!(h.rms_eps > 0.0f) || !(h.rope_theta > 0.0f) || !std::isfinite(h.rope_theta)) {
    return invalid_argument("rms_norm_eps and rope_theta must be > 0");
  }
  return Status::ok();
}

}  // namespace

std::vector<std::string> EagleHead::names() const {
  std::vector<std::string> out{"fc.weight"};
  if (bias) out.push_back("fc.bias");
  for (const char* n : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                        "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"}) {
    out.push_back(layer(n));
  }
  return out;
}

std::vector<std::int64_t> EagleHead::shape(const std::string& name) const {
  const std::int64_t q = heads * head_dim, kv = kv_heads * head_dim;
  if (name == "fc.weight") return {hidden, 2 * hidden};
  if (name == "fc.bias" && bias) return {hidden};
  if (name == layer("self_attn.q_proj.weight")) return {q, hidden};
  if (name == layer("self_attn.k_proj.weight") || name == layer("self_attn.v_proj.weight")) return {kv, hidden};
  if (name == layer("self_attn.o_proj.weight")) return {hidden, q};
  if (name == layer("post_attention_layernorm.weight")) return {hidden};
  if (name == layer("mlp.gate_proj.weight") || name == layer("mlp.up_proj.weight")) return {intermediate, hidden};
  if (name == layer("mlp.down_proj.weight")) return {hidden, intermediate};
  if (name == kEmbedding) return {vocab, hidden};
  return {};
}

std::vector<head_folder::Entry> layout_of(const EagleHead& head) {
  std::vector<head_folder::Entry> out;
  for (const std::string& name : head.names()) out.push_back({name, head.shape(name)});
  return out;
}

Status EagleHead::validate() const {
  if (Status st = check_dims(*this); !st) return invalid_argument("EAGLE head: " + st.message());
  return head_folder::check(layout_of(*this), tensors, "EAGLE head");
}

EagleHead eagle_head_shape(const ModelConfig& target) {
  EagleHead h;
  h.hidden = target.dim;
  h.intermediate = target.ffn_dim;
  h.heads = target.n_heads;
  h.kv_heads = target.n_kv_heads;
  h.head_dim = target.head_dim;
  h.vocab = target.vocab_size;
  h.max_positions = target.max_seq_len;
  h.rms_eps = target.rms_eps;
  h.rope_theta = target.rope_theta;
  return h;
}

Status save_eagle_head(const EagleHead& head, const std::string& dir) {
  if (Status st = check_dims(head); !st) return invalid_argument("save_eagle_head: " + st.message());
  std::vector<head_folder::Entry> layout = layout_of(head);
  if (head.tensors.count(kEmbedding) != 0) layout.push_back({kEmbedding, head.shape(kEmbedding)});
  const nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                                 {"model_type", "llama"},
                                 {"hidden_act", "silu"},
                                 {"hidden_size", head.hidden},
                                 {"intermediate_size", head.intermediate},
                                 {"num_attention_heads", head.heads},
                                 {"num_key_value_heads", head.kv_heads},
                                 {"head_dim", head.head_dim},
                                 {"num_hidden_layers", 1},
                                 {"vocab_size", head.vocab},
                                 {"max_position_embeddings", head.max_positions},
                                 {"rms_norm_eps", head_folder::shortest_decimal(head.rms_eps)},
                                 {"rope_theta", head_folder::shortest_decimal(head.rope_theta)},
                                 {"rope_scaling", nullptr},
                                 {"bias", head.bias},
                                 {"initializer_range", 0.02},
                                 {"pretraining_tp", 1},
                                 {"tie_word_embeddings", false},
                                 {"torch_dtype", "float32"},
                                 {"use_cache", true},
                                 {"base_model_name_or_path", head.base_model}};
  return head_folder::write(dir, config, kWeights, layout, head.tensors, "save_eagle_head");
}

Expected<EagleHead> load_eagle_head(const std::string& dir, std::int64_t hidden, std::int64_t vocab) {
  const std::string config_path = dir + "/config.json";
  if (!std::filesystem::exists(config_path)) return not_found(dir + " has no config.json (not an EAGLE head folder)");
  PEREGRINE_ASSIGN_OR_RETURN(const nlohmann::json json, read_json_file(config_path));
  if (!json.is_object()) return corrupt_file(config_path + ": not a JSON object");
  const ConfigFields c(json, config_path);
  EagleHead h;
  PEREGRINE_ASSIGN_OR_RETURN(h.hidden, c.required_int("hidden_size"));
  PEREGRINE_ASSIGN_OR_RETURN(h.intermediate, c.required_int("intermediate_size"));
  PEREGRINE_ASSIGN_OR_RETURN(h.heads, c.required_int("num_attention_heads"));
  PEREGRINE_ASSIGN_OR_RETURN(h.vocab, c.required_int("vocab_size"));
  PEREGRINE_ASSIGN_OR_RETURN(const auto kv_heads, c.optional_int("num_key_value_heads"));
  PEREGRINE_ASSIGN_OR_RETURN(const auto head_dim, c.optional_int("head_dim"));
  PEREGRINE_ASSIGN_OR_RETURN(const auto layers, c.optional_int("num_hidden_layers"));
  PEREGRINE_ASSIGN_OR_RETURN(const auto max_positions, c.optional_int("max_position_embeddings"));
  PEREGRINE_ASSIGN_OR_RETURN(const auto eps, c.optional_float("rms_norm_eps"));
  PEREGRINE_ASSIGN_OR_RETURN(const auto theta, c.optional_float("rope_theta"));
  PEREGRINE_ASSIGN_OR_RETURN(const auto bias, c.optional_bool("bias"));
  PEREGRINE_ASSIGN_OR_RETURN(const auto base_model, c.optional_string("base_model_name_or_path"));
  h.kv_heads = kv_heads.value_or(h.heads);  // EAGLE's EConfig: num_key_value_heads defaults to the heads
  h.head_dim = head_dim.value_or(h.heads > 0 ? h.hidden / h.heads : 0);
  h.max_positions = max_positions.value_or(2048);
  h.rms_eps = eps.value_or(1e-6f);
  h.rope_theta = theta.value_or(10000.0f);
  h.bias = bias.value_or(true);
  h.base_model = base_model.value_or("");
  if (layers.value_or(1) != 1) {
    return unsupported(config_path + ": num_hidden_layers is " + std::to_string(*layers) + "; EAGLE-1 heads have one decoder layer");
  }
  if (c.get("rope_scaling") != nullptr) return unsupported(config_path + ": rope_scaling is not supported for EAGLE heads");
  if (Status st = check_dims(h); !st) return corrupt_file(config_path + ": " + st.message());
  if (h.hidden != hidden || h.vocab != vocab) {
    return invalid_argument(dir + ": the EAGLE head is for hidden size " + std::to_string(h.hidden) + " and " + std::to_string(h.vocab) +
                            " tokens; the target has " + std::to_string(hidden) + " and " + std::to_string(vocab));
  }
  const std::string weights = dir + "/" + kWeights;
  if (!std::filesystem::exists(weights)) {
    if (std::filesystem::exists(dir + "/pytorch_model.bin")) {
      return not_found(dir + " holds pytorch_model.bin but no " + kWeights +
                       "; convert it (safetensors.torch.save_file(torch.load(\"pytorch_model.bin\"), \"model.safetensors\"))");
    }
    return not_found(dir + " has no " + kWeights);
  }
  PEREGRINE_ASSIGN_OR_RETURN(const SafetensorsFile file, SafetensorsFile::open(weights));
  std::vector<std::string> names = h.names();
  if (file.find(kEmbedding) != nullptr) names.push_back(kEmbedding);
  for (const std::string& name : names) {
    auto values = head_folder::read_f32(file, name, h.shape(name));
    if (!values) return corrupt_file(weights + ": tensor " + name + " is missing or not F32/F16/BF16 of its shape");
    h.tensors[name] = std::move(*values);
  }
  return h;
}

}  // namespace peregrine
