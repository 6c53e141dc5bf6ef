#include "test_models.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <random>

#include "peregrine/engine/generator.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/model/synth_lora.h"
#include "peregrine/quant/convert_model.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "test_paths.h"

namespace peregrine::test {

std::string stories260k_path() { return shared_dir() + "/models/stories260K/stories260K.bin"; }

const Tokenizer& llamacpp_vocab(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  std::lock_guard lock(mu);
  std::unique_ptr<Tokenizer>& t = loaded[name];
  if (!t) {
    auto r = load_tokenizer_file(shared_dir() + "/tokenizers/gguf-vocab/ggml-vocab-" + name + ".gguf");
    EXPECT_TRUE(r) << r.status().message();
    if (r) t = std::move(*r);
  }
  return *t;
}

namespace {

std::unique_ptr<LlamaModel> load_model(const std::string& path) {
  auto file = load_model_file(path);
  EXPECT_TRUE(file) << file.status().message();
  if (!file) return nullptr;
  auto m = LlamaModel::create(std::move(*file));
  EXPECT_TRUE(m) << m.status().message();
  if (!m) return nullptr;
  return std::make_unique<LlamaModel>(std::move(*m));
}

}  // namespace

std::unique_ptr<LlamaModel> load_stories260k() { return load_model(stories260k_path()); }

std::string stories260k_greedy_text(DType dtype, DType kv_type, WeightPlacement placement) {
  auto file = load_model_file(stories260k_path());
  EXPECT_TRUE(file) << file.status().message();
  auto tok = load_tokenizer(*file);
  EXPECT_TRUE(tok) << tok.status().message();
  ThreadPool pool(2);
  EXPECT_TRUE(convert_model_weights(*file, dtype, &pool));
  auto model = LlamaModel::create(std::move(*file), placement);
  EXPECT_TRUE(model) << model.status().message();
  const std::string prompt = "Once upon a time";
  const auto ids = (*tok)->encode(prompt, true);
  GenerateOptions opt;
  opt.max_new_tokens = 300;
  opt.sampling.temperature = 0.0f;
  opt.kv_type = kv_type;
  std::string text = prompt;
  std::int32_t prev = ids.back();
  auto stats = generate(*model, ids, opt, pool, [&](std::int32_t id) {
    text += (*tok)->decode_token(prev, id);
    prev = id;
  });
  EXPECT_TRUE(stats) << stats.status().message();
  return text;
}

std::string stories260k_reference_text() {
  std::string s = read_file(shared_dir() + "/models/stories260K/greedy_once_upon_a_time.txt");
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

std::unique_ptr<LlamaModel> load_test_model(const std::string& name) { return load_model(testdata_dir() + "/" + name); }

KvCache make_kv_cache(const ModelConfig& config, std::int64_t n_tokens, std::int32_t n_seqs,
                      std::int32_t block_size, DType dtype) {
  const auto n_blocks = static_cast<std::int32_t>(n_seqs * blocks_for_tokens(n_tokens, block_size));
  auto cache = KvCache::create(config.kv_shape(), {n_blocks, block_size, dtype});
  if (!cache) {
    ADD_FAILURE() << cache.status().message();
    std::abort();
  }
  return std::move(*cache);
}

EagleHead identity_eagle_head(const LlamaModel& target) {
  const ModelConfig& c = target.config();
  EagleHead h = eagle_head_shape(c);
  for (const std::string& name : h.names()) {
    std::int64_t n = 1;
    for (std::int64_t d : h.shape(name)) n *= d;
    h.tensors[name].assign(static_cast<std::size_t>(n), name.find("layernorm") != std::string::npos ? 1.0f : 0.0f);
  }
  std::vector<float>& fc = h.tensors["fc.weight"];  // [d, 2d]: row i reads feature i
  for (std::int64_t i = 0; i < c.dim; ++i) fc[static_cast<std::size_t>(i * 2 * c.dim + c.dim + i)] = 1.0f;
  return h;
}

MedusaHeads untrained_medusa_heads(const LlamaModel& target, std::int64_t heads) {
  const ModelConfig& c = target.config();
  const TensorView* out = target.file().find(c.tied_embeddings ? "token_embd.weight" : "output.weight");
  EXPECT_NE(out, nullptr);
  std::vector<float> lm_head(static_cast<std::size_t>(c.vocab_size * c.dim));
  for (std::int64_t r = 0; r < c.vocab_size; ++r) {
    dequantize_row(*out, r, std::span(lm_head).subspan(static_cast<std::size_t>(r * c.dim), static_cast<std::size_t>(c.dim)));
  }
  MedusaHeads m{heads, 1, c.dim, c.vocab_size, "stories260K", {}};
  for (std::int64_t k = 0; k < heads; ++k) {
    const std::string p = std::to_string(k) + ".";
    m.tensors[p + "0.linear.weight"].assign(static_cast<std::size_t>(c.dim * c.dim), 0.0f);
    m.tensors[p + "0.linear.bias"].assign(static_cast<std::size_t>(c.dim), 0.0f);
    m.tensors[p + "1.weight"] = lm_head;
  }
  return m;
}

LoraAdapter random_lora_adapter(const ModelFile& base, std::int64_t rank, float alpha, std::uint32_t seed,
                                const std::vector<std::string>& targets, float stddev) {
  auto a = synth_lora_adapter(base, {rank, alpha, targets, seed, stddev});
  EXPECT_TRUE(a) << a.status().message();
  return a ? std::move(*a) : LoraAdapter{};
}

std::unique_ptr<ModelDrafter> make_model_drafter(const LlamaModel& draft, const ModelConfig& target, SpecMethod method,
                                                 std::int64_t n_layers, std::int32_t kv_blocks, std::int64_t context_window) {
  ModelDrafterOptions o;
  o.method = method;
  o.n_layers = n_layers;
  o.kv_blocks = kv_blocks;
  o.context_window = context_window;
  auto d = ModelDrafter::create(draft, target, o);
  EXPECT_TRUE(d) << d.status().message();
  return d ? std::move(*d) : nullptr;
}

Generated generate_tokens(const LlamaModel& model, std::span<const std::int32_t> prompt, const GenerateOptions& o,
                          ThreadPool& pool) {
  Generated out;
  auto stats = generate(model, prompt, o, pool, [&](std::int32_t id) { out.tokens.push_back(id); });
  EXPECT_TRUE(stats) << stats.status().message();
  if (stats) out.stats = *stats;
  return out;
}

}  // namespace peregrine::test
