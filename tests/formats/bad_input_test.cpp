// Every malformed input must give a clean error value with the right code and a one-line
// message, never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <functional>
#include <tuple>
#include <variant>

#include "peregrine/formats/config_keys.h"
#include "formats/gguf/gguf_writer.h"
#include "peregrine/formats/gguf/gguf.h"
#include "peregrine/formats/hf/hf_model.h"
#include "peregrine/formats/llama2c.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/formats/safetensors/safetensors.h"
#include "peregrine/model/llama_model.h"
#include "formats/safetensors/safetensors_writer.h"
#include "test_paths.h"

namespace peregrine {
namespace {

using test::Bytes;

std::string stories(const char* ext) { return test::shared_dir() + "/models/stories260K/stories260K." + ext; }

template <typename T>
void expect_error(const Expected<T>& r, ErrorCode code, const std::string& context) {
  ASSERT_FALSE(r.has_value()) << context << ": accepted";
  EXPECT_EQ(r.status().code(), code) << context << ": " << r.status().message();
  EXPECT_FALSE(r.status().message().empty()) << context;
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << context;
  if (std::getenv("PEREGRINE_SHOW_ERRORS")) std::printf("%-28s %s\n", context.c_str(), r.status().message().c_str());
}

/// Offset of the tensor info of `name` in a GGUF image (just after its name).
std::size_t tensor_info_after_name(const Bytes& b, const std::string& name) {
  Bytes needle;
  test::append(needle, static_cast<std::uint64_t>(name.size()));
  needle.insert(needle.end(), name.begin(), name.end());
  auto it = std::search(b.begin(), b.end(), needle.begin(), needle.end());
  EXPECT_NE(it, b.end()) << name;
  return static_cast<std::size_t>(it - b.begin()) + needle.size();
}

/// Tiny llama GGUF (dim 8, 2 heads, 1 KV head, ffn 16, 1 layer of tensors, vocab 16) under
/// `arch`. `hparams` (if given) replaces the rms-epsilon key, to write odd hyper-parameters;
/// `block_count` is the layer count the metadata claims; `dense_ffn` false leaves out the
/// layer's ffn_gate / ffn_up / ffn_down (for a Mixture-of-Experts layer written by `hparams`).
Bytes tiny_gguf(const std::string& arch, std::uint32_t version = 3,
                const std::function<void(test::GgufWriter&)>& hparams = {}, std::uint32_t block_count = 1,
                bool dense_ffn = true) {
  test::GgufWriter w;
  w.kv_string("general.architecture", arch);
  w.kv_u32(arch + ".embedding_length", 8);
  w.kv_u32(arch + ".block_count", block_count);
  w.kv_u32(arch + ".feed_forward_length", 16);
  w.kv_u32(arch + ".attention.head_count", 2);
  w.kv_u32(arch + ".attention.head_count_kv", 1);
  w.kv_u32(arch + ".context_length", 64);
  if (hparams) {
    hparams(w);
  } else {
    w.kv_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  }
  auto t = [&](const std::string& name, std::vector<std::int64_t> shape) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> v(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) * 0.125f - 0.25f;
    w.tensor_f32(name, shape, v);
  };
  t("token_embd.weight", {16, 8});
  t("output_norm.weight", {8});
  t("blk.0.attn_norm.weight", {8});
  t("blk.0.ffn_norm.weight", {8});
  t("blk.0.attn_q.weight", {8, 8});
  t("blk.0.attn_k.weight", {4, 8});
  t("blk.0.attn_v.weight", {4, 8});
  t("blk.0.attn_output.weight", {8, 8});
  if (dense_ffn) {
    t("blk.0.ffn_gate.weight", {16, 8});
    t("blk.0.ffn_up.weight", {16, 8});
    t("blk.0.ffn_down.weight", {8, 16});
  }
  return w.bytes(version);
}

class BadInput : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const Bytes& b) {
    const std::string p = dir_.file(name);
    test::write_bytes(p, b);
    return p;
  }
  test::TempDir dir_;
};

TEST_F(BadInput, MissingFileEmptyFileAndDirectory) {
  const std::string missing = dir_.file("missing.gguf");
  expect_error(load_model_file(missing), ErrorCode::kNotFound, "missing model");
  expect_error(GgufFile::open(missing), ErrorCode::kNotFound, "missing gguf");
  expect_error(SafetensorsFile::open(missing), ErrorCode::kNotFound, "missing safetensors");
  expect_error(load_llama2c_model(dir_.file("missing.bin")), ErrorCode::kNotFound, "missing bin");
  for (const char* name : {"empty.gguf", "empty.bin", "empty.safetensors"}) {
    expect_error(load_model_file(write(name, {})), ErrorCode::kCorruptFile, name);
  }
  expect_error(SafetensorsFile::open(dir_.file("empty.safetensors")), ErrorCode::kCorruptFile, "empty st");
  expect_error(load_model_file(dir_.path), ErrorCode::kInvalidArgument, "directory");
  expect_error(GgufFile::open(dir_.path), ErrorCode::kInvalidArgument, "directory as gguf");
  expect_error(SafetensorsFile::open(dir_.path), ErrorCode::kInvalidArgument, "directory as st");
}

TEST_F(BadInput, TruncatedLlama2cAndGguf) {
  for (const char* ext : {"bin", "gguf"}) {
    const Bytes full = test::read_bytes(stories(ext));
    ASSERT_GT(full.size(), 600000u);
    // 5000: inside the GGUF metadata (the token list); 12000: inside its tensor infos
    // (11347..14152); 500000: inside the tensor data.
    for (std::size_t cut : {std::size_t{3}, std::size_t{10}, std::size_t{24}, std::size_t{100},
                            std::size_t{5000}, std::size_t{12000}, std::size_t{500000}, full.size() - 1}) {
      const std::string ctx = std::string(ext) + " cut at " + std::to_string(cut);
      const std::string p = write(std::string("cut.") + ext, Bytes(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut)));
      expect_error(load_model_file(p), ErrorCode::kCorruptFile, ctx);
      if (std::string(ext) == "gguf") expect_error(GgufFile::open(p), ErrorCode::kCorruptFile, ctx);
    }
  }
}

TEST_F(BadInput, WrongMagic) {
  Bytes b = test::read_bytes(stories("gguf"));
  b[3] = 'X';
  expect_error(load_model_file(write("bad.gguf", b)), ErrorCode::kCorruptFile, "GGUX");
  expect_error(GgufFile::open(dir_.file("bad.gguf")), ErrorCode::kCorruptFile, "GGUX");
  const std::string text = "this is not a model file at all";
  expect_error(load_model_file(write("text.gguf", Bytes(text.begin(), text.end()))), ErrorCode::kCorruptFile, "text");
  expect_error(load_model_file(write("text.bin", Bytes(text.begin(), text.end()))), ErrorCode::kCorruptFile, "text bin");
  expect_error(SafetensorsFile::open(write("text.safetensors", Bytes(text.begin(), text.end()))),
               ErrorCode::kCorruptFile, "text safetensors");
  expect_error(load_model_file(write("text.xyz", Bytes(text.begin(), text.end()))), ErrorCode::kUnsupported, "unknown ext");
}

TEST_F(BadInput, GgufArrayLongerThanTheCapIsRejectedWithAOneLineMessage) {
  // magic, v3, 0 tensors, 1 kv: key "a\nb" = array of 2^24 u8 (found by the fuzzer: the key's
  // newline must not reach the message).
  Bytes b = {'G', 'G', 'U', 'F'};
  auto put = [&b](auto v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
  };
  put(std::uint32_t{3});
  put(std::uint64_t{0});
  put(std::uint64_t{1});
  put(std::uint64_t{3});
  b.insert(b.end(), {'a', '\n', 'b'});
  put(std::uint32_t{9});
  put(std::uint32_t{0});
  put(std::uint64_t{1} << 24);
  auto g = GgufFile::parse(b, "cap.gguf");
  ASSERT_FALSE(g);
  EXPECT_EQ(g.status().code(), ErrorCode::kCorruptFile);
  EXPECT_NE(g.status().message().find("limit"), std::string::npos) << g.status().message();
  EXPECT_EQ(g.status().message().find('\n'), std::string::npos) << g.status().message();
}

TEST_F(BadInput, GgufAbsurdCountsAndVersions) {
  const Bytes full = test::read_bytes(stories("gguf"));
  Bytes b = full;
  test::poke(b, 8, std::uint64_t{1} << 60);  // tensor count
  expect_error(load_model_file(write("t.gguf", b)), ErrorCode::kCorruptFile, "tensor count");
  b = full;
  test::poke(b, 16, ~std::uint64_t{0});  // kv count
  expect_error(load_model_file(write("kv.gguf", b)), ErrorCode::kCorruptFile, "kv count");
  b = full;
  test::poke(b, 16, std::uint64_t{100});  // more kvs than the file has: runs into the tensor infos
  expect_error(load_model_file(write("kv100.gguf", b)), ErrorCode::kCorruptFile, "kv count 100");
  for (std::uint32_t version : {0u, 1u, 4u, 0xffffffffu}) {
    b = full;
    test::poke(b, 4, version);
    expect_error(load_model_file(write("v.gguf", b)), ErrorCode::kUnsupported, "version " + std::to_string(version));
  }
}

TEST_F(BadInput, GgufTensorInfoPastTheEnd) {
  const Bytes full = test::read_bytes(stories("gguf"));
  const std::size_t info = tensor_info_after_name(full, "token_embd.weight");
  std::uint32_t n_dims;
  std::memcpy(&n_dims, full.data() + info, 4);
  ASSERT_EQ(n_dims, 2u);
  const std::size_t dims = info + 4, type = dims + 16, offset = type + 4;

  Bytes b = full;
  test::poke(b, dims + 8, std::uint64_t{1} << 20);  // 512 rows → 1M rows
  expect_error(load_model_file(write("dim.gguf", b)), ErrorCode::kCorruptFile, "dim past end");
  b = full;
  test::poke(b, dims, std::uint64_t{1} << 50);  // absurd dim
  expect_error(load_model_file(write("dim2.gguf", b)), ErrorCode::kCorruptFile, "absurd dim");
  b = full;
  test::poke(b, dims, std::uint64_t{0});  // zero dim
  expect_error(load_model_file(write("dim0.gguf", b)), ErrorCode::kCorruptFile, "zero dim");
  b = full;
  test::poke(b, info, std::uint32_t{9});  // n_dims
  expect_error(load_model_file(write("ndims.gguf", b)), ErrorCode::kCorruptFile, "n_dims");
  b = full;
  test::poke(b, offset, std::uint64_t{1} << 40);  // aligned, far past the end
  expect_error(load_model_file(write("off.gguf", b)), ErrorCode::kCorruptFile, "offset past end");
  b = full;
  test::poke(b, offset, ~std::uint64_t{0} - 31);  // would wrap around
  expect_error(load_model_file(write("off2.gguf", b)), ErrorCode::kCorruptFile, "offset wrap");
  b = full;
  test::poke(b, offset, std::uint64_t{4});  // misaligned
  expect_error(load_model_file(write("off3.gguf", b)), ErrorCode::kCorruptFile, "misaligned offset");
  b = full;
  test::poke(b, type, std::uint32_t{12});  // GGML_TYPE_Q4_K: rows of 64 values are a quarter block
  expect_error(load_model_file(write("q4k.gguf", b)), ErrorCode::kCorruptFile, "Q4_K");
  expect_error(GgufFile::open(dir_.file("q4k.gguf")), ErrorCode::kCorruptFile, "Q4_K");
  b = full;
  test::poke(b, type, std::uint32_t{16});  // GGML_TYPE_IQ2_XXS
  expect_error(load_model_file(write("iq2.gguf", b)), ErrorCode::kUnsupported, "IQ2_XXS");
}

/// A GGUF holding one F32 tensor and `name` of ggml type id `type` with rows of `row` values
/// (`data` bytes whatever the shape needs).
Bytes gguf_with_typed_tensor(const std::string& name, std::uint32_t type, std::int64_t row, const Bytes& data) {
  test::GgufWriter w;
  w.kv_string("general.architecture", "llama");
  w.tensor_f32("output_norm.weight", {4}, {1, 2, 3, 4});
  w.tensor_raw(name, {2, row}, type, data);
  return w.bytes();
}

TEST_F(BadInput, GgufRowsThatAreNotWholeBlocksNameTheTensorAndTheBlockSize) {
  struct Case {
    std::uint32_t id;
    const char* dtype;
    std::int64_t block, block_bytes;
  };
  const Case cases[] = {{2, "q4_0", 32, 18},   {3, "q4_1", 32, 20},    {6, "q5_0", 32, 22},  {7, "q5_1", 32, 24},
                        {8, "q8_0", 32, 34},   {20, "iq4_nl", 32, 18}, {10, "q2_k", 256, 84}, {11, "q3_k", 256, 110},
                        {12, "q4_k", 256, 144}, {13, "q5_k", 256, 176}, {14, "q6_k", 256, 210}, {23, "iq4_xs", 256, 136}};
  for (const Case& c : cases) {
    // Two whole blocks per row load; a row of 1.5 blocks is an error naming tensor, type and block.
    const Bytes whole(static_cast<std::size_t>(4 * c.block_bytes), 0);
    auto ok = GgufFile::open(write("whole.gguf", gguf_with_typed_tensor("blk.0.ffn_down.weight", c.id, 2 * c.block, whole)));
    ASSERT_TRUE(ok) << c.dtype << ": " << ok.status().message();
    ASSERT_EQ(ok->tensors().size(), 2u);
    EXPECT_EQ(ok->tensors()[1].dtype, *dtype_from_name(c.dtype));
    const std::string p = write("partial.gguf", gguf_with_typed_tensor("blk.0.ffn_down.weight", c.id, c.block + c.block / 2, whole));
    for (const Status& st : {GgufFile::open(p).status(), load_model_file(p).status()}) {
      EXPECT_EQ(st.code(), ErrorCode::kCorruptFile) << c.dtype << ": " << st.message();
      for (const std::string& part : {std::string("'blk.0.ffn_down.weight'"), std::to_string(c.block + c.block / 2),
                                     std::string(c.dtype) + " block size " + std::to_string(c.block)}) {
        EXPECT_NE(st.message().find(part), std::string::npos) << part << " not in: " << st.message();
      }
    }
  }
}

TEST_F(BadInput, GgufTypesPeregrineDoesNotReadAreNamed) {
  const std::pair<std::uint32_t, std::string> types[] = {
      {16, "IQ2_XXS (id 16)"}, {9, "Q8_1 (id 9)"}, {15, "Q8_K (id 15)"}, {19, "IQ1_S (id 19)"},
      {4, "Q4_2 (removed) (id 4)"}, {39, "MXFP4 (id 39)"}, {99, "id 99 (unknown)"}, {0xffffffffu, "id 4294967295 (unknown)"}};
  for (const auto& [id, label] : types) {
    const std::string p = write("type.gguf", gguf_with_typed_tensor("blk.0.attn_q.weight", id, 256, Bytes(1024, 0)));
    for (const Status& st : {GgufFile::open(p).status(), load_model_file(p).status()}) {
      EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << label << ": " << st.message();
      EXPECT_NE(st.message().find("'blk.0.attn_q.weight' has ggml type " + label), std::string::npos) << st.message();
      EXPECT_NE(st.message().find("supported: F32, F16, Q4_0"), std::string::npos) << st.message();
    }
  }
}

TEST_F(BadInput, GgufArchitectureAndHyperParameters) {
  auto ok = load_model_file(write("llama.gguf", tiny_gguf("llama")));  // the writer itself is right
  ASSERT_TRUE(ok) << ok.status().message();
  EXPECT_EQ(ok->config.dim, 8);
  EXPECT_EQ(ok->config.n_kv_heads, 1);
  EXPECT_EQ(ok->config.vocab_size, 16);
  EXPECT_TRUE(ok->config.tied_embeddings);
  auto gpt2 = load_model_file(write("gpt2.gguf", tiny_gguf("gpt2")));
  expect_error(gpt2, ErrorCode::kUnsupported, "gpt2");
  EXPECT_NE(gpt2.status().message().find("gpt2"), std::string::npos);

  test::GgufWriter w;  // llama without any hyper-parameters
  w.kv_string("general.architecture", "llama");
  w.tensor_f32("token_embd.weight", {2, 2}, {1, 2, 3, 4});
  expect_error(load_model_file(write("nohp.gguf", w.bytes())), ErrorCode::kCorruptFile, "no hparams");
  test::GgufWriter none;  // no architecture at all
  expect_error(load_model_file(write("noarch.gguf", none.bytes())), ErrorCode::kCorruptFile, "no arch");
  // Ill-typed or out-of-range optional hyper-parameters.
  const std::pair<const char*, std::function<void(test::GgufWriter&)>> odd[] = {
      {"eps as string", [](test::GgufWriter& g) { g.kv_string("llama.attention.layer_norm_rms_epsilon", "tiny"); }},
      {"eps infinite", [](test::GgufWriter& g) { g.kv_f32("llama.attention.layer_norm_rms_epsilon", INFINITY); }},
      {"theta NaN", [](test::GgufWriter& g) { g.kv_f32("llama.rope.freq_base", NAN); }},
      {"kv heads as string", [](test::GgufWriter& g) { g.kv_string("llama.attention.head_count_kv", "1"); }},
      {"eps zero", [](test::GgufWriter& g) { g.kv_f32("llama.attention.layer_norm_rms_epsilon", 0.0f); }},
  };
  for (const auto& [what, hp] : odd) {
    expect_error(load_model_file(write("odd.gguf", tiny_gguf("llama", 3, hp))), ErrorCode::kCorruptFile, what);
  }
  // The version field of an otherwise valid file.
  expect_error(load_model_file(write("v1.gguf", tiny_gguf("llama", 1))), ErrorCode::kUnsupported, "v1");
  expect_error(load_model_file(write("v4.gguf", tiny_gguf("llama", 4))), ErrorCode::kUnsupported, "v4");
  EXPECT_TRUE(load_model_file(write("v2.gguf", tiny_gguf("llama", 2))));
}

// GGUF RoPE scaling (llama.cpp's rope.scaling keys, Llama 3.1's rope_freqs.weight tensor,
// Phi-3's LongRoPE factor tensors): the supported forms load, the rest is one error naming what
// is wrong.
TEST_F(BadInput, GgufRopeScaling) {
  const auto load_with = [&](const std::function<void(test::GgufWriter&)>& extra) {
    return load_model_file(write("rope.gguf", tiny_gguf("llama", 3, [&](test::GgufWriter& g) {
      g.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
      extra(g);
    })));
  };
  auto linear = load_with([](test::GgufWriter& g) {
    g.kv_string("llama.rope.scaling.type", "linear");
    g.kv_f32("llama.rope.scaling.factor", 4.0f);
  });
  ASSERT_TRUE(linear) << linear.status().message();
  EXPECT_EQ(linear->config.rope_scaling.kind, RopeScaling::Kind::kLinear);
  EXPECT_EQ(linear->config.rope_scaling.factor, 4.0f);
  auto freqs = load_with([](test::GgufWriter& g) { g.tensor_f32("rope_freqs.weight", {2}, {1.0f, 8.0f}); });
  ASSERT_TRUE(freqs) << freqs.status().message();
  EXPECT_TRUE(LlamaModel::create(std::move(*freqs)));
  // LongRoPE as convert_hf_to_gguf.py writes Phi-3 128k (head_dim 4: two factors each); without
  // rope.scaling.attn_factor llama.cpp scales cos/sin by 1, not by LongRoPE's default.
  const auto long_factors = [](test::GgufWriter& g) { g.tensor_f32("rope_factors_long.weight", {2}, {1.0f, 4.0f}); };
  const auto short_factors = [](test::GgufWriter& g) { g.tensor_f32("rope_factors_short.weight", {2}, {1.0f, 1.5f}); };
  auto longrope = load_with([&](test::GgufWriter& g) {
    long_factors(g);
    short_factors(g);
    g.kv_u32("llama.rope.scaling.original_context_length", 16);
  });
  ASSERT_TRUE(longrope) << longrope.status().message();
  const RopeScaling& lr = longrope->config.rope_scaling;
  EXPECT_EQ(lr.kind, RopeScaling::Kind::kLongRope);
  EXPECT_EQ(lr.long_factor, (std::vector<float>{1.0f, 4.0f}));
  EXPECT_EQ(lr.short_factor, (std::vector<float>{1.0f, 1.5f}));
  EXPECT_EQ(lr.original_context, 16);
  EXPECT_EQ(lr.factor, 4.0f);  // context_length / original
  EXPECT_EQ(rope_attention_factor(lr), 1.0f);
  EXPECT_EQ(longrope->find("rope_factors_long.weight"), nullptr);  // moved into the config
  EXPECT_TRUE(LlamaModel::create(std::move(*longrope)));
  const auto factors_with = [](std::vector<float> values, std::vector<std::int64_t> shape = {2}) {
    return [=](test::GgufWriter& g) {
      g.tensor_f32("rope_factors_short.weight", shape, values);
      g.tensor_f32("rope_factors_long.weight", {2}, {1.0f, 4.0f});
    };
  };
  const std::tuple<const char*, ErrorCode, std::function<void(test::GgufWriter&)>> bad[] = {
      {"'dynamic'", ErrorCode::kUnsupported, [](test::GgufWriter& g) { g.kv_string("llama.rope.scaling.type", "dynamic"); }},
      {"beta_fast > beta_slow", ErrorCode::kCorruptFile, [](test::GgufWriter& g) {
         g.kv_string("llama.rope.scaling.type", "yarn");
         g.kv_f32("llama.rope.scaling.factor", 4.0f);
         g.kv_f32("llama.rope.scaling.yarn_beta_fast", 1.0f);
       }},
      {"llama.rope.scaling.factor", ErrorCode::kCorruptFile, [](test::GgufWriter& g) { g.kv_string("llama.rope.scaling.type", "linear"); }},
      {"factor must be >= 1", ErrorCode::kCorruptFile, [](test::GgufWriter& g) {
         g.kv_string("llama.rope.scaling.type", "linear");
         g.kv_f32("llama.rope.scaling.factor", 0.5f);
       }},
      {"rope_freqs.weight", ErrorCode::kCorruptFile, [](test::GgufWriter& g) { g.tensor_f32("rope_freqs.weight", {3}, {1.0f, 2.0f, 4.0f}); }},
      {"both", ErrorCode::kCorruptFile, [](test::GgufWriter& g) {
         g.kv_string("llama.rope.scaling.type", "linear");
         g.kv_f32("llama.rope.scaling.factor", 2.0f);
         g.tensor_f32("rope_freqs.weight", {2}, {1.0f, 2.0f});
       }},
      {"'rope_factors_short.weight' is missing", ErrorCode::kCorruptFile, long_factors},
      {"'rope_factors_long.weight' is missing", ErrorCode::kCorruptFile,
       [](test::GgufWriter& g) { g.kv_string("llama.rope.scaling.type", "longrope"); }},
      {"also holds LongRoPE's rope_factors", ErrorCode::kCorruptFile, [&](test::GgufWriter& g) {
         g.kv_string("llama.rope.scaling.type", "linear");
         g.kv_f32("llama.rope.scaling.factor", 2.0f);
         factors_with({1.0f, 2.0f})(g);
       }},
      {"expected [2]", ErrorCode::kCorruptFile, factors_with({1.0f, 2.0f, 3.0f}, {3})},
      {"short_factor[1] = 0", ErrorCode::kCorruptFile, factors_with({1.0f, 0.0f})},
      {"short_factor[0] = nan", ErrorCode::kCorruptFile, factors_with({std::nanf(""), 1.0f})},
      {"short_factor[1] = -inf", ErrorCode::kCorruptFile, factors_with({1.0f, -INFINITY})},
      {"is f16, expected f32", ErrorCode::kUnsupported, [](test::GgufWriter& g) {
         g.tensor_raw("rope_factors_short.weight", {2}, 1, Bytes{0x00, 0x3c, 0x00, 0x3c});  // GGML_TYPE_F16 1, 1
         g.tensor_f32("rope_factors_long.weight", {2}, {1.0f, 4.0f});
       }},
  };
  for (const auto& [part, code, extra] : bad) {
    auto r = load_with(extra);
    expect_error(r, code, part);
    if (!r) {
      EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
    }
  }
  auto zero = load_with([](test::GgufWriter& g) { g.tensor_f32("rope_freqs.weight", {2}, {1.0f, 0.0f}); });
  ASSERT_TRUE(zero) << zero.status().message();
  expect_error(LlamaModel::create(std::move(*zero)), ErrorCode::kCorruptFile, "zero rope_freqs divisor");
}

// A family's own tensors are required: a qwen2 GGUF without a Q/K/V bias, a qwen3 one without a
// Q/K norm, or with one of the wrong shape, is one error naming the tensor; an unknown family is
// named with the supported ones.
TEST_F(BadInput, GgufFamilyTensors) {
  const auto family = [&](const std::string& arch, const std::function<void(test::GgufWriter&)>& tensors) {
    test::GgufWriter w;
    Bytes b = tiny_gguf(arch, 3, [&](test::GgufWriter& g) {
      g.kv_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
      tensors(g);
    });
    return load_model_file(write(arch + ".gguf", b));
  };
  const auto biases = [](test::GgufWriter& g) {
    g.tensor_f32("blk.0.attn_q.bias", {8}, std::vector<float>(8, 0.5f));
    g.tensor_f32("blk.0.attn_k.bias", {4}, std::vector<float>(4, 0.5f));
    g.tensor_f32("blk.0.attn_v.bias", {4}, std::vector<float>(4, 0.5f));
  };
  auto qwen2 = family("qwen2", biases);
  ASSERT_TRUE(qwen2) << qwen2.status().message();
  EXPECT_EQ(qwen2->config.arch, "qwen2");
  EXPECT_EQ(qwen2->config.rope_style, RopeStyle::kNeox);
  EXPECT_TRUE(LlamaModel::create(std::move(*qwen2)));
  auto no_bias = family("qwen2", [](test::GgufWriter& g) { g.tensor_f32("blk.0.attn_q.bias", {8}, std::vector<float>(8, 0.5f)); });
  expect_error(no_bias, ErrorCode::kCorruptFile, "qwen2 without attn_k.bias");
  EXPECT_NE(no_bias.status().message().find("blk.0.attn_k.bias"), std::string::npos) << no_bias.status().message();
  auto no_norm = family("qwen3", [](test::GgufWriter& g) { g.tensor_f32("blk.0.attn_q_norm.weight", {4}, std::vector<float>(4, 1.0f)); });
  expect_error(no_norm, ErrorCode::kCorruptFile, "qwen3 without attn_k_norm");
  EXPECT_NE(no_norm.status().message().find("blk.0.attn_k_norm.weight"), std::string::npos) << no_norm.status().message();
  auto wide_norm = family("qwen3", [](test::GgufWriter& g) {
    g.tensor_f32("blk.0.attn_q_norm.weight", {8}, std::vector<float>(8, 1.0f));
    g.tensor_f32("blk.0.attn_k_norm.weight", {4}, std::vector<float>(4, 1.0f));
  });
  expect_error(wide_norm, ErrorCode::kCorruptFile, "qwen3 norm of the wrong width");
  EXPECT_NE(wide_norm.status().message().find("attn_q_norm"), std::string::npos) << wide_norm.status().message();
  // Phi-3's ffn_up holds gate and up: beside tiny_gguf's own ffn_gate that is both forms at once.
  auto phi3 = family("phi3", [](test::GgufWriter&) {});
  expect_error(phi3, ErrorCode::kCorruptFile, "phi3 with a fused and a split gate");
  EXPECT_NE(phi3.status().message().find("fused and split"), std::string::npos) << phi3.status().message();
  // A damaged layer count is met with the tensors present, not walked (the fuzzer's timeout).
  const auto start = std::chrono::steady_clock::now();
  auto many = load_model_file(write("many.gguf", tiny_gguf("phi3", 3, {}, 1u << 24)));
  expect_error(many, ErrorCode::kCorruptFile, "phi3 claiming 2^24 layers");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  auto gemma3 = family("gemma3", [](test::GgufWriter&) {});
  expect_error(gemma3, ErrorCode::kCorruptFile, "gemma3 without its Q/K norms");
  EXPECT_NE(gemma3.status().message().find("blk.0.attn_q_norm.weight"), std::string::npos) << gemma3.status().message();
  auto unknown = family("mamba", [](test::GgufWriter&) {});
  expect_error(unknown, ErrorCode::kUnsupported, "mamba");
  EXPECT_NE(unknown.status().message().find("gemma3"), std::string::npos) << unknown.status().message();
}

// Gemma 2: its post-block norms are required (one error naming the missing one), and a
// hyper-parameter of formats/config_keys.h that is negative (or a NaN float) is one error naming the key.
TEST_F(BadInput, Gemma2Gguf) {
  const auto post_norms = [](bool ffw) {
    return [ffw](test::GgufWriter& g) {
      g.tensor_f32("blk.0.post_attention_norm.weight", {8}, std::vector<float>(8, 1.0f));
      if (ffw) g.tensor_f32("blk.0.post_ffw_norm.weight", {8}, std::vector<float>(8, 1.0f));
    };
  };
  const auto gemma = [&](const std::string& name, const std::function<void(test::GgufWriter&)>& tensors,
                         const std::function<void(test::GgufWriter&)>& keys = {}) {
    Bytes b = tiny_gguf("gemma2", 3, [&](test::GgufWriter& g) {
      g.kv_f32("gemma2.attention.layer_norm_rms_epsilon", 1e-6f);
      if (keys) keys(g);
      tensors(g);
    });
    return load_model_file(write(name + ".gguf", b));
  };
  auto good = gemma("gemma2-good", post_norms(true));
  ASSERT_TRUE(good) << good.status().message();
  EXPECT_FLOAT_EQ(good->config.attn_softcap, 50.0f);  // llama.cpp's defaults without the keys
  EXPECT_FLOAT_EQ(good->config.final_softcap, 30.0f);
  EXPECT_EQ(good->config.activation, FfnActivation::kGeluTanh);
  EXPECT_TRUE(LlamaModel::create(std::move(*good)));
  auto no_ffw = gemma("gemma2-no-ffw", post_norms(false));
  expect_error(no_ffw, ErrorCode::kCorruptFile, "gemma2 without post_ffw_norm");
  EXPECT_NE(no_ffw.status().message().find("blk.0.post_ffw_norm.weight"), std::string::npos) << no_ffw.status().message();
  for (const ConfigKey& k : config_keys()) {  // every hyper-parameter of the table: negative, NaN
    const std::string key = std::string("gemma2.") + k.gguf;
    const bool is_float = std::holds_alternative<float ModelConfig::*>(k.field);
    for (const float v : {-5.0f, NAN}) {
      if (!is_float && std::isnan(v)) continue;
      auto bad = gemma("gemma2-key", post_norms(true), [&](test::GgufWriter& g) {
        if (is_float) {
          g.kv_f32(key, v);
        } else {
          g.kv_i32(key, static_cast<std::int32_t>(v));
        }
      });
      expect_error(bad, ErrorCode::kCorruptFile, key + " = " + std::to_string(v));
      EXPECT_NE(bad.status().message().find(key), std::string::npos) << bad.status().message();
    }
  }
  // Post norms outside their family are refused like any other family's tensors.
  const Bytes llama = tiny_gguf("llama", 3, [&](test::GgufWriter& g) {
    g.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    post_norms(true)(g);
  });
  expect_error(load_model_file(write("llama-post-norms.gguf", llama)), ErrorCode::kUnsupported, "llama with post norms");
}

TEST_F(BadInput, TruncatedSafetensors) {
  std::vector<float> v(64);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  const Bytes full = test::safetensors_bytes({{"a", "F32", {8, 4}, test::f32_bytes({v.begin(), v.begin() + 32})},
                                              {"b", "F32", {32}, test::f32_bytes({v.begin() + 32, v.end()})}},
                                             {{"format", "pt"}});
  std::uint64_t header_len;
  std::memcpy(&header_len, full.data(), 8);
  ASSERT_TRUE(SafetensorsFile::parse(full, "full"));
  for (std::size_t cut : {std::size_t{3}, std::size_t{8}, std::size_t{10}, std::size_t{8 + header_len / 2},
                          std::size_t{8 + header_len}, std::size_t{8 + header_len + 100}, full.size() - 1}) {
    const std::string p = write("cut.safetensors", Bytes(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut)));
    expect_error(SafetensorsFile::open(p), ErrorCode::kCorruptFile, "safetensors cut at " + std::to_string(cut));
  }
}

TEST_F(BadInput, UnsupportedSafetensorsDtypes) {
  // (I32, I8 and F8 are read for the quantized layouts: hf_quant_corrupt_test.cpp.)
  for (const char* dtype : {"I64", "F64", "U8", "BOOL", "F8_E8M0"}) {
    const std::size_t elem = std::string(dtype) == "I64" || std::string(dtype) == "F64" ? 8 : 1;
    const Bytes b = test::safetensors_bytes({{"x", dtype, {4}, Bytes(4 * elem)}});
    auto r = SafetensorsFile::open(write("d.safetensors", b));
    expect_error(r, ErrorCode::kUnsupported, dtype);
    EXPECT_NE(r.status().message().find(dtype), std::string::npos) << r.status().message();
  }
}

// Mixture-of-Experts GGUFs (llama.cpp's keys and stacked _exps tensors): a valid one loads; a
// top-k above the expert count, stacked tensors holding another number of experts, or a
// missing router give one line naming what is wrong.
TEST_F(BadInput, GgufMixtureOfExperts) {
  struct Moe {
    std::uint32_t count = 4, used = 2, tensor_experts = 4;
    bool router = true;
  };
  const auto moe = [&](const std::string& name, Moe m) {
    const auto hparams = [&](test::GgufWriter& g) {
      g.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
      g.kv_u32("llama.expert_count", m.count);
      g.kv_u32("llama.expert_used_count", m.used);
      const auto n = static_cast<std::int64_t>(m.tensor_experts);
      if (m.router) g.tensor_f32("blk.0.ffn_gate_inp.weight", {m.count, 8}, std::vector<float>(m.count * 8, 0.25f));
      g.tensor_f32("blk.0.ffn_gate_exps.weight", {n, 16, 8}, std::vector<float>(static_cast<std::size_t>(n * 128), 0.5f));
      g.tensor_f32("blk.0.ffn_up_exps.weight", {n, 16, 8}, std::vector<float>(static_cast<std::size_t>(n * 128), 0.5f));
      g.tensor_f32("blk.0.ffn_down_exps.weight", {n, 8, 16}, std::vector<float>(static_cast<std::size_t>(n * 128), 0.5f));
    };
    return load_model_file(write(name + ".gguf", tiny_gguf("llama", 3, hparams, 1, false)));
  };
  auto ok = moe("ok", {});
  ASSERT_TRUE(ok) << ok.status().message();
  EXPECT_EQ(ok->config.n_experts, 4);
  EXPECT_EQ(ok->config.expert_ffn_dim, 16);
  EXPECT_NE(ok->find("blk.0.ffn_down.3.weight"), nullptr);
  EXPECT_TRUE(LlamaModel::create(std::move(*ok)));
  auto top_k = moe("topk", {.used = 5});
  expect_error(top_k, ErrorCode::kCorruptFile, "top-k 5 of 4 experts");
  EXPECT_NE(top_k.status().message().find("expert_used_count"), std::string::npos) << top_k.status().message();
  auto count = moe("count", {.count = 8});
  expect_error(count, ErrorCode::kCorruptFile, "8 experts, tensors of 4");
  EXPECT_NE(count.status().message().find("ffn_gate_exps"), std::string::npos) << count.status().message();
  EXPECT_NE(count.status().message().find("expert_count 8"), std::string::npos) << count.status().message();
  auto router = moe("router", {.router = false});
  expect_error(router, ErrorCode::kCorruptFile, "no router");
  EXPECT_NE(router.status().message().find("ffn_gate_inp"), std::string::npos) << router.status().message();
}

TEST_F(BadInput, HfConfigErrors) {
  const std::string hf = dir_.file("hf");
  std::filesystem::create_directory(hf);
  test::write_bytes(hf + "/model.safetensors", test::safetensors_bytes({{"x", "F32", {1}, Bytes(4)}}));
  const nlohmann::json good = {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 8},
                               {"intermediate_size", 16}, {"num_hidden_layers", 1},
                               {"num_attention_heads", 2}, {"vocab_size", 16}};
  nlohmann::json cfg = good;
  cfg.erase("hidden_size");
  test::write_text(hf + "/config.json", cfg.dump());
  auto r = load_model_file(hf);
  expect_error(r, ErrorCode::kCorruptFile, "missing hidden_size");
  EXPECT_NE(r.status().message().find("hidden_size"), std::string::npos);
  for (const char* text : {"{\"hidden_size\": 8,", "{hidden_size: 8}", "", "\xff\xfe", "{\"a\": 1} trailing"}) {
    test::write_text(hf + "/config.json", text);
    expect_error(load_model_file(hf), ErrorCode::kCorruptFile, std::string("malformed: ") + text);
  }
  // Valid config, but the weights are I64 / truncated.
  test::write_text(hf + "/config.json", good.dump());
  test::write_bytes(hf + "/model.safetensors", test::safetensors_bytes({{"model.norm.weight", "I64", {8}, Bytes(64)}}));
  expect_error(load_hf_model(hf), ErrorCode::kUnsupported, "I64 weights");
  Bytes st = test::safetensors_bytes({{"model.norm.weight", "F32", {8}, Bytes(32)}});
  st.resize(st.size() - 5);
  test::write_bytes(hf + "/model.safetensors", st);
  expect_error(load_hf_model(hf), ErrorCode::kCorruptFile, "truncated weights");
  // An unknown family, and an expert the config does not have.
  cfg = good;
  cfg["architectures"] = {"FalconForCausalLM"};
  cfg["model_type"] = "falcon";
  test::write_text(hf + "/config.json", cfg.dump());
  auto unknown = load_hf_model(hf);
  expect_error(unknown, ErrorCode::kUnsupported, "unknown architecture");
  EXPECT_NE(unknown.status().message().find("FalconForCausalLM"), std::string::npos) << unknown.status().message();
  cfg = good;
  cfg["architectures"] = {"MixtralForCausalLM"};
  cfg["num_local_experts"] = 4;
  cfg["num_experts_per_tok"] = 2;
  test::write_text(hf + "/config.json", cfg.dump());
  test::write_bytes(hf + "/model.safetensors",
                    test::safetensors_bytes({{"model.layers.0.block_sparse_moe.experts.4.w1.weight", "F32", {16, 8}, Bytes(512)}}));
  auto expert = load_hf_model(hf);
  expect_error(expert, ErrorCode::kCorruptFile, "expert 4 of 4");
  EXPECT_NE(expert.status().message().find("expert 4"), std::string::npos) << expert.status().message();
  cfg["num_experts_per_tok"] = 6;
  test::write_text(hf + "/config.json", cfg.dump());
  test::write_bytes(hf + "/model.safetensors",
                    test::safetensors_bytes({{"model.layers.0.block_sparse_moe.experts.0.w1.weight", "F32", {16, 8}, Bytes(512)}}));
  expect_error(load_hf_model(hf), ErrorCode::kCorruptFile, "HF top-k 6 of 4 experts");
}

}  // namespace
}  // namespace peregrine
