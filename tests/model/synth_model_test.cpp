// synth_gguf / synth_hf: small shapes in every dtype and format load and run a finite forward;
// same seed → same bytes (any thread count); GGUF and HF of one seed are the same model (RoPE
// row order); the weight distribution; the shape table against published parameter counts.
#include "peregrine/model/synth_model.h"

#include <gtest/gtest.h>

#include <set>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "peregrine/model/llama_model.h"
#include "test_models.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "formats/test_files.h"

namespace peregrine {
namespace {

/// GQA, untied, every row a multiple of 32 (so Q8_0/Q4_0 need no fallback).
ModelShape tiny_shape() {
  ModelShape s;
  s.name = "tiny";
  ModelConfig& c = s.config;
  c.dim = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.ffn_dim = 96;
  c.vocab_size = 128;
  c.max_seq_len = 64;
  c.rope_theta = 10000.0f;
  c.tied_embeddings = false;
  return s;
}

std::string stories_vocab() { return test::shared_dir() + "/models/stories260K/stories260K.gguf"; }

/// Prefill logits [4, vocab] of `path` on a fixed prompt.
std::vector<float> logits_of(const std::string& path) {
  auto file = load_model_file(path);
  EXPECT_TRUE(file) << file.status().message();
  if (!file) return {};
  auto model = LlamaModel::create(std::move(*file));
  EXPECT_TRUE(model) << model.status().message();
  if (!model) return {};
  ThreadPool pool(2);
  KvCache cache = test::make_kv_cache(model->config(), 8);
  Batch batch;
  const std::int32_t tokens[] = {1, 17, 42, 99};
  for (std::int32_t i = 0; i < 4; ++i) batch.add(tokens[i], i, 0, true);
  std::vector<float> logits;
  EXPECT_TRUE(model->forward(batch, cache, logits, pool).is_ok());
  return logits;
}

void expect_finite_and_varied(const std::vector<float>& logits) {
  ASSERT_FALSE(logits.empty());
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  EXPECT_NE(*std::max_element(logits.begin(), logits.end()), *std::min_element(logits.begin(), logits.end()));
}

SynthOptions options(DType dtype, std::uint64_t seed = 7) {
  SynthOptions o;
  o.dtype = dtype;
  o.seed = seed;
  return o;
}

TEST(SynthModel, GgufOfEveryDtypeLoadsAndRunsAFiniteForward) {
  test::TempDir dir;
  ThreadPool pool(2);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const std::string path = dir.file(std::string(dtype_name(t)) + ".gguf");
    auto r = synth_gguf(tiny_shape(), options(t), path, pool);
    ASSERT_TRUE(r) << r.status().message();
    EXPECT_TRUE(r->f16_fallback.empty());
    EXPECT_EQ(r->n_tensors, 1u + 9u * 2u + 2u);
    auto m = load_model_file(path);
    ASSERT_TRUE(m) << m.status().message();
    EXPECT_EQ(m->find("blk.1.ffn_down.weight")->dtype, t);
    EXPECT_EQ(m->find("blk.1.ffn_norm.weight")->dtype, DType::kF32);
    EXPECT_EQ(m->weight_bytes(), r->weight_bytes);
    EXPECT_EQ(*m->gguf->get_int("general.file_type"), t == DType::kF32 ? 0 : t == DType::kF16 ? 1 : t == DType::kBF16 ? 32 : t == DType::kQ8_0 ? 7 : 2);
    EXPECT_FALSE(m->config.tied_embeddings);
    EXPECT_EQ(m->config.n_kv_heads, 2);
    expect_finite_and_varied(logits_of(path));
  }
}

TEST(SynthModel, SafetensorsOfEveryHalfDtypeLoadsAndRunsAFiniteForward) {
  test::TempDir dir;
  ThreadPool pool(2);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const std::string folder = dir.file(std::string(dtype_name(t)));
    auto r = synth_hf(tiny_shape(), options(t), folder, pool);
    ASSERT_TRUE(r) << r.status().message();
    auto m = load_model_file(folder);
    ASSERT_TRUE(m) << m.status().message();
    EXPECT_EQ(m->format, ModelFormat::kHuggingFace);
    EXPECT_EQ(m->config.rope_style, RopeStyle::kNeox);
    EXPECT_EQ(m->find("blk.0.attn_norm.weight")->dtype, t);
    expect_finite_and_varied(logits_of(folder));
  }
}

TEST(SynthModel, GgufAndHfOfOneSeedAreTheSameModel) {
  // Q/K rows are written in each format's RoPE pairing, so the logits agree up to f32
  // summation order (the attention dot products add head dims in a different order).
  test::TempDir dir;
  ThreadPool pool(2);
  ASSERT_TRUE(synth_gguf(tiny_shape(), options(DType::kF32), dir.file("m.gguf"), pool));
  ASSERT_TRUE(synth_hf(tiny_shape(), options(DType::kF32), dir.file("hf"), pool));
  const auto a = logits_of(dir.file("m.gguf")), b = logits_of(dir.file("hf"));
  ASSERT_EQ(a.size(), b.size());
  float max_diff = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
  EXPECT_LE(max_diff, 1e-5f);
  // Non-Q/K tensors are the same bytes in both files.
  auto g = load_model_file(dir.file("m.gguf")), h = load_model_file(dir.file("hf"));
  const TensorView &gv = *g->find("blk.1.attn_v.weight"), &hv = *h->find("blk.1.attn_v.weight");
  ASSERT_EQ(gv.nbytes, hv.nbytes);
  EXPECT_EQ(std::memcmp(gv.data, hv.data, gv.nbytes), 0);
}

/// Shape `name` of model_shapes() at the test size: its family, experts (at most 6, top-2),
/// shared expert and RoPE scaling kept, the widths made small.
ModelShape tiny_family_shape(const std::string& name) {
  ModelShape s = *find_model_shape(name);
  ModelConfig& c = s.config;
  const bool wide_heads = c.head_dim * c.n_heads != c.dim;  // Qwen3
  c.dim = 64;
  c.n_layers = 2;
  c.n_kv_heads = c.n_kv_heads == c.n_heads ? 4 : 2;
  c.n_heads = 4;
  c.head_dim = wide_heads ? 32 : 16;
  c.ffn_dim = 96;
  c.vocab_size = 128;
  c.max_seq_len = 64;
  if (c.rope_scaling.kind == RopeScaling::Kind::kLlama3) c.rope_scaling.original_context = 32;
  if (c.n_experts > 0) {
    c.n_experts = std::min<std::int64_t>(c.n_experts, 6);
    c.n_experts_used = 2;
    c.expert_ffn_dim = 64;
    c.shared_expert_ffn_dim = c.shared_expert_ffn_dim > 0 ? 96 : 0;
  }
  if (c.sliding_window > 0) c.sliding_window = 3;  // under the 4 test tokens: the window matters
  apply_architecture(c, *find_architecture(c.arch));  // embed_scale for the small dim
  s.vocab.clear();
  return s;
}

// Every family's shape writes the names llama.cpp's loader asks for (its architecture, stacked
// experts, Phi-3's fused tensors, the Llama 3 rope_freqs) and is the same model as GGUF and as
// a Hugging Face folder.
TEST(SynthModel, EveryFamilyShapeAsGgufAndHfIsTheSameModel) {
  ThreadPool pool(2);
  for (const char* name : {"llama3.2-1b", "mistral-7b", "gemma2-2b", "qwen2.5-0.5b", "qwen3-0.6b", "phi3-mini",
                           "mixtral-8x7b", "olmoe-1b-7b", "qwen1.5-moe-a2.7b"}) {
    SCOPED_TRACE(name);
    test::TempDir dir;
    const ModelShape shape = tiny_family_shape(name);
    ASSERT_TRUE(synth_gguf(shape, options(DType::kF32), dir.file("m.gguf"), pool));
    ASSERT_TRUE(synth_hf(shape, options(DType::kF32), dir.file("hf"), pool));
    auto g = GgufFile::open(dir.file("m.gguf"));
    ASSERT_TRUE(g) << g.status().message();
    EXPECT_EQ(*g->get_string("general.architecture"), shape.config.arch);
    EXPECT_EQ(*g->get_string("tokenizer.ggml.model"), "none");
    std::set<std::string> names;
    for (const TensorView& t : g->tensors()) names.insert(t.name);
    EXPECT_EQ(names.count("blk.1.ffn_down_exps.weight"), shape.config.n_experts > 0 ? 1u : 0u);
    EXPECT_EQ(names.count("blk.1.attn_qkv.weight"), shape.config.arch == "phi3" ? 1u : 0u);
    EXPECT_EQ(names.count("rope_freqs.weight"), shape.config.rope_scaling.kind == RopeScaling::Kind::kLlama3 ? 1u : 0u);
    const auto a = logits_of(dir.file("m.gguf")), b = logits_of(dir.file("hf"));
    ASSERT_EQ(a.size(), b.size());
    float max_diff = 0.0f;
    for (std::size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
    EXPECT_LE(max_diff, 1e-5f);
    expect_finite_and_varied(a);
  }
}

TEST(SynthModel, SameSeedSameBytesAtAnyThreadCountOtherSeedOtherBytes) {
  test::TempDir dir;
  ThreadPool one(1), two(2);
  ASSERT_TRUE(synth_gguf(tiny_shape(), options(DType::kQ4_0, 3), dir.file("a.gguf"), one));
  ASSERT_TRUE(synth_gguf(tiny_shape(), options(DType::kQ4_0, 3), dir.file("b.gguf"), two));
  ASSERT_TRUE(synth_gguf(tiny_shape(), options(DType::kQ4_0, 4), dir.file("c.gguf"), two));
  const auto a = test::read_bytes(dir.file("a.gguf"));
  EXPECT_EQ(a, test::read_bytes(dir.file("b.gguf")));
  EXPECT_NE(a, test::read_bytes(dir.file("c.gguf")));
}

TEST(SynthModel, WeightsAreUniformWithStd002AndNormsAreOne) {
  test::TempDir dir;
  ThreadPool pool(2);
  ASSERT_TRUE(synth_gguf(tiny_shape(), options(DType::kF32), dir.file("m.gguf"), pool));
  auto m = load_model_file(dir.file("m.gguf"));
  ASSERT_TRUE(m);
  const TensorView& w = *m->find("token_embd.weight");
  const auto* v = static_cast<const float*>(w.data);
  const float a = 0.02f * std::sqrt(3.0f);
  double sum = 0, sum_sq = 0;
  for (std::int64_t i = 0; i < w.numel(); ++i) {
    ASSERT_GE(v[i], -a);
    ASSERT_LT(v[i], a);
    sum += v[i];
    sum_sq += static_cast<double>(v[i]) * v[i];
  }
  const double n = static_cast<double>(w.numel());  // 8192 values: std of the mean 0.02/90
  EXPECT_NEAR(sum / n, 0.0, 0.001);
  EXPECT_NEAR(std::sqrt(sum_sq / n), 0.02, 0.001);
  const TensorView& norm = *m->find("output_norm.weight");
  for (std::int64_t i = 0; i < norm.numel(); ++i) ASSERT_EQ(static_cast<const float*>(norm.data)[i], 1.0f);
}

TEST(SynthModel, Stories260kShapeCopiesTheTokenizerAndFallsBackToF16OnFfnDown) {
  test::TempDir dir;
  ThreadPool pool(2);
  const ModelShape* shape = find_model_shape("stories260k");
  ASSERT_NE(shape, nullptr);
  SynthOptions o = options(DType::kQ8_0);
  o.vocab_gguf = stories_vocab();
  auto r = synth_gguf(*shape, o, dir.file("s.gguf"), pool);
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(r->f16_fallback.size(), 5u);
  EXPECT_EQ(r->f16_fallback[0], "blk.0.ffn_down.weight");
  auto m = load_model_file(dir.file("s.gguf"));
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->find("blk.0.ffn_down.weight")->dtype, DType::kF16);
  EXPECT_EQ(m->find("blk.0.ffn_up.weight")->dtype, DType::kQ8_0);
  EXPECT_TRUE(m->config.tied_embeddings);
  EXPECT_EQ(*m->gguf->get_string("general.architecture"), "llama");
  EXPECT_EQ(*m->gguf->get_int("general.quantization_version"), 2);
  auto tok = load_tokenizer(*m, "");
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ((*tok)->vocab_size(), 512);
  EXPECT_EQ((*tok)->encode("Once upon a time", true), (std::vector<std::int32_t>{1, 403, 407, 261, 378}));
  expect_finite_and_varied(logits_of(dir.file("s.gguf")));
}

TEST(SynthModel, ErrorsAreValues) {
  test::TempDir dir;
  ThreadPool pool(1);
  SynthOptions o = options(DType::kF32);
  o.vocab_gguf = stories_vocab();  // 512 tokens, the tiny shape has 128
  auto mismatch = synth_gguf(tiny_shape(), o, dir.file("x.gguf"), pool);
  ASSERT_FALSE(mismatch);
  EXPECT_EQ(mismatch.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("512 tokens"), std::string::npos) << mismatch.status().message();

  auto quantized_hf = synth_hf(tiny_shape(), options(DType::kQ4_0), dir.file("hf"), pool);
  ASSERT_FALSE(quantized_hf);
  EXPECT_EQ(quantized_hf.status().code(), ErrorCode::kUnsupported);

  auto unwritable = synth_gguf(tiny_shape(), options(DType::kF16), "/nonexistent-dir/m.gguf", pool);
  ASSERT_FALSE(unwritable);
  EXPECT_EQ(unwritable.status().code(), ErrorCode::kIoError);

  ModelShape bad = tiny_shape();
  bad.config.n_kv_heads = 3;
  auto invalid = synth_gguf(bad, options(DType::kF32), dir.file("bad.gguf"), pool);
  ASSERT_FALSE(invalid);
  EXPECT_EQ(invalid.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.gguf")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad.gguf")));
}

/// Parameters of a llama model: embeddings (+ LM head when untied), per layer Q/K/V/O, the
/// three FFN matrices and two norms, and the final norm.
std::int64_t parameter_count(const ModelConfig& c) {
  const std::int64_t q = c.n_heads * c.head_dim, kv = c.n_kv_heads * c.head_dim;
  const std::int64_t layer = c.dim * (2 * q + 2 * kv) + 3 * c.dim * c.ffn_dim + 2 * c.dim;
  return c.vocab_size * c.dim * (c.tied_embeddings ? 1 : 2) + c.n_layers * layer + c.dim;
}

TEST(ModelShapes, MatchPublishedParameterCounts) {
  const std::pair<const char*, std::int64_t> published[] = {
      {"tinyllama-1.1b", 1'100'048'384}, {"llama2-7b", 6'738'415'616}, {"smollm2-135m", 134'515'008}};
  for (const auto& [name, params] : published) {
    const ModelShape* s = find_model_shape(name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_TRUE(s->config.validate().is_ok()) << name;
    EXPECT_EQ(parameter_count(s->config), params) << name;
  }
  const ModelShape* s110 = find_model_shape("stories110m");
  ASSERT_NE(s110, nullptr);
  EXPECT_TRUE(s110->config.tied_embeddings);
  EXPECT_NEAR(static_cast<double>(parameter_count(s110->config)), 110e6, 1e6);
  EXPECT_EQ(find_model_shape("gpt-5"), nullptr);
}

TEST(ModelShapes, VocabulariesInSharedMatchTheVocabSizes) {
  for (const auto& s : model_shapes()) {
    if (s.vocab.empty()) continue;  // none of that size in ../shared: the file says so
    auto g = GgufFile::open(test::shared_dir() + "/" + s.vocab);
    ASSERT_TRUE(g) << g.status().message();
    EXPECT_EQ(static_cast<std::int64_t>(g->get_string_array("tokenizer.ggml.tokens")->size()), s.config.vocab_size) << s.name;
    if (!s.hf_tokenizer.empty()) {
      EXPECT_TRUE(std::filesystem::exists(test::shared_dir() + "/" + s.hf_tokenizer)) << s.name;
    }
  }
}

}  // namespace
}  // namespace peregrine
