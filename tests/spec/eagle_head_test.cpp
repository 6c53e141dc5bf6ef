// EAGLE-1 head folders (spec/eagle_head.h): a written folder reads back to the same values in
// the published names and shapes, F16 tensors are decoded, and a head for another model, a
// missing, unconverted or damaged folder gives one clear error.
#include "peregrine/spec/eagle_head.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "peregrine/quant/fp16.h"
#include "peregrine/formats/safetensors/safetensors_writer.h"
#include "test_paths.h"

namespace peregrine {
namespace {

// stories260K's shape: d 64, SwiGLU 172, 8 heads of 8, 4 K/V heads, 512 tokens.
EagleHead random_head(bool with_embedding = true, std::int64_t kv_heads = 4) {
  EagleHead h;
  h.hidden = 64;
  h.intermediate = 172;
  h.heads = 8;
  h.kv_heads = kv_heads;
  h.head_dim = 8;
  h.vocab = 512;
  h.max_positions = 512;
  h.rms_eps = 1e-5f;
  h.rope_theta = 10000.0f;
  h.base_model = "stories260K.bin";
  std::vector<std::string> names = h.names();
  if (with_embedding) names.push_back("embed_tokens.weight");
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  for (const std::string& name : names) {
    std::int64_t n = 1;
    for (std::int64_t d : h.shape(name)) n *= d;
    std::vector<float>& v = h.tensors[name];
    v.resize(static_cast<std::size_t>(n));
    for (float& x : v) x = normal(rng);
  }
  return h;
}

TEST(EagleHead, LayoutHasThePublishedNamesAndShapes) {
  const EagleHead h = random_head();
  const std::vector<std::string> want{"fc.weight",
                                      "fc.bias",
                                      "layers.0.self_attn.q_proj.weight",
                                      "layers.0.self_attn.k_proj.weight",
                                      "layers.0.self_attn.v_proj.weight",
                                      "layers.0.self_attn.o_proj.weight",
                                      "layers.0.post_attention_layernorm.weight",
                                      "layers.0.mlp.gate_proj.weight",
                                      "layers.0.mlp.up_proj.weight",
                                      "layers.0.mlp.down_proj.weight"};
  EXPECT_EQ(h.names(), want);
  EXPECT_EQ(h.shape("fc.weight"), (std::vector<std::int64_t>{64, 128}));
  EXPECT_EQ(h.shape("layers.0.self_attn.k_proj.weight"), (std::vector<std::int64_t>{32, 64}));
  EXPECT_EQ(h.shape("layers.0.self_attn.o_proj.weight"), (std::vector<std::int64_t>{64, 64}));
  EXPECT_EQ(h.shape("layers.0.mlp.down_proj.weight"), (std::vector<std::int64_t>{64, 172}));
  EXPECT_EQ(h.shape("embed_tokens.weight"), (std::vector<std::int64_t>{512, 64}));
  EXPECT_TRUE(h.shape("layers.0.input_layernorm.weight").empty());  // layer 0 has none
  EXPECT_TRUE(h.shape("norm.weight").empty());
  EagleHead no_bias = h;
  no_bias.bias = false;
  EXPECT_EQ(no_bias.names().size(), want.size() - 1);
  EXPECT_TRUE(no_bias.shape("fc.bias").empty());
}

TEST(EagleHead, WrittenFolderReadsBackTheSameValues) {
  const std::string dir = test::make_temp_dir() + "/eagle";
  const EagleHead h = random_head();
  ASSERT_TRUE(save_eagle_head(h, dir).is_ok());
  const std::string config = test::read_file(dir + "/config.json");
  for (const char* key : {"\"hidden_size\": 64", "\"intermediate_size\": 172", "\"num_attention_heads\": 8",
                          "\"num_key_value_heads\": 4", "\"num_hidden_layers\": 1", "\"vocab_size\": 512", "\"bias\": true",
                          "\"max_position_embeddings\": 512", "\"model_type\": \"llama\"", "\"rope_theta\": 10000.0",
                          "\"rms_norm_eps\": 1e-05"}) {
    EXPECT_NE(config.find(key), std::string::npos) << key << " in " << config;
  }
  auto back = load_eagle_head(dir, 64, 512);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->tensors, h.tensors);
  EXPECT_EQ(back->intermediate, 172);
  EXPECT_EQ(back->kv_heads, 4);
  EXPECT_EQ(back->head_dim, 8);
  EXPECT_EQ(back->max_positions, 512);
  EXPECT_EQ(back->rms_eps, 1e-5f);
  EXPECT_EQ(back->rope_theta, 10000.0f);
  EXPECT_TRUE(back->bias);
  EXPECT_EQ(back->base_model, "stories260K.bin");

  EagleHead no_embedding = random_head(false);
  no_embedding.bias = false;
  no_embedding.tensors.erase("fc.bias");
  ASSERT_TRUE(save_eagle_head(no_embedding, dir + "/b").is_ok());
  auto b = load_eagle_head(dir + "/b", 64, 512);
  ASSERT_TRUE(b) << b.status().message();
  EXPECT_FALSE(b->bias);
  EXPECT_EQ(b->tensors, no_embedding.tensors);
}

TEST(EagleHead, HalfPrecisionTensorsAndAMinimalConfigRead) {
  // A folder as a converted published checkpoint looks: F16 tensors, EAGLE-1's config keys only.
  const std::string dir = test::make_temp_dir() + "/eagle";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << R"({"hidden_size": 64, "intermediate_size": 172, "num_attention_heads": 8,
    "num_hidden_layers": 1, "vocab_size": 512, "rms_norm_eps": 1e-06, "max_position_embeddings": 2048})";
  EagleHead h = random_head(false, 8);  // EAGLE's EConfig: num_key_value_heads defaults to num_attention_heads
  SafetensorsWriter w;
  std::map<std::string, std::vector<std::uint16_t>> halves;
  for (const std::string& name : h.names()) {
    for (float v : h.tensors[name]) halves[name].push_back(f32_to_f16(v));
  }
  for (const std::string& name : h.names()) ASSERT_TRUE(w.add_tensor(name, DType::kF16, h.shape(name)).is_ok());
  ASSERT_TRUE(w.begin(dir + "/model.safetensors").is_ok());
  for (const std::string& name : h.names()) {
    const auto& v = halves[name];
    ASSERT_TRUE(w.write_tensor_data({reinterpret_cast<const std::uint8_t*>(v.data()), v.size() * 2}).is_ok());
  }
  ASSERT_TRUE(w.finish().is_ok());
  auto back = load_eagle_head(dir, 64, 512);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->kv_heads, 8);
  EXPECT_EQ(back->head_dim, 8);
  EXPECT_EQ(back->rope_theta, 10000.0f);
  EXPECT_TRUE(back->bias);
  for (const std::string& name : h.names()) {
    ASSERT_EQ(back->tensors[name].size(), halves[name].size()) << name;
    for (std::size_t i = 0; i < halves[name].size(); ++i) ASSERT_EQ(back->tensors[name][i], f16_to_f32(halves[name][i])) << name;
  }
}

TEST(EagleHead, BadFoldersGiveOneClearError) {
  const std::string dir = test::make_temp_dir() + "/eagle";
  ASSERT_TRUE(save_eagle_head(random_head(), dir).is_ok());
  auto other = load_eagle_head(dir, 4096, 32000);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("hidden size 64 and 512 tokens; the target has 4096 and 32000"), std::string::npos)
      << other.status().message();
  EXPECT_EQ(load_eagle_head(dir, 64, 32000).status().code(), ErrorCode::kInvalidArgument);

  // Missing files.
  EXPECT_EQ(load_eagle_head(dir + "/nowhere", 64, 512).status().code(), ErrorCode::kNotFound);
  const std::string bin_only = test::make_temp_dir() + "/bin";
  std::filesystem::create_directories(bin_only);
  std::filesystem::copy_file(dir + "/config.json", bin_only + "/config.json");
  EXPECT_EQ(load_eagle_head(bin_only, 64, 512).status().code(), ErrorCode::kNotFound);
  std::ofstream(bin_only + "/pytorch_model.bin") << "not read";
  auto unconverted = load_eagle_head(bin_only, 64, 512);
  EXPECT_EQ(unconverted.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(unconverted.status().message().find("convert it"), std::string::npos) << unconverted.status().message();

  // A truncated safetensors file.
  const std::string cut = test::make_temp_dir() + "/cut";
  std::filesystem::create_directories(cut);
  std::filesystem::copy_file(dir + "/config.json", cut + "/config.json");
  const std::string bytes = test::read_file(dir + "/model.safetensors");
  std::ofstream(cut + "/model.safetensors", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  auto truncated = load_eagle_head(cut, 64, 512);
  EXPECT_EQ(truncated.status().code(), ErrorCode::kCorruptFile) << truncated.status().message();

  // A tensor missing (a config that promises more), bad JSON, ill-typed fields, other layer counts.
  const std::string config = test::read_file(dir + "/config.json");
  std::ofstream(dir + "/config.json") << R"({"hidden_size": 64, "intermediate_size": 256, "num_attention_heads": 8,
    "num_key_value_heads": 4, "vocab_size": 512})";
  auto misshapen = load_eagle_head(dir, 64, 512);
  EXPECT_EQ(misshapen.status().code(), ErrorCode::kCorruptFile);
  EXPECT_NE(misshapen.status().message().find("layers.0.mlp.gate_proj.weight"), std::string::npos) << misshapen.status().message();
  std::ofstream(dir + "/config.json") << "{not json";
  EXPECT_EQ(load_eagle_head(dir, 64, 512).status().code(), ErrorCode::kCorruptFile);
  std::ofstream(dir + "/config.json") << R"({"hidden_size": "64", "intermediate_size": 172, "num_attention_heads": 8, "vocab_size": 512})";
  EXPECT_EQ(load_eagle_head(dir, 64, 512).status().code(), ErrorCode::kCorruptFile);
  std::ofstream(dir + "/config.json") << R"({"hidden_size": 64, "intermediate_size": 172, "num_attention_heads": 8,
    "num_key_value_heads": 3, "vocab_size": 512})";
  EXPECT_EQ(load_eagle_head(dir, 64, 512).status().code(), ErrorCode::kCorruptFile);
  std::ofstream(dir + "/config.json") << R"({"hidden_size": 64, "intermediate_size": 172, "num_attention_heads": 8,
    "num_hidden_layers": 2, "vocab_size": 512})";
  EXPECT_EQ(load_eagle_head(dir, 64, 512).status().code(), ErrorCode::kUnsupported);
  std::ofstream(dir + "/config.json") << config;
  ASSERT_TRUE(load_eagle_head(dir, 64, 512));

  // Writing a head that lacks a tensor or whose heads do not fit.
  EagleHead short_one = random_head();
  short_one.tensors["layers.0.mlp.up_proj.weight"].pop_back();
  EXPECT_EQ(save_eagle_head(short_one, dir + "/x").code(), ErrorCode::kInvalidArgument);
  EagleHead bad_heads = random_head();
  bad_heads.kv_heads = 3;
  EXPECT_EQ(save_eagle_head(bad_heads, dir + "/y").code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace peregrine
