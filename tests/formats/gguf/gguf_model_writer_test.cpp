// save_gguf_model: stories260K converted in memory to Q8_0 written as GGUF and read back (same
// tensor bytes, config and logits; the tokenizer converted from tok512.bin encodes and decodes
// like tok512.bin and carries llama.cpp's own keys and values); a GGUF source keeps its
// tokenizer metadata; an HF source's Q/K rows return to interleaved order; RoPE scaling as
// llama.cpp stores it; refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "formats/model_compare.h"
#include "peregrine/formats/gguf/gguf.h"
#include "peregrine/formats/model_writer.h"
#include "peregrine/quant/convert_model.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/int_group.h"
#include "peregrine/tokenizer/llama2c_tokenizer.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "formats/test_files.h"
#include "test_models.h"

namespace peregrine {
namespace {

std::string stories_dir() { return test::shared_dir() + "/models/stories260K"; }
std::string tok512() { return stories_dir() + "/tok512.bin"; }

ModelFile load(const std::string& path) {
  auto m = load_model_file(path);
  EXPECT_TRUE(m) << m.status().message();
  return m ? std::move(*m) : ModelFile{};
}

/// The tokenizer of `m` (from its file's metadata or folder) encodes and decodes TinyStories
/// text, and lists every piece, exactly as tok512.bin does.
void expect_tok512_behaviour(const ModelFile& m) {
  auto got = load_tokenizer(m);
  ASSERT_TRUE(got) << got.status().message();
  auto want = load_llama2c_tokenizer(tok512());
  ASSERT_TRUE(want) << want.status().message();
  const Tokenizer &a = **want, &b = **got;
  ASSERT_EQ(b.vocab_size(), a.vocab_size());
  EXPECT_EQ(b.bos_id(), a.bos_id());
  EXPECT_EQ(b.eos_id(), a.eos_id());
  EXPECT_EQ(b.add_bos_default(), a.add_bos_default());
  for (std::int32_t id = 0; id < a.vocab_size(); ++id) ASSERT_EQ(b.piece(id), a.piece(id)) << id;
  const std::string text = test::read_file(test::shared_dir() + "/data/tinystories/tinystories_sample.txt");
  ASSERT_FALSE(text.empty());
  const auto ids = a.encode(text, true);
  EXPECT_EQ(b.encode(text, true), ids);
  EXPECT_EQ(b.decode(ids), a.decode(ids));
  EXPECT_EQ(b.decode(ids), text);
}

TEST(SaveGgufModel, Stories260kQ8_0RoundTripsTensorsConfigLogitsAndTokenizer) {
  ModelFile m = load(test::stories260k_path());
  auto fallback = convert_model_weights(m, DType::kQ8_0);
  ASSERT_TRUE(fallback) << fallback.status().message();
  EXPECT_EQ(m.find("blk.0.attn_q.weight")->dtype, DType::kQ8_0);
  EXPECT_EQ(m.find("blk.0.ffn_down.weight")->dtype, DType::kF16);  // rows of 172: no whole blocks
  test::TempDir dir;
  const std::string path = dir.file("stories260K-q8_0.gguf");
  ASSERT_TRUE(save_gguf_model(m, path, tok512()).is_ok());

  const ModelFile g = load(path);
  EXPECT_EQ(g.format, ModelFormat::kGguf);
  test::expect_same_config(m.config, g.config);
  EXPECT_EQ(g.config.rope_style, RopeStyle::kInterleaved);
  test::expect_same_tensors(m, g);
  const auto a = test::prefill_logits(m, false), b = test::prefill_logits(g, false);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  ASSERT_TRUE(g.gguf);
  auto file_type = g.gguf->get_int("general.file_type");
  ASSERT_TRUE(file_type);
  EXPECT_EQ(*file_type, 7);  // MOSTLY_Q8_0
  expect_tok512_behaviour(g);
}

TEST(SaveGgufModel, EveryGgufDtypeRoundTrips) {
  test::TempDir dir;
  const std::pair<DType, std::int64_t> cases[] = {
      {DType::kF32, 0}, {DType::kF16, 1}, {DType::kBF16, 32}, {DType::kQ4_0, 2}};  // llama_ftype
  for (const auto& [dtype, ftype] : cases) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    ModelFile m = load(test::stories260k_path());
    if (dtype != DType::kF32) {
      ASSERT_TRUE(convert_model_weights(m, dtype));
    }
    const std::string path = dir.file(std::string(dtype_name(dtype)) + ".gguf");
    ASSERT_TRUE(save_gguf_model(m, path, tok512()).is_ok());
    const ModelFile g = load(path);
    test::expect_same_config(m.config, g.config);
    test::expect_same_tensors(m, g);
    EXPECT_EQ(test::prefill_logits(m, false), test::prefill_logits(g, false));
    auto file_type = g.gguf->get_int("general.file_type");
    ASSERT_TRUE(file_type);
    EXPECT_EQ(*file_type, ftype);
  }
}

TEST(SaveGgufModel, ConvertedTokenizerHasLlamaCppsKeysTypesAndValues) {
  // stories260K.gguf was written by llama.cpp's llama2.c converter from the same tok512.bin.
  auto ref = GgufFile::open(stories_dir() + "/stories260K.gguf");
  ASSERT_TRUE(ref) << ref.status().message();
  test::TempDir dir;
  ASSERT_TRUE(save_gguf_model(load(test::stories260k_path()), dir.file("m.gguf"), tok512()).is_ok());
  auto got = GgufFile::open(dir.file("m.gguf"));
  ASSERT_TRUE(got) << got.status().message();
  for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                          "tokenizer.ggml.token_type", "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.bos_token_id",
                          "tokenizer.ggml.eos_token_id", "general.architecture", "llama.embedding_length",
                          "llama.feed_forward_length", "llama.attention.head_count", "llama.attention.head_count_kv",
                          "llama.block_count", "llama.rope.dimension_count", "llama.attention.layer_norm_rms_epsilon"}) {
    const GgufValue* want = ref->find(key);
    const GgufValue* v = got->find(key);
    ASSERT_NE(want, nullptr) << key;
    ASSERT_NE(v, nullptr) << key;
    EXPECT_EQ(v->type, want->type) << key;
    EXPECT_EQ(v->elem_type, want->elem_type) << key;
    EXPECT_EQ(v->scalar, want->scalar) << key;
    EXPECT_EQ(v->array, want->array) << key;
  }
  EXPECT_EQ(got->find("peregrine.ffn_down_hadamard"), nullptr);
}

TEST(SaveGgufModel, GgufSourceKeepsItsTokenizerAndTheHadamardFlagRoundTrips) {
  ModelFile m = load(stories_dir() + "/stories260K.gguf");
  m.config.ffn_down_hadamard = true;
  test::TempDir dir;
  ASSERT_TRUE(save_gguf_model(m, dir.file("h.gguf"), "").is_ok());
  const ModelFile g = load(dir.file("h.gguf"));
  EXPECT_TRUE(g.config.ffn_down_hadamard);
  test::expect_same_config(m.config, g.config);
  test::expect_same_tensors(m, g);
  for (const auto& [key, value] : m.gguf->metadata()) {
    if (!key.starts_with("tokenizer.")) continue;
    const GgufValue* v = g.gguf->find(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_EQ(v->scalar, value.scalar) << key;
    EXPECT_EQ(v->array, value.array) << key;
  }
  auto name = g.gguf->get_string("general.name"), source_name = m.gguf->get_string("general.name");
  ASSERT_TRUE(name && source_name);
  EXPECT_EQ(*name, *source_name);
  expect_tok512_behaviour(g);
}

TEST(SaveGgufModel, HuggingFaceSourceReturnsToInterleavedRowsAndItsTokenizerBin) {
  const ModelFile bin = load(test::stories260k_path());
  test::TempDir dir;
  ASSERT_TRUE(save_hf_model(bin, dir.file("hf"), HfQuantLayout::kGptq, tok512()).is_ok());
  const ModelFile hf = load(dir.file("hf"));
  EXPECT_EQ(hf.config.rope_style, RopeStyle::kNeox);
  auto tok = tokenizer_file_of(hf);
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ(std::filesystem::path(*tok).filename(), "tokenizer.bin");
  ASSERT_TRUE(save_gguf_model(hf, dir.file("back.gguf"), *tok).is_ok());
  const ModelFile g = load(dir.file("back.gguf"));
  test::expect_same_config(bin.config, g.config);
  test::expect_same_tensors(bin, g);  // llama2.c → HF → GGUF: the original bytes, row for row
  EXPECT_EQ(test::prefill_logits(bin, false), test::prefill_logits(g, false));
}

// Scaled RoPE through the writers as llama.cpp stores it: an HF llama3 model becomes a GGUF with
// the rope_freqs.weight tensor (no scaling keys) and the same logits; linear scaling becomes the
// rope.scaling keys and returns to config.json; a rope_freqs tensor has no config.json form.
TEST(SaveGgufModel, RopeScalingAsLlamaCppStoresIt) {
  const std::string tok = test::testdata_dir() + "/tok512.bin";
  const ModelFile hf = load(test::testdata_dir() + "/hf-f32-llama3-rope");
  ASSERT_EQ(hf.config.rope_scaling.kind, RopeScaling::Kind::kLlama3);
  test::TempDir dir;
  ASSERT_TRUE(save_gguf_model(hf, dir.file("llama3.gguf"), tok).is_ok());
  const ModelFile g = load(dir.file("llama3.gguf"));
  EXPECT_EQ(g.config.rope_scaling.kind, RopeScaling::Kind::kNone);
  EXPECT_FALSE(g.gguf->find("llama.rope.scaling.type"));
  const TensorView* freqs = g.find("rope_freqs.weight");
  ASSERT_NE(freqs, nullptr);
  ASSERT_EQ(freqs->dtype, DType::kF32);
  const auto want = rope_freq_factors(hf.config.rope_scaling, hf.config.head_dim, hf.config.rope_theta);
  ASSERT_EQ(static_cast<std::size_t>(freqs->numel()), want.size());
  const auto* got = static_cast<const float*>(freqs->data);
  EXPECT_EQ(std::vector<float>(got, got + want.size()), want);
  EXPECT_GT(want.back(), 1.0f);
  const auto a = test::prefill_logits(hf, false), b = test::prefill_logits(g, false);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4f) << i;  // RoPE pairs reordered: sums in another order
  const Status st = save_hf_model(g, dir.file("back"), HfQuantLayout::kGptq, tok);
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.message();
  EXPECT_NE(st.message().find("rope_freqs"), std::string::npos) << st.message();

  const ModelFile linear = load(test::testdata_dir() + "/hf-bf16-linear-rope");
  ASSERT_EQ(linear.config.rope_scaling.kind, RopeScaling::Kind::kLinear);
  ASSERT_TRUE(save_gguf_model(linear, dir.file("linear.gguf"), tok).is_ok());
  const ModelFile lg = load(dir.file("linear.gguf"));
  test::expect_same_config(linear.config, lg.config);
  EXPECT_EQ(lg.find("rope_freqs.weight"), nullptr);
  ASSERT_TRUE(save_hf_model(lg, dir.file("linear-hf"), HfQuantLayout::kGptq, tok).is_ok());
  test::expect_same_config(linear.config, load(dir.file("linear-hf")).config);
  // YaRN with non-default betas and an explicit attention factor: llama.cpp's rope.scaling keys
  // (attn_factor as the multiple of YaRN's default), back to config.json's fields, same logits.
  const ModelFile yarn = load(test::testdata_dir() + "/hf-f32-qwen2-yarn");
  ASSERT_EQ(yarn.config.rope_scaling.kind, RopeScaling::Kind::kYarn);
  EXPECT_EQ(yarn.config.rope_scaling.attention_factor, 1.25f);
  ASSERT_TRUE(save_gguf_model(yarn, dir.file("yarn.gguf"), tok).is_ok());
  const ModelFile yg = load(dir.file("yarn.gguf"));
  EXPECT_TRUE(yg.gguf->find("qwen2.rope.scaling.original_context_length"));
  EXPECT_TRUE(yg.gguf->find("qwen2.rope.scaling.attn_factor"));
  EXPECT_EQ(yg.config.rope_scaling.kind, RopeScaling::Kind::kYarn);
  EXPECT_NEAR(yg.config.rope_scaling.attention_factor, 1.25f, 1e-6f);
  EXPECT_LE(test::max_abs_diff(test::prefill_logits(yarn, false), test::prefill_logits(yg, false)), 1e-5f);
  ASSERT_TRUE(save_hf_model(yg, dir.file("yarn-hf"), HfQuantLayout::kGptq, tok).is_ok());
  const RopeScaling back = load(dir.file("yarn-hf")).config.rope_scaling;
  EXPECT_EQ(back.kind, RopeScaling::Kind::kYarn);
  EXPECT_EQ(back.beta_fast, 16.0f);
  EXPECT_EQ(back.beta_slow, 2.0f);
  EXPECT_EQ(back.original_context, 64);
}

// The scalings that follow the sequence length: LongRoPE to GGUF as convert_hf_to_gguf.py writes
// Phi-3 128k (the rope_factors_long / rope_factors_short tensors, original_context_length and
// the absolute attn_factor, no type key) and back to config.json in Phi-3's form, the same
// config both ways; dynamic NTK has no GGUF form and round-trips through config.json.
TEST(SaveGgufModel, LengthFollowingRopeScaling) {
  const std::string tok = test::testdata_dir() + "/tok512.bin";
  test::TempDir dir;
  const ModelFile hf = load(test::testdata_dir() + "/hf-f32-phi3-longrope");
  ASSERT_EQ(hf.config.rope_scaling.kind, RopeScaling::Kind::kLongRope);
  EXPECT_EQ(hf.config.rope_scaling.original_context, 16);
  EXPECT_EQ(hf.config.rope_scaling.factor, 8.0f);  // max_position_embeddings 128 / 16
  ASSERT_TRUE(save_gguf_model(hf, dir.file("longrope.gguf"), tok).is_ok());
  const ModelFile g = load(dir.file("longrope.gguf"));
  test::expect_same_config(hf.config, g.config);
  EXPECT_FALSE(g.gguf->find("phi3.rope.scaling.type"));
  EXPECT_TRUE(g.gguf->find("phi3.rope.scaling.original_context_length"));
  auto attn = g.gguf->get_float("phi3.rope.scaling.attn_factor");
  ASSERT_TRUE(attn) << attn.status().message();
  EXPECT_FLOAT_EQ(static_cast<float>(*attn), std::sqrt(1.0f + std::log(8.0f) / std::log(16.0f)));
  std::vector<std::string> rope_tensors;
  for (const TensorView& t : g.gguf->tensors()) {
    if (t.name.starts_with("rope_factors_")) rope_tensors.push_back(t.name + " " + t.shape_string() + " " + std::string(dtype_name(t.dtype)));
  }
  EXPECT_EQ(rope_tensors, (std::vector<std::string>{"rope_factors_long.weight [8] f32", "rope_factors_short.weight [8] f32"}));
  EXPECT_LE(test::max_abs_diff(test::prefill_logits(hf, false), test::prefill_logits(g, false)), 1e-5f);
  ASSERT_TRUE(save_hf_model(g, dir.file("longrope-hf"), HfQuantLayout::kGptq, tok).is_ok());
  test::expect_same_config(hf.config, load(dir.file("longrope-hf")).config);
  const ModelFile gguf = load(test::testdata_dir() + "/gguf-f32-phi3-longrope.gguf");
  ASSERT_TRUE(save_hf_model(gguf, dir.file("gguf-longrope-hf"), HfQuantLayout::kGptq, "").is_ok());
  test::expect_same_config(gguf.config, load(dir.file("gguf-longrope-hf")).config);

  const ModelFile dynamic = load(test::testdata_dir() + "/hf-f32-dynamic-rope");
  ASSERT_EQ(dynamic.config.rope_scaling.kind, RopeScaling::Kind::kDynamic);
  const Status st = save_gguf_model(dynamic, dir.file("dynamic.gguf"), tok);
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.message();
  EXPECT_NE(st.message().find("dynamic NTK"), std::string::npos) << st.message();
  ASSERT_TRUE(save_hf_model(dynamic, dir.file("dynamic-hf"), HfQuantLayout::kGptq, tok).is_ok());
  test::expect_same_config(dynamic.config, load(dir.file("dynamic-hf")).config);
}

// The Qwen and Phi-3 families through both writers: GGUF under the family's key prefix (qwen3's
// attention.key_length for heads wider than dim / n_heads) with HF's Q/K row order (NEOX rope
// type), Phi-3's gate and up fused into its GGUF ffn_up, back to config.json's family class
// (Phi-3's qkv_proj / gate_up_proj fused again): config, tensors and logits kept.
TEST(SaveGgufModel, FamiliesRoundTripThroughGgufAndHf) {
  const std::string tok = test::testdata_dir() + "/tok512.bin";
  for (const char* name : {"hf-f32-qwen2", "hf-bf16-qwen3", "hf-f32-phi3"}) {
    SCOPED_TRACE(name);
    const ModelFile hf = load(test::testdata_dir() + "/" + name);
    test::TempDir dir;
    ASSERT_TRUE(save_gguf_model(hf, dir.file("m.gguf"), tok).is_ok());
    const ModelFile g = load(dir.file("m.gguf"));
    auto arch = g.gguf->get_string("general.architecture");
    ASSERT_TRUE(arch);
    EXPECT_EQ(*arch, hf.config.arch);
    EXPECT_EQ(g.config.rope_style, RopeStyle::kNeox);
    EXPECT_TRUE(g.gguf->find(hf.config.arch + ".embedding_length"));
    EXPECT_EQ(g.gguf->find(hf.config.arch + ".attention.key_length") != nullptr, hf.config.head_dim * hf.config.n_heads != hf.config.dim);
    const bool fused = hf.config.arch == "phi3";
    for (const TensorView& t : g.gguf->tensors()) {  // as llama.cpp's phi3 loader wants them
      if (t.name == "blk.0.ffn_up.weight") {
        EXPECT_EQ(t.shape[0], (fused ? 2 : 1) * hf.config.ffn_dim);
      }
      if (fused) {
        EXPECT_NE(t.name, "blk.0.ffn_gate.weight");
      }
    }
    test::expect_same_config(hf.config, g.config);
    test::expect_same_tensors(hf, g);  // NEOX in both formats: the same rows
    EXPECT_EQ(test::prefill_logits(hf, false), test::prefill_logits(g, false));
    ASSERT_TRUE(save_hf_model(g, dir.file("back"), HfQuantLayout::kGptq, tok).is_ok());
    const ModelFile back = load(dir.file("back"));
    test::expect_same_config(hf.config, back.config);
    test::expect_same_tensors(hf, back);
  }
}

// The Mixture-of-Experts families through both writers: the GGUF holds llama.cpp's stacked
// blk.L.ffn_{gate,up,down}_exps [n_experts, rows, cols] (no per-expert tensors) and its expert
// keys; Mixtral goes back to MixtralForCausalLM's block_sparse_moe names, Qwen2-MoE / OLMoE to
// mlp.experts / shared_expert: config, tensors and logits kept.
TEST(SaveGgufModel, MixtureOfExpertsRoundTripsThroughGgufAndHf) {
  const std::string tok = test::testdata_dir() + "/tok512.bin";
  for (const char* name : {"hf-f32-mixtral", "hf-bf16-qwen2moe", "hf-f32-olmoe"}) {
    SCOPED_TRACE(name);
    const ModelFile hf = load(test::testdata_dir() + "/" + name);
    ASSERT_GT(hf.config.n_experts, 0);
    test::TempDir dir;
    ASSERT_TRUE(save_gguf_model(hf, dir.file("m.gguf"), tok).is_ok());
    const ModelFile g = load(dir.file("m.gguf"));
    auto count = g.gguf->get_int(hf.config.arch + ".expert_count");
    ASSERT_TRUE(count);
    EXPECT_EQ(*count, hf.config.n_experts);
    bool stacked = false;
    for (const TensorView& t : g.gguf->tensors()) {
      EXPECT_EQ(t.name.find("ffn_up.0."), std::string::npos) << t.name;
      if (t.name == "blk.1.ffn_down_exps.weight") {
        stacked = true;
        EXPECT_EQ(t.shape, (std::vector<std::int64_t>{hf.config.n_experts, hf.config.dim, hf.config.expert_ffn_dim}));
      }
    }
    EXPECT_TRUE(stacked);
    test::expect_same_config(hf.config, g.config);
    EXPECT_LT(test::max_abs_diff(test::prefill_logits(hf, false), test::prefill_logits(g, false)), 1e-5f);
    ASSERT_TRUE(save_hf_model(g, dir.file("back"), HfQuantLayout::kGptq, tok).is_ok());
    const ModelFile back = load(dir.file("back"));
    test::expect_same_config(hf.config, back.config);
    test::expect_same_tensors(hf, back);
  }
}

/// The f32 values of tensor `name` of m.
std::vector<float> values(const ModelFile& m, const std::string& name) {
  const TensorView* t = m.find(name);
  EXPECT_TRUE(t) << name;
  std::vector<float> out(t ? static_cast<std::size_t>(t->numel()) : 0);
  if (t) dequantize(t->dtype, t->data, out);
  return out;
}

// Gemma 2 and a Mistral-style sliding window through both writers: the GGUF keys (window,
// soft-caps, attention.scale), Gemma's norms stored as 1 + w in GGUF (convert_hf_to_gguf.py) and
// w in config.json's form, Gemma2ForCausalLM's config fields; the logits identical in all three
// forms (1 + w is the same f32 sum either way; llama within f32 rounding).
TEST(SaveGgufModel, Gemma2AndSlidingWindowRoundTripThroughGgufAndHf) {
  const std::string tok = test::testdata_dir() + "/tok512.bin";
  for (const char* name : {"hf-f32-gemma2", "hf-bf16-gemma2", "hf-f32-mistral-swa"}) {
    SCOPED_TRACE(name);
    const ModelFile hf = load(test::testdata_dir() + "/" + name);
    const ModelConfig& c = hf.config;
    ASSERT_GT(c.sliding_window, 0);
    test::TempDir dir;
    ASSERT_TRUE(save_gguf_model(hf, dir.file("m.gguf"), tok).is_ok());
    const ModelFile g = load(dir.file("m.gguf"));
    EXPECT_TRUE(g.gguf->find(c.arch + ".attention.sliding_window"));
    const bool gemma = c.arch == "gemma2";
    EXPECT_EQ(g.gguf->find(c.arch + ".attn_logit_softcapping") != nullptr, gemma);
    EXPECT_EQ(g.gguf->find(c.arch + ".final_logit_softcapping") != nullptr, gemma);
    EXPECT_EQ(g.gguf->find(c.arch + ".attention.scale") != nullptr, c.attn_scale > 0.0f);
    test::expect_same_config(c, g.config);
    EXPECT_EQ(g.config.norm_weight_offset, 0.0f);
    EXPECT_EQ(c.norm_weight_offset, gemma ? 1.0f : 0.0f);
    for (const auto& [tensor, t] : hf.tensors) {
      if (!is_norm_weight(tensor)) continue;
      std::vector<float> want = values(hf, tensor);
      for (float& w : want) w += c.norm_weight_offset;
      EXPECT_EQ(values(g, tensor), want) << tensor;
    }
    // NEOX rows in both of Gemma's forms: the same products; llama's GGUF rotates interleaved
    // pairs, the same values in another summation order.
    const std::vector<float> logits = test::prefill_logits(hf, false);
    EXPECT_LE(test::max_abs_diff(test::prefill_logits(g, false), logits), gemma ? 0.0f : 1e-5f);
    ASSERT_TRUE(save_hf_model(g, dir.file("back"), HfQuantLayout::kGptq, tok).is_ok());
    const ModelFile back = load(dir.file("back"));
    test::expect_same_config(c, back.config);
    EXPECT_EQ(back.config.norm_weight_offset, c.norm_weight_offset);
    const std::string config = test::read_file(dir.file("back") + "/config.json");
    EXPECT_NE(config.find(gemma ? "Gemma2ForCausalLM" : "MistralForCausalLM"), std::string::npos) << config;
    EXPECT_EQ(test::prefill_logits(back, false), logits);
  }
}

TEST(SaveGgufModel, RefusesWhatItCannotWriteAndLeavesNoFile) {
  test::TempDir dir;
  const std::string path = dir.file("x.gguf");
  ModelFile m = load(test::stories260k_path());
  auto expect_error = [&](const ModelFile& model, const std::string& tokenizer, ErrorCode code, const std::string& part) {
    const Status st = save_gguf_model(model, path, tokenizer);
    EXPECT_EQ(st.code(), code) << st.message();
    EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
    EXPECT_FALSE(std::filesystem::exists(path));
  };
  expect_error(m, "", ErrorCode::kNotFound, "tokenizer");
  expect_error(m, dir.file("missing.bin"), ErrorCode::kNotFound, "missing.bin");
  expect_error(m, test::shared_dir() + "/tokenizers/llama2/tokenizer.model", ErrorCode::kUnsupported, "tokenizer.model");
  expect_error(m, test::shared_dir() + "/tokenizers/llama2/tokenizer.bin", ErrorCode::kInvalidArgument, "32000");
  expect_error(m, test::shared_dir() + "/tokenizers/gguf-vocab/ggml-vocab-llama-spm.gguf", ErrorCode::kInvalidArgument,
               "32000");
  // A group-wise int linear has no GGUF type.
  TensorView& q = m.tensors["blk.1.attn_v.weight"];
  const std::vector<float> w(static_cast<const float*>(q.data), static_cast<const float*>(q.data) + q.numel());
  QuantParams p{4, 32, true};
  auto bytes = std::make_shared<std::vector<std::uint8_t>>(quantize_int_rtn(w, q.shape[0], q.shape[1], p));
  q = TensorView{q.name, DType::kInt, q.shape, bytes->data(), bytes->size(), p};
  m.storage.push_back(bytes);
  expect_error(m, tok512(), ErrorCode::kUnsupported, "blk.1.attn_v.weight");
}

}  // namespace
}  // namespace peregrine
