// `peregrine lora merge` end to end on stories260K with random adapters (a PEFT folder written
// by save_peft_adapter, a llama.cpp-layout LoRA GGUF): the merged weights are W + Σ scale·s·B·A
// (read back and compared with an independent product and with merge_lora in process), the
// merged model generates and quantizes, and bad requests give one clean error line.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "formats/gguf/gguf_writer.h"
#include "peregrine/model/lora_adapter.h"
#include "peregrine/quant/float_model.h"
#include "peregrine/quant/lora_merge.h"
#include "run_cli.h"
#include "test_paths.h"

namespace peregrine::test {
namespace {

std::string stories_path() { return shared_dir() + "/models/stories260K/stories260K.bin"; }

const ModelFile& stories() {
  static const ModelFile m = [] {
    auto loaded = load_model_file(stories_path());
    EXPECT_TRUE(loaded) << loaded.status().message();
    return std::move(*loaded);
  }();
  return m;
}

LoraAdapter random_adapter(std::int64_t rank, float alpha, const std::vector<std::string>& names, unsigned seed) {
  LoraAdapter a;
  a.rank = rank;
  a.alpha = alpha;
  a.arch = stories().config.arch;
  a.rope_style = stories().config.rope_style;
  a.head_dim = stories().config.head_dim;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  for (const std::string& name : names) {
    const TensorView* w = stories().find(name);
    EXPECT_NE(w, nullptr) << name;
    LoraPair p{rank, w->shape[1], w->shape[0], std::vector<float>(static_cast<std::size_t>(rank * w->shape[1])),
               std::vector<float>(static_cast<std::size_t>(w->shape[0] * rank))};
    for (float& x : p.a) x = normal(rng);
    for (float& x : p.b) x = normal(rng);
    a.tensors[name] = std::move(p);
  }
  return a;
}

// llama.cpp's LoRA GGUF layout (convert_lora_to_gguf.py).
void write_lora_gguf(const LoraAdapter& a, const std::string& path) {
  GgufWriter w;
  w.kv_string("general.type", "adapter");
  w.kv_string("general.architecture", "llama");
  w.kv_string("adapter.type", "lora");
  w.kv_f32("adapter.lora.alpha", a.alpha);
  for (const auto& [name, p] : a.tensors) {
    w.tensor_f32(name + ".lora_a", {p.rank, p.in}, p.a);
    w.tensor_f32(name + ".lora_b", {p.out, p.rank}, p.b);
  }
  write_bytes(path, w.bytes());
}

struct Adapters {
  std::string dir, peft, gguf;
  LoraAdapter a, b;
};

Adapters make_adapters() {
  Adapters x;
  x.dir = make_temp_dir();
  x.peft = x.dir + "/peft";
  x.gguf = x.dir + "/b.gguf";
  x.a = random_adapter(4, 8.0f, {"blk.0.attn_q.weight", "blk.0.attn_v.weight", "blk.1.ffn_down.weight", "blk.3.attn_k.weight"}, 1);
  x.b = random_adapter(8, 4.0f, {"blk.0.attn_q.weight", "blk.2.ffn_up.weight", "blk.4.attn_output.weight"}, 2);
  EXPECT_TRUE(save_peft_adapter(x.a, x.peft, "stories260K").is_ok());
  write_lora_gguf(x.b, x.gguf);
  return x;
}

TEST(LoraMerge, MergedWeightsAreBasePlusScaledProducts) {
  const Adapters x = make_adapters();
  const std::string out = x.dir + "/merged.gguf";
  const CliResult r = run_cli({"lora", "merge", "-m", stories_path(), "--lora", x.peft + ":0.5", "--lora", x.gguf, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("merged " + x.peft + ": 4 weights, rank 4, scale 0.5 x alpha/r 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("merged " + x.gguf + ": 3 weights, rank 8, scale 1 x alpha/r 0.5"), std::string::npos) << r.out;
  auto merged = load_model_file(out);
  ASSERT_TRUE(merged) << merged.status().message();
  auto got = FloatModel::from(*merged);
  auto base = FloatModel::from(stories());
  ASSERT_TRUE(got && base);

  // Independently: W + Σ user_scale · alpha/r · B·A, in double.
  std::map<std::string, std::vector<double>> delta;
  for (const auto& [adapter, user] : {std::pair{&x.a, 0.5}, std::pair{&x.b, 1.0}}) {
    const double s = user * adapter->alpha / static_cast<double>(adapter->rank);
    for (const auto& [name, p] : adapter->tensors) {
      std::vector<double>& d = delta[name];
      d.resize(static_cast<std::size_t>(p.out * p.in));
      for (std::int64_t o = 0; o < p.out; ++o) {
        for (std::int64_t i = 0; i < p.in; ++i) {
          double sum = 0;
          for (std::int64_t k = 0; k < p.rank; ++k) sum += double{p.b[o * p.rank + k]} * p.a[k * p.in + i];
          d[o * p.in + i] += s * sum;
        }
      }
    }
  }
  EXPECT_EQ(got->names(), base->names());
  for (const std::string& name : base->names()) {
    const auto w = base->tensor(name), m = got->tensor(name);
    ASSERT_EQ(w.size(), m.size()) << name;
    const auto it = delta.find(name);
    if (it == delta.end()) {
      EXPECT_TRUE(std::equal(w.begin(), w.end(), m.begin())) << name << " changed";
      continue;
    }
    double max_delta = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      ASSERT_NEAR(m[i], w[i] + it->second[i], 1e-5) << name << " [" << i << "]";
      max_delta = std::max(max_delta, std::abs(it->second[i]));
    }
    EXPECT_GT(max_delta, 1e-3) << name;  // the adapter does change the weight
  }

  // In process, merge_lora gives the written values exactly.
  auto a = load_lora_adapter(x.peft, stories());
  auto b = load_lora_adapter(x.gguf, stories());
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(merge_lora(*base, *a, 0.5f).is_ok());
  ASSERT_TRUE(merge_lora(*base, *b, 1.0f).is_ok());
  for (const std::string& name : base->names()) {
    const auto w = base->tensor(name), m = got->tensor(name);
    EXPECT_TRUE(std::equal(w.begin(), w.end(), m.begin())) << name;
  }

  const CliResult g = run_cli({"generate", "-m", out, "-p", "Once upon a time", "-n", "12", "--temp", "0"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(g.out.rfind("Once upon a time", 0), 0u) << g.out;
  const CliResult q = run_cli({"quantize", "-m", out, "-o", x.dir + "/q8.gguf", "--bits", "8", "--group", "32"});
  ASSERT_EQ(q.exit_code, 0) << q.err;

  // The same adapters (scaled up to change the greedy text) merged into stories260K as a
  // Hugging Face folder (NeoX Q/K rows: B's rows are reordered on load) give the same model.
  const CliResult hf_base = run_cli({"lora", "merge", "-m", stories_path(), "--lora", x.gguf + ":0", "-o", x.dir + "/base_hf"});
  ASSERT_EQ(hf_base.exit_code, 0) << hf_base.err;
  for (const std::string& base : std::vector<std::string>{stories_path(), x.dir + "/base_hf"}) {
    const CliResult h = run_cli({"lora", "merge", "-m", base, "--lora", x.peft + ":20", "--lora", x.gguf + ":20", "-o",
                                 x.dir + (base == stories_path() ? "/big.gguf" : "/big_hf")});
    ASSERT_EQ(h.exit_code, 0) << h.err;
  }
  const auto greedy = [](const std::string& m) {
    const CliResult g = run_cli({"generate", "-m", m, "-p", "Once upon a time", "-n", "40", "--temp", "0"});
    EXPECT_EQ(g.exit_code, 0) << g.err;
    return g.out;
  };
  const std::string gg = greedy(x.dir + "/big.gguf");
  EXPECT_EQ(greedy(x.dir + "/big_hf"), gg);
  EXPECT_NE(greedy(stories_path()), gg) << "the adapters should change the greedy text";
}

TEST(LoraMerge, ZeroScaleKeepsTheBaseAndFoldersWork) {
  const Adapters x = make_adapters();
  const CliResult r = run_cli({"lora", "merge", "-m", stories_path(), "--lora", x.gguf + ":0", "-o", x.dir + "/hf"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(x.dir + "/hf/model.safetensors"));
  auto merged = load_model_file(x.dir + "/hf");
  ASSERT_TRUE(merged) << merged.status().message();
  auto got = FloatModel::from(*merged);
  auto base = FloatModel::from(stories());
  ASSERT_TRUE(got && base);
  for (const std::string name : {"blk.2.ffn_up.weight", "blk.4.attn_output.weight", "blk.0.attn_v.weight"}) {
    const auto w = base->tensor(name), m = got->tensor(name);
    EXPECT_TRUE(std::equal(w.begin(), w.end(), m.begin())) << name;
  }
  const CliResult g = run_cli({"generate", "-m", x.dir + "/hf", "-p", "Once upon a time", "-n", "8", "--temp", "0"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
}

TEST(LoraMerge, BadRequestsGiveOneCleanErrorLine) {
  const Adapters x = make_adapters();
  const std::string out = x.dir + "/x.gguf";
  const auto merge = [&](const std::string& lora) { return run_cli({"lora", "merge", "-m", stories_path(), "--lora", lora, "-o", out}); };
  expect_clean_error(merge(x.dir + "/nowhere"), "does not exist");
  expect_clean_error(merge(x.gguf + ":abc"), "scale 'abc' is not a number");
  expect_clean_error(merge(x.gguf + ":"), "scale '' is not a number");
  expect_clean_error(merge(x.gguf + ":nan"), "is not a number");
  expect_clean_error(merge(stories_path()), "neither a PEFT adapter folder nor a GGUF LoRA adapter");
  expect_clean_error(merge(shared_dir() + "/models/stories260K/stories260K.gguf"), "is not a LoRA adapter");
  LoraAdapter wide = random_adapter(4, 8.0f, {"blk.0.attn_k.weight"}, 3);
  wide.tensors["blk.0.attn_k.weight"].out = 64;  // attn_k has 32 rows
  wide.tensors["blk.0.attn_k.weight"].b.resize(64 * 4);
  write_lora_gguf(wide, x.dir + "/wide.gguf");
  expect_clean_error(merge(x.dir + "/wide.gguf"), "blk.0.attn_k.weight.lora_b is [64, 4], expected [32, 4]");
  expect_clean_error(run_cli({"lora", "merge", "-m", stories_path(), "-o", out}), "--lora is required");
  expect_clean_error(run_cli({"lora"}), "");
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace peregrine::test
