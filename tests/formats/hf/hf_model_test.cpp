#include "peregrine/formats/hf/hf_model.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "peregrine/formats/model_file.h"
#include "formats/safetensors/safetensors_writer.h"
#include "test_paths.h"

namespace peregrine {
namespace {

using nlohmann::json;
using test::Bytes;
using test::StTensor;

/// A tiny random Llama in Hugging Face naming: dim 16, 4 heads, 2 KV heads (GQA), ffn 24,
/// 2 layers, vocab 32.
struct TinyHf {
  std::int64_t dim = 16, heads = 4, kv_heads = 2, ffn = 24, layers = 2, vocab = 32;
  std::int64_t head_dim = 0;  // 0: dim / heads
  bool lm_head = false;
  std::string dtype = "F32";  // F32, F16 or BF16

  std::map<std::string, std::vector<std::int64_t>> shapes() const {
    const std::int64_t hd = head_dim ? head_dim : dim / heads;
    std::map<std::string, std::vector<std::int64_t>> s;
    s["model.embed_tokens.weight"] = {vocab, dim};
    s["model.norm.weight"] = {dim};
    if (lm_head) s["lm_head.weight"] = {vocab, dim};
    for (std::int64_t l = 0; l < layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      s[p + "input_layernorm.weight"] = {dim};
      s[p + "post_attention_layernorm.weight"] = {dim};
      s[p + "self_attn.q_proj.weight"] = {heads * hd, dim};
      s[p + "self_attn.k_proj.weight"] = {kv_heads * hd, dim};
      s[p + "self_attn.v_proj.weight"] = {kv_heads * hd, dim};
      s[p + "self_attn.o_proj.weight"] = {dim, heads * hd};
      s[p + "mlp.gate_proj.weight"] = {ffn, dim};
      s[p + "mlp.up_proj.weight"] = {ffn, dim};
      s[p + "mlp.down_proj.weight"] = {dim, ffn};
    }
    return s;
  }

  /// Every tensor with fresh random values (seeded), encoded in `dtype`.
  std::vector<StTensor> tensors(std::uint32_t seed = 7) const {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
    std::vector<StTensor> out;
    for (const auto& [name, shape] : shapes()) {
      std::int64_t n = 1;
      for (auto d : shape) n *= d;
      StTensor t{name, dtype, shape, {}};
      for (std::int64_t i = 0; i < n; ++i) {
        const float x = dist(rng);
        if (dtype == "F32") {
          test::append(t.data, x);
        } else {
          test::append(t.data, dtype == "F16" ? test::to_f16(x) : test::to_bf16(x));
        }
      }
      out.push_back(std::move(t));
    }
    return out;
  }

  json config() const {
    return {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
            {"hidden_size", dim}, {"intermediate_size", ffn}, {"num_hidden_layers", layers},
            {"num_attention_heads", heads}, {"num_key_value_heads", kv_heads},
            {"vocab_size", vocab}, {"max_position_embeddings", 256}, {"rms_norm_eps", 1e-5},
            {"rope_theta", 500000.0}, {"hidden_act", "silu"}, {"rope_scaling", nullptr},
            {"tie_word_embeddings", false}, {"torch_dtype", "float32"}};
  }
};

/// A fresh folder under one temporary root that is removed at exit.
std::string fresh_dir() {
  static test::TempDir root;
  static int n = 0;
  const std::string dir = root.file("m" + std::to_string(n++));
  std::filesystem::create_directory(dir);
  return dir;
}

/// Writes config.json + model.safetensors into a fresh folder; returns it.
std::string write_folder(const json& config, const std::vector<StTensor>& tensors) {
  const std::string dir = fresh_dir();
  test::write_text(dir + "/config.json", config.dump(2));
  test::write_bytes(dir + "/model.safetensors", test::safetensors_bytes(tensors, {{"format", "pt"}}));
  return dir;
}

void expect_same_bytes(const ModelFile& m, const std::string& canonical, const StTensor& t) {
  const TensorView* v = m.find(canonical);
  ASSERT_NE(v, nullptr) << canonical;
  EXPECT_EQ(v->shape, t.shape) << canonical;
  ASSERT_EQ(v->nbytes, t.data.size()) << canonical;
  EXPECT_EQ(std::memcmp(v->data, t.data.data(), v->nbytes), 0) << canonical;
}

TEST(HfModel, LoadsSingleFileTiedModel) {
  TinyHf tiny;
  const auto tensors = tiny.tensors();
  const std::string dir = write_folder(tiny.config(), tensors);
  auto m = load_hf_model(dir);
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->format, ModelFormat::kHuggingFace);
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.dim, 16);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_EQ(c.ffn_dim, 24);
  EXPECT_EQ(c.vocab_size, 32);
  EXPECT_EQ(c.max_seq_len, 256);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_EQ(c.rope_style, RopeStyle::kNeox);
  EXPECT_TRUE(c.tied_embeddings);  // no lm_head.weight saved
  EXPECT_EQ(m->find("output.weight"), nullptr);
  EXPECT_EQ(m->tensors.size(), 2u + 9u * 2u);
  EXPECT_EQ(m->storage.size(), 1u);

  std::map<std::string, const StTensor*> by_name;
  for (const auto& t : tensors) by_name[t.name] = &t;
  expect_same_bytes(*m, "token_embd.weight", *by_name["model.embed_tokens.weight"]);
  expect_same_bytes(*m, "output_norm.weight", *by_name["model.norm.weight"]);
  const std::pair<const char*, const char*> layer_names[] = {
      {"self_attn.q_proj", "attn_q"}, {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"}, {"self_attn.o_proj", "attn_output"},
      {"mlp.gate_proj", "ffn_gate"}, {"mlp.up_proj", "ffn_up"}, {"mlp.down_proj", "ffn_down"},
      {"input_layernorm", "attn_norm"}, {"post_attention_layernorm", "ffn_norm"}};
  for (int l = 0; l < 2; ++l) {
    for (const auto& [hf, canon] : layer_names) {
      const std::string hf_name = "model.layers." + std::to_string(l) + "." + hf + ".weight";
      expect_same_bytes(*m, "blk." + std::to_string(l) + "." + canon + ".weight", *by_name[hf_name]);
    }
  }
  // Through the format-detecting entry point too: the folder, and the .safetensors file.
  auto via_dir = load_model_file(dir);
  ASSERT_TRUE(via_dir) << via_dir.status().message();
  EXPECT_EQ(via_dir->format, ModelFormat::kHuggingFace);
  auto via_file = load_model_file(dir + "/model.safetensors");
  ASSERT_TRUE(via_file) << via_file.status().message();
  EXPECT_EQ(via_file->tensors.size(), m->tensors.size());
}

TEST(HfModel, AppliesDefaults) {
  TinyHf tiny;
  json cfg = {{"model_type", "mistral"}, {"hidden_size", 16}, {"intermediate_size", 24},
              {"num_hidden_layers", 2}, {"num_attention_heads", 4},
              {"num_key_value_heads", nullptr}, {"sliding_window", nullptr}};
  tiny.kv_heads = 4;
  auto m = load_hf_model(write_folder(cfg, tiny.tensors()));
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->config.n_kv_heads, 4);
  EXPECT_EQ(m->config.head_dim, 4);
  EXPECT_EQ(m->config.vocab_size, 32);  // from embed_tokens
  EXPECT_EQ(m->config.max_seq_len, 2048);
  EXPECT_FLOAT_EQ(m->config.rms_eps, 1e-6f);
  EXPECT_FLOAT_EQ(m->config.rope_theta, 10000.0f);
  EXPECT_TRUE(m->config.tied_embeddings);
}

TEST(HfModel, ExplicitHeadDimAndSlidingWindow) {
  TinyHf tiny;
  tiny.head_dim = 8;  // q rows = 4 * 8 = 32 != hidden_size 16
  json cfg = tiny.config();
  cfg["architectures"] = {"MistralForCausalLM"};
  cfg["head_dim"] = 8;
  cfg["sliding_window"] = 128;
  auto m = load_hf_model(write_folder(cfg, tiny.tensors()));
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->config.head_dim, 8);
  EXPECT_EQ(m->find("blk.0.attn_q.weight")->shape, (std::vector<std::int64_t>{32, 16}));
  EXPECT_EQ(m->config.max_seq_len, cfg["max_position_embeddings"].get<std::int64_t>());  // not capped
  EXPECT_EQ(m->config.sliding_window, 128);  // Mistral: every layer
  EXPECT_EQ(m->config.layer_window(0), 128);
  EXPECT_EQ(m->config.layer_window(1), 128);
  // Qwen2's unused window stays off; its window on some layers only is refused by name.
  cfg["architectures"] = {"LlamaForCausalLM"};
  cfg["use_sliding_window"] = false;
  m = load_hf_model(write_folder(cfg, tiny.tensors()));
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->config.sliding_window, 0);
  cfg["use_sliding_window"] = true;
  cfg["max_window_layers"] = 1;
  m = load_hf_model(write_folder(cfg, tiny.tensors()));
  ASSERT_FALSE(m);
  EXPECT_NE(m.status().message().find("max_window_layers"), std::string::npos) << m.status().message();
}

TEST(HfModel, Gemma2ConfigFields) {
  // Gemma2Config's fields (modeling_gemma2.py): its norms' HF names, (1 + w) norms, GeGLU, the
  // score scale from query_pre_attn_scalar, soft-caps, sliding window on even layers.
  TinyHf tiny;
  auto tensors = tiny.tensors();
  for (auto& t : tensors) {  // Llama's post_attention_layernorm is Gemma 2's pre_feedforward_layernorm
    const auto at = t.name.find("post_attention_layernorm");
    if (at != std::string::npos) t.name.replace(at, std::string("post_attention_layernorm").size(), "pre_feedforward_layernorm");
  }
  const auto extra = tensors;
  for (const auto& t : extra) {
    for (const char* post : {"post_attention_layernorm", "post_feedforward_layernorm"}) {
      const auto at = t.name.find("pre_feedforward_layernorm");
      if (at == std::string::npos) continue;
      StTensor copy = t;
      copy.name.replace(at, std::string("pre_feedforward_layernorm").size(), post);
      tensors.push_back(copy);
    }
  }
  json cfg = tiny.config();
  cfg["architectures"] = {"Gemma2ForCausalLM"};
  cfg["model_type"] = "gemma2";
  cfg["hidden_act"] = "gelu_pytorch_tanh";
  cfg["hidden_activation"] = "gelu_pytorch_tanh";
  cfg["query_pre_attn_scalar"] = 16;
  cfg["attn_logit_softcapping"] = 50.0;
  cfg["final_logit_softcapping"] = nullptr;  // null: none
  cfg["sliding_window"] = 4;
  auto m = load_hf_model(write_folder(cfg, tensors));
  ASSERT_TRUE(m) << m.status().message();
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.arch, "gemma2");
  EXPECT_EQ(c.activation, FfnActivation::kGeluTanh);
  EXPECT_FLOAT_EQ(c.attn_scale, 0.25f);
  EXPECT_FLOAT_EQ(c.attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(c.final_softcap, 0.0f);
  EXPECT_FLOAT_EQ(c.norm_weight_offset, 1.0f);
  EXPECT_FLOAT_EQ(c.embed_scale, 4.0f);  // sqrt(16)
  EXPECT_EQ(c.layer_window(0), 4);
  EXPECT_EQ(c.layer_window(1), 0);
  EXPECT_TRUE(m->find("blk.1.post_ffw_norm.weight"));
  EXPECT_TRUE(m->find("blk.1.post_attention_norm.weight"));
  EXPECT_TRUE(m->find("blk.1.ffn_norm.weight"));
  // A layer_types list naming another pattern, and a negative soft-cap, are refused.
  cfg["layer_types"] = {"full_attention", "sliding_attention"};
  auto swapped = load_hf_model(write_folder(cfg, tensors));
  ASSERT_FALSE(swapped);
  EXPECT_NE(swapped.status().message().find("layer_types"), std::string::npos) << swapped.status().message();
  cfg["layer_types"] = {"sliding_attention", "full_attention"};
  ASSERT_TRUE(load_hf_model(write_folder(cfg, tensors)));
  cfg["attn_logit_softcapping"] = -1.0;
  auto negative = load_hf_model(write_folder(cfg, tensors));
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.status().message().find("attn_logit_softcapping"), std::string::npos) << negative.status().message();
}

TEST(HfModel, LoadsShardedUntiedHalfPrecision) {
  TinyHf tiny;
  tiny.lm_head = true;
  tiny.dtype = "BF16";
  auto tensors = tiny.tensors(11);
  // Shard 1: embeddings + layer 0 in BF16; shard 2: the rest re-encoded as F16.
  std::vector<StTensor> s1, s2;
  json weight_map = json::object();
  for (auto& t : tensors) {
    const bool first = t.name.find("layers.1.") == std::string::npos && t.name != "lm_head.weight" &&
                       t.name != "model.norm.weight";
    if (!first) t.dtype = "F16";  // same byte count; the reader only checks size and dtype name
    (first ? s1 : s2).push_back(t);
    weight_map[t.name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  json cfg = tiny.config();
  cfg["tie_word_embeddings"] = false;
  const std::string dir = fresh_dir();
  test::write_text(dir + "/config.json", cfg.dump());
  test::write_bytes(dir + "/model-00001-of-00002.safetensors", test::safetensors_bytes(s1));
  test::write_bytes(dir + "/model-00002-of-00002.safetensors", test::safetensors_bytes(s2));
  test::write_text(dir + "/model.safetensors.index.json",
                   json{{"metadata", {{"total_size", 1234}}}, {"weight_map", weight_map}}.dump());
  auto m = load_hf_model(dir);
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_FALSE(m->config.tied_embeddings);
  EXPECT_EQ(m->storage.size(), 2u);
  EXPECT_EQ(m->find("token_embd.weight")->dtype, DType::kBF16);
  EXPECT_EQ(m->find("blk.1.attn_q.weight")->dtype, DType::kF16);
  for (const auto& t : tensors) {
    if (t.name == "lm_head.weight") expect_same_bytes(*m, "output.weight", t);
    if (t.name == "model.layers.1.mlp.down_proj.weight") expect_same_bytes(*m, "blk.1.ffn_down.weight", t);
    if (t.name == "model.layers.0.self_attn.k_proj.weight") expect_same_bytes(*m, "blk.0.attn_k.weight", t);
  }

  // A shard that does not exist, and a tensor missing from its shard.
  weight_map["model.norm.weight"] = "model-00003-of-00002.safetensors";
  test::write_text(dir + "/model.safetensors.index.json", json{{"weight_map", weight_map}}.dump());
  auto missing_shard = load_hf_model(dir);
  ASSERT_FALSE(missing_shard);
  EXPECT_EQ(missing_shard.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing_shard.status().message().find("model-00003-of-00002"), std::string::npos);
  weight_map["model.norm.weight"] = "model-00001-of-00002.safetensors";
  test::write_text(dir + "/model.safetensors.index.json", json{{"weight_map", weight_map}}.dump());
  auto misplaced = load_hf_model(dir);
  ASSERT_FALSE(misplaced);
  EXPECT_EQ(misplaced.status().code(), ErrorCode::kCorruptFile);
  EXPECT_NE(misplaced.status().message().find("model.norm.weight"), std::string::npos);
  weight_map["model.norm.weight"] = "../model-00002-of-00002.safetensors";
  test::write_text(dir + "/model.safetensors.index.json", json{{"weight_map", weight_map}}.dump());
  auto escaping = load_hf_model(dir);
  ASSERT_FALSE(escaping);
  EXPECT_EQ(escaping.status().code(), ErrorCode::kCorruptFile);
  test::write_text(dir + "/model.safetensors.index.json", json{{"weights", weight_map}}.dump());
  auto no_map = load_hf_model(dir);
  ASSERT_FALSE(no_map);
  EXPECT_EQ(no_map.status().code(), ErrorCode::kCorruptFile);
  EXPECT_NE(no_map.status().message().find("weight_map"), std::string::npos);
}

TEST(HfModel, TieWordEmbeddingsDropsLmHead) {
  TinyHf tiny;
  tiny.lm_head = true;
  json cfg = tiny.config();
  cfg["tie_word_embeddings"] = true;
  auto m = load_hf_model(write_folder(cfg, tiny.tensors()));
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_TRUE(m->config.tied_embeddings);
  EXPECT_EQ(m->find("output.weight"), nullptr);
}

/// Loads a folder made from `cfg` and tiny's tensors; expects `code` and `part` in the message.
void expect_error(const json& cfg, const std::vector<StTensor>& tensors, ErrorCode code,
                  const std::string& part) {
  auto m = load_hf_model(write_folder(cfg, tensors));
  ASSERT_FALSE(m) << cfg.dump();
  if (std::getenv("PEREGRINE_SHOW_ERRORS")) std::printf("%s\n", m.status().message().c_str());
  EXPECT_EQ(m.status().code(), code) << m.status().message();
  EXPECT_NE(m.status().message().find(part), std::string::npos) << m.status().message();
}

// The RoPE scalings that follow the sequence length, in the forms config.json holds them:
// LongRoPE as Phi-3 128k writes it (original_max_position_embeddings at the top level, factor
// its ratio to max_position_embeddings) or with factor and original context in rope_scaling;
// dynamic NTK with or without an original context (else max_position_embeddings).
TEST(HfModel, RopeScalingThatFollowsTheLength) {
  TinyHf tiny;
  const auto tensors = tiny.tensors();
  const auto scaling_of = [&](const json& cfg) {
    auto m = load_hf_model(write_folder(cfg, tensors));
    EXPECT_TRUE(m) << m.status().message();
    return m ? m->config.rope_scaling : RopeScaling{};
  };
  json cfg = tiny.config();
  cfg["original_max_position_embeddings"] = 64;
  cfg["rope_scaling"] = {{"type", "longrope"}, {"short_factor", {1.0, 1.5}}, {"long_factor", {1.0, 4.0}}, {"factor", 9.0}};
  RopeScaling s = scaling_of(cfg);
  EXPECT_EQ(s.kind, RopeScaling::Kind::kLongRope);
  EXPECT_EQ(s.original_context, 64);
  EXPECT_EQ(s.factor, 4.0f);  // 256 / 64: the top-level context overrides rope_scaling's factor
  EXPECT_EQ(s.short_factor, (std::vector<float>{1.0f, 1.5f}));
  EXPECT_EQ(s.long_factor, (std::vector<float>{1.0f, 4.0f}));
  EXPECT_EQ(s.attention_factor, 0.0f);
  cfg.erase("original_max_position_embeddings");
  cfg["rope_scaling"]["original_max_position_embeddings"] = 32;
  cfg["rope_scaling"]["attention_factor"] = 1.25;
  s = scaling_of(cfg);
  EXPECT_EQ(s.original_context, 32);
  EXPECT_EQ(s.factor, 9.0f);
  EXPECT_EQ(s.attention_factor, 1.25f);
  cfg["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}, {"original_max_position_embeddings", 64}};
  s = scaling_of(cfg);
  EXPECT_EQ(s.kind, RopeScaling::Kind::kDynamic);
  EXPECT_EQ(s.factor, 2.0f);
  EXPECT_EQ(s.original_context, 64);
  cfg["rope_scaling"].erase("original_max_position_embeddings");
  EXPECT_EQ(scaling_of(cfg).original_context, 256);
}

TEST(HfModel, ConfigErrors) {
  TinyHf tiny;
  const auto tensors = tiny.tensors();
  for (const char* field : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"}) {
    json cfg = tiny.config();
    cfg.erase(field);
    expect_error(cfg, tensors, ErrorCode::kCorruptFile, field);
    cfg[field] = "16";
    expect_error(cfg, tensors, ErrorCode::kCorruptFile, field);
    cfg[field] = 16.5;
    expect_error(cfg, tensors, ErrorCode::kCorruptFile, field);
  }
  json cfg = tiny.config();
  cfg["rms_norm_eps"] = "small";
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "rms_norm_eps");
  cfg = tiny.config();
  cfg["rope_theta"] = 1e300;
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "rope_theta");
  cfg = tiny.config();
  cfg["rms_norm_eps"] = -1e-5;
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "rms_eps");
  cfg = tiny.config();
  cfg["num_attention_heads"] = 0;
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "n_heads");
  cfg = tiny.config();
  cfg["hidden_size"] = -9223372036854775807LL - 1;
  cfg["num_attention_heads"] = -1;
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "must be positive");
  cfg = tiny.config();
  cfg["tie_word_embeddings"] = 1;
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "tie_word_embeddings");
  cfg = tiny.config();
  cfg["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};  // HF requires all four llama3 fields
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "low_freq_factor");
  cfg["rope_scaling"] = {{"type", "su"}, {"factor", 4.0}};  // Phi-3's early name for longrope
  expect_error(cfg, tensors, ErrorCode::kUnsupported, "'su'");
  cfg["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 0.5}};
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "factor must be >= 1");
  cfg["rope_scaling"] = {{"rope_type", "dynamic"}};
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "needs 'factor'");
  // LongRoPE's factor lists: head_dim / 2 = 2 positive, finite values each.
  const json two = {1.0, 1.5};
  cfg["rope_scaling"] = {{"type", "longrope"}, {"long_factor", two}};
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "'short_factor' is missing");
  cfg["rope_scaling"] = {{"type", "longrope"}, {"short_factor", 1.5}, {"long_factor", two}};
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "expected a list of numbers");
  cfg["rope_scaling"] = {{"type", "longrope"}, {"short_factor", two}, {"long_factor", {1.0, 2.0, 4.0}}};
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "long_factor has 3 values, expected head_dim / 2 = 2");
  cfg["rope_scaling"] = {{"type", "longrope"}, {"short_factor", {1.0, -1.5}}, {"long_factor", two}};
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "short_factor[1] = -1.5");
  cfg["rope_scaling"] = {{"type", "longrope"}, {"short_factor", two}, {"long_factor", {1.0, 1e300}}};  // inf as a float
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "'long_factor' = 1e+300 is out of range");
  cfg["rope_scaling"] = {{"type", "longrope"}, {"short_factor", two}, {"long_factor", {1.0, "2"}}};
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "long_factor");
  cfg["rope_scaling"] = {{"type", "longrope"}, {"short_factor", two}, {"long_factor", two}, {"attention_factor", -1.0}};
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "attention_factor must be >= 0");
  cfg["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", 1.0}, {"beta_slow", 2.0}};
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "beta_fast > beta_slow");
  cfg["rope_scaling"] = {{"type", "linear"}, {"factor", 0.5}};  // the legacy key; a factor below 1
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "factor must be >= 1");
  cfg["rope_scaling"] = {{"factor", 2.0}};
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "names no rope_type");
  cfg["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0}, {"high_freq_factor", 1.0},
                         {"original_max_position_embeddings", 8192}};
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "low_freq_factor < high_freq_factor");
  cfg["rope_scaling"] = "linear";
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "expected an object");
  cfg = tiny.config();
  cfg["architectures"] = {"GPT2LMHeadModel"};
  cfg["model_type"] = "gpt2";
  expect_error(cfg, tensors, ErrorCode::kUnsupported, "GPT2LMHeadModel");
  cfg.erase("architectures");
  expect_error(cfg, tensors, ErrorCode::kUnsupported, "gpt2");
  cfg.erase("model_type");
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "architecture");
  cfg = tiny.config();
  cfg["hidden_act"] = "gelu";
  expect_error(cfg, tensors, ErrorCode::kUnsupported, "gelu");
  cfg = tiny.config();
  cfg["attention_bias"] = true;
  expect_error(cfg, tensors, ErrorCode::kUnsupported, "attention_bias");
  cfg = tiny.config();
  cfg["num_key_value_heads"] = 3;  // 4 heads not a multiple of 3
  expect_error(cfg, tensors, ErrorCode::kCorruptFile, "n_kv_heads");
  expect_error(json::array({1, 2}), tensors, ErrorCode::kCorruptFile, "not a JSON object");
}

TEST(HfModel, TensorErrors) {
  TinyHf tiny;
  auto tensors = tiny.tensors();
  // A q_proj of the wrong shape.
  auto bad_shape = tensors;
  for (auto& t : bad_shape) {
    if (t.name == "model.layers.1.self_attn.q_proj.weight") t.shape = {8, 32};
  }
  expect_error(tiny.config(), bad_shape, ErrorCode::kCorruptFile, "blk.1.attn_q.weight");
  // A missing tensor.
  auto missing = tensors;
  missing.erase(std::remove_if(missing.begin(), missing.end(),
                               [](const StTensor& t) { return t.name == "model.layers.0.mlp.up_proj.weight"; }),
                missing.end());
  expect_error(tiny.config(), missing, ErrorCode::kCorruptFile, "blk.0.ffn_up.weight");
  // A bias (Qwen2's, not Llama's), a layer past num_hidden_layers, an I64 tensor.
  auto extra = tensors;
  extra.push_back({"model.layers.0.self_attn.q_proj.bias", "F32", {16}, Bytes(64)});
  expect_error(tiny.config(), extra, ErrorCode::kUnsupported, "tensor 'blk.0.attn_q.bias' is not part of a llama model");
  extra = tensors;
  extra.push_back({"model.layers.2.input_layernorm.weight", "F32", {16}, Bytes(64)});
  expect_error(tiny.config(), extra, ErrorCode::kCorruptFile, "layer 2");
  extra = tensors;
  extra.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {2}, Bytes(8)});
  auto skipped = load_hf_model(write_folder(tiny.config(), extra));
  EXPECT_TRUE(skipped) << skipped.status().message();
  extra.push_back({"position_ids", "I64", {1}, Bytes(8)});
  expect_error(tiny.config(), extra, ErrorCode::kUnsupported, "I64");
}

TEST(HfModel, FolderErrors) {
  const std::string dir = fresh_dir();
  auto none = load_hf_model(dir + "/nope");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.status().code(), ErrorCode::kNotFound);
  auto no_config = load_hf_model(dir);
  ASSERT_FALSE(no_config);
  EXPECT_EQ(no_config.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(no_config.status().message().find("config.json"), std::string::npos);
  test::write_text(dir + "/config.json", TinyHf().config().dump());
  auto no_weights = load_hf_model(dir);
  ASSERT_FALSE(no_weights);
  EXPECT_EQ(no_weights.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(no_weights.status().message().find("model.safetensors"), std::string::npos);
  auto is_file = load_hf_model(dir + "/config.json");
  ASSERT_FALSE(is_file);
  EXPECT_EQ(is_file.status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace peregrine
