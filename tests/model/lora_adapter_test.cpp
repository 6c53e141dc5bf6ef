// LoRA adapters (model/lora_adapter.h) for the real stories260K: PEFT folders written by
// save_peft_adapter read back exactly (Q/K rows through Hugging Face's NeoX order and back), a
// llama.cpp-layout LoRA GGUF reads to the same values, and every malformed adapter gives one
// clear error naming what is wrong. The adapters are random (no trained one exists for it).
#include "peregrine/model/lora_adapter.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <tuple>

#include "formats/gguf/gguf_writer.h"
#include "formats/safetensors/safetensors_writer.h"
#include "peregrine/formats/safetensors/safetensors.h"
#include "formats/test_files.h"
#include "test_paths.h"

namespace peregrine {
namespace {

const ModelFile& stories() {
  static const ModelFile m = [] {
    auto loaded = load_model_file(test::shared_dir() + "/models/stories260K/stories260K.bin");
    EXPECT_TRUE(loaded) << loaded.status().message();
    return std::move(*loaded);
  }();
  return m;
}

// A random rank-`rank` adapter of `base`'s weights `names`, laid out for `base`.
LoraAdapter random_adapter(const ModelFile& base, std::int64_t rank, const std::vector<std::string>& names, unsigned seed) {
  LoraAdapter a;
  a.rank = rank;
  a.alpha = 16.0f;
  a.arch = base.config.arch;
  a.rope_style = base.config.rope_style;
  a.head_dim = base.config.head_dim;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  for (const std::string& name : names) {
    const TensorView* w = base.find(name);
    EXPECT_NE(w, nullptr) << name;
    LoraPair p{rank, w->shape[1], w->shape[0], {}, {}};
    p.a.resize(static_cast<std::size_t>(rank * p.in));
    p.b.resize(static_cast<std::size_t>(p.out * rank));
    for (float& x : p.a) x = normal(rng);
    for (float& x : p.b) x = normal(rng);
    a.tensors[name] = std::move(p);
  }
  return a;
}

const std::vector<std::string> kAllProjections = {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight",
                                                  "blk.0.attn_output.weight", "blk.2.ffn_gate.weight", "blk.2.ffn_up.weight",
                                                  "blk.4.ffn_down.weight", "blk.4.attn_q.weight"};

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(test::read_file(path)); }
void write_json(const std::string& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(2); }

// A saved PEFT folder with its adapter_config.json edited by `edit`.
std::string folder_with_config(const test::TempDir& tmp, const std::function<void(nlohmann::json&)>& edit) {
  const std::string dir = tmp.file("peft");
  EXPECT_TRUE(
      save_peft_adapter(random_adapter(stories(), 4, {"blk.0.attn_q.weight", "blk.1.ffn_up.weight"}, 3), dir, "stories260K").is_ok());
  nlohmann::json c = read_json(dir + "/adapter_config.json");
  edit(c);
  write_json(dir + "/adapter_config.json", c);
  return dir;
}

void expect_error(const Expected<LoraAdapter>& r, ErrorCode code, const std::string& needle) {
  ASSERT_FALSE(r) << "expected an error containing '" << needle << "'";
  EXPECT_EQ(r.status().code(), code) << r.status().message();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
}

TEST(LoraAdapter, ScaleIsAlphaOverRankOrOverSqrtRankWithRsLora) {
  LoraAdapter a;
  a.rank = 4;
  a.alpha = 16.0f;
  EXPECT_FLOAT_EQ(a.scale(), 4.0f);
  a.rslora = true;
  EXPECT_FLOAT_EQ(a.scale(), 8.0f);
  a.rank = 0;
  EXPECT_EQ(a.scale(), 0.0f);
}

TEST(LoraAdapter, PeftFolderRoundTripIsExact) {
  test::TempDir tmp;
  for (std::int64_t rank : {4, 8}) {
    LoraAdapter a = random_adapter(stories(), rank, kAllProjections, static_cast<unsigned>(rank));
    a.rslora = rank == 8;
    a.alpha = 0.1f;
    const std::string dir = tmp.file("peft" + std::to_string(rank));
    ASSERT_TRUE(save_peft_adapter(a, dir, "stories260K.bin").is_ok());
    auto back = load_lora_adapter(dir, stories());
    ASSERT_TRUE(back) << back.status().message();
    EXPECT_EQ(back->path, dir);
    EXPECT_EQ(back->rank, rank);
    EXPECT_EQ(back->alpha, 0.1f);
    EXPECT_EQ(back->rslora, a.rslora);
    EXPECT_EQ(back->rope_style, RopeStyle::kInterleaved);
    ASSERT_EQ(back->tensors.size(), a.tensors.size());
    for (const auto& [name, p] : a.tensors) {
      const LoraPair& q = back->tensors.at(name);
      EXPECT_EQ(q.rank, rank);
      EXPECT_EQ(q.in, p.in);
      EXPECT_EQ(q.out, p.out);
      EXPECT_EQ(q.a, p.a) << name;
      EXPECT_EQ(q.b, p.b) << name;
    }
    const nlohmann::json c = read_json(dir + "/adapter_config.json");
    EXPECT_EQ(c["peft_type"], "LORA");
    EXPECT_EQ(c["task_type"], "CAUSAL_LM");
    EXPECT_EQ(c["r"], rank);
    EXPECT_EQ(c["lora_alpha"].dump(), "0.1");
    EXPECT_EQ(c["use_rslora"], rank == 8);
    EXPECT_EQ(c["bias"], "none");
    EXPECT_EQ(c["base_model_name_or_path"], "stories260K.bin");
    EXPECT_EQ(c["target_modules"], (nlohmann::json{"down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"}));
  }
}

TEST(LoraAdapter, PeftFileHoldsPeftNamesAndNeoxQkRows) {
  test::TempDir tmp;
  const LoraAdapter a = random_adapter(stories(), 4, kAllProjections, 7);
  ASSERT_TRUE(save_peft_adapter(a, tmp.file("peft"), "stories260K").is_ok());
  auto file = SafetensorsFile::open(tmp.file("peft/adapter_model.safetensors"));
  ASSERT_TRUE(file) << file.status().message();
  ASSERT_EQ(file->tensors().size(), 2 * kAllProjections.size());
  const SafetensorsTensor* qa = file->find("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  const SafetensorsTensor* qb = file->find("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight");
  ASSERT_NE(qa, nullptr);
  ASSERT_NE(qb, nullptr);
  EXPECT_NE(file->find("base_model.model.model.layers.4.mlp.down_proj.lora_B.weight"), nullptr);
  EXPECT_NE(file->find("base_model.model.model.layers.0.self_attn.o_proj.lora_A.weight"), nullptr);
  EXPECT_EQ(qa->shape, (std::vector<std::int64_t>{4, 64}));
  EXPECT_EQ(qb->shape, (std::vector<std::int64_t>{64, 4}));
  EXPECT_EQ(qa->dtype, SafetensorsDtype::kF32);
  // stories260K rotates interleaved pairs: the file's NeoX row j of a head is the base's row
  // 2·(j mod hd/2) + j div (hd/2) (convert_hf_to_gguf.py's permute, inverted).
  const std::int64_t hd = stories().config.head_dim;
  const LoraPair& p = a.tensors.at("blk.0.attn_q.weight");
  const auto* rows = reinterpret_cast<const float*>(qb->data);
  for (std::int64_t j = 0; j < p.out; ++j) {
    const std::int64_t within = j % hd, from = j - within + 2 * (within % (hd / 2)) + within / (hd / 2);
    for (std::int64_t k = 0; k < 4; ++k) ASSERT_EQ(rows[j * 4 + k], p.b[static_cast<std::size_t>(from * 4 + k)]) << j;
  }
  const SafetensorsTensor* vb = file->find("base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight");
  ASSERT_NE(vb, nullptr);
  EXPECT_EQ(std::memcmp(vb->data, a.tensors.at("blk.0.attn_v.weight").b.data(), vb->nbytes), 0);  // V rows as they are
}

// llama.cpp's layout (convert_lora_to_gguf.py): "<base>.lora_a" ne {in, r}, ".lora_b" ne {r, out}.
test::Bytes lora_gguf(const LoraAdapter& a, float alpha, bool f16 = false, const std::string& arch = "llama",
                      const std::string& type = "adapter") {
  test::GgufWriter w;
  w.kv_string("general.type", type);
  w.kv_string("general.architecture", arch);
  w.kv_string("adapter.type", "lora");
  w.kv_f32("adapter.lora.alpha", alpha);
  for (const auto& [name, p] : a.tensors) {
    if (f16) {
      for (const auto& [suffix, values, shape] : {std::tuple{".lora_a", &p.a, std::vector<std::int64_t>{p.rank, p.in}},
                                                  std::tuple{".lora_b", &p.b, std::vector<std::int64_t>{p.out, p.rank}}}) {
        test::Bytes b;
        for (float x : *values) test::append(b, test::to_f16(x));
        w.tensor_raw(name + suffix, shape, 1, b);  // GGML_TYPE_F16
      }
    } else {
      w.tensor_f32(name + ".lora_a", {p.rank, p.in}, p.a);
      w.tensor_f32(name + ".lora_b", {p.out, p.rank}, p.b);
    }
  }
  return w.bytes();
}

TEST(LoraAdapter, LlamaCppGgufLoadsToTheSameValues) {
  test::TempDir tmp;
  const LoraAdapter a = random_adapter(stories(), 8, kAllProjections, 11);
  test::write_bytes(tmp.file("a.gguf"), lora_gguf(a, 16.0f));
  auto back = load_lora_adapter(tmp.file("a.gguf"), stories());
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->rank, 8);
  EXPECT_EQ(back->alpha, 16.0f);
  EXPECT_FLOAT_EQ(back->scale(), 2.0f);
  ASSERT_EQ(back->tensors.size(), a.tensors.size());
  for (const auto& [name, p] : a.tensors) {
    EXPECT_EQ(back->tensors.at(name).a, p.a) << name;
    EXPECT_EQ(back->tensors.at(name).b, p.b) << name;  // llama GGUF and stories260K: both interleaved
  }
  // The same adapter through a PEFT folder loads to the same values.
  ASSERT_TRUE(save_peft_adapter(*back, tmp.file("peft"), "stories260K").is_ok());
  auto peft = load_lora_adapter(tmp.file("peft"), stories());
  ASSERT_TRUE(peft) << peft.status().message();
  for (const auto& [name, p] : a.tensors) EXPECT_EQ(peft->tensors.at(name).b, p.b) << name;

  // F16 tensors decode; alpha 0 means scale 1 (llama_adapter_lora_weight::get_scale).
  test::write_bytes(tmp.file("h.gguf"), lora_gguf(a, 0.0f, true));
  auto half = load_lora_adapter(tmp.file("h.gguf"), stories());
  ASSERT_TRUE(half) << half.status().message();
  EXPECT_FLOAT_EQ(half->scale(), 1.0f);
  const LoraPair& q = half->tensors.at("blk.0.attn_q.weight");
  for (std::size_t i = 0; i < q.a.size(); ++i) ASSERT_NEAR(q.a[i], a.tensors.at("blk.0.attn_q.weight").a[i], 1e-3f) << i;
}

TEST(LoraAdapter, GgufErrorsNameTheProblem) {
  test::TempDir tmp;
  const LoraAdapter a = random_adapter(stories(), 4, {"blk.1.attn_k.weight"}, 2);
  expect_error(load_lora_adapter(test::shared_dir() + "/models/stories260K/stories260K.gguf", stories()), ErrorCode::kInvalidArgument,
               "is not a LoRA adapter (general.type absent");
  test::write_bytes(tmp.file("model.gguf"), lora_gguf(a, 8.0f, false, "llama", "model"));
  expect_error(load_lora_adapter(tmp.file("model.gguf"), stories()), ErrorCode::kInvalidArgument, "general.type 'model'");
  test::write_bytes(tmp.file("qwen.gguf"), lora_gguf(a, 8.0f, false, "qwen2"));
  expect_error(load_lora_adapter(tmp.file("qwen.gguf"), stories()), ErrorCode::kInvalidArgument, "for architecture 'qwen2'");

  test::GgufWriter w;  // an A without its B, then a tensor the base does not have
  w.kv_string("general.type", "adapter");
  w.kv_string("general.architecture", "llama");
  w.kv_string("adapter.type", "lora");
  w.tensor_f32("blk.1.attn_k.weight.lora_a", {4, 64}, std::vector<float>(256, 0.5f));
  test::write_bytes(tmp.file("half.gguf"), w.bytes());
  expect_error(load_lora_adapter(tmp.file("half.gguf"), stories()), ErrorCode::kCorruptFile,
               "blk.1.attn_k.weight.lora_a has no .lora_b partner");
  test::GgufWriter e = w;
  e.tensor_f32("blk.1.attn_k.weight.lora_b", {32, 4}, std::vector<float>(128, 0.5f));
  e.tensor_f32("token_embd.weight.lora_a", {4, 64}, std::vector<float>(256, 0.5f));
  e.tensor_f32("token_embd.weight.lora_b", {512, 4}, std::vector<float>(2048, 0.5f));
  test::write_bytes(tmp.file("embd.gguf"), e.bytes());
  expect_error(load_lora_adapter(tmp.file("embd.gguf"), stories()), ErrorCode::kUnsupported, "token_embd.weight");
  test::GgufWriter s = w;
  s.tensor_f32("blk.1.attn_k.weight.lora_b", {64, 4}, std::vector<float>(256, 0.5f));  // attn_k has 32 rows
  test::write_bytes(tmp.file("shape.gguf"), s.bytes());
  expect_error(load_lora_adapter(tmp.file("shape.gguf"), stories()), ErrorCode::kInvalidArgument,
               "LoRA tensor blk.1.attn_k.weight.lora_b is [64, 4], expected [32, 4]");
  test::GgufWriter r = w;  // ranks 4 and 2
  r.tensor_f32("blk.1.attn_k.weight.lora_b", {32, 4}, std::vector<float>(128, 0.5f));
  r.tensor_f32("blk.2.attn_k.weight.lora_a", {2, 64}, std::vector<float>(128, 0.5f));
  r.tensor_f32("blk.2.attn_k.weight.lora_b", {32, 2}, std::vector<float>(64, 0.5f));
  test::write_bytes(tmp.file("ranks.gguf"), r.bytes());
  expect_error(load_lora_adapter(tmp.file("ranks.gguf"), stories()), ErrorCode::kUnsupported, "rank per module");
  test::GgufWriter n = w;
  n.tensor_f32("blk.1.attn_k.weight.lora_b", {32, 4}, std::vector<float>(128, 0.5f));
  n.tensor_f32("blk.9.attn_k.weight.lora_a", {4, 64}, std::vector<float>(256, 0.5f));
  n.tensor_f32("blk.9.attn_k.weight.lora_b", {32, 4}, std::vector<float>(128, 0.5f));
  test::write_bytes(tmp.file("layer.gguf"), n.bytes());
  expect_error(load_lora_adapter(tmp.file("layer.gguf"), stories()), ErrorCode::kInvalidArgument,
               "blk.9.attn_k.weight.lora_a adapts blk.9.attn_k.weight, which the base model does not have");
  const test::Bytes good = lora_gguf(a, 8.0f);
  test::write_bytes(tmp.file("cut.gguf"), test::Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() - 100)));
  EXPECT_EQ(load_lora_adapter(tmp.file("cut.gguf"), stories()).status().code(), ErrorCode::kCorruptFile);
}

TEST(LoraAdapter, PeftErrorsNameTheProblem) {
  test::TempDir tmp;
  expect_error(load_lora_adapter(tmp.file("nowhere"), stories()), ErrorCode::kNotFound, "does not exist");
  std::filesystem::create_directories(tmp.file("empty"));
  expect_error(load_lora_adapter(tmp.file("empty"), stories()), ErrorCode::kNotFound, "has no adapter_config.json");
  test::write_text(tmp.file("notes.txt"), "hello");
  expect_error(load_lora_adapter(tmp.file("notes.txt"), stories()), ErrorCode::kInvalidArgument, "neither a PEFT adapter folder");

  const auto config_error = [&](const std::function<void(nlohmann::json&)>& edit, ErrorCode code, const std::string& needle) {
    test::TempDir t;
    expect_error(load_lora_adapter(folder_with_config(t, edit), stories()), code, needle);
  };
  config_error([](nlohmann::json& c) { c["r"] = 0; }, ErrorCode::kInvalidArgument, "rank r = 0");
  config_error([](nlohmann::json& c) { c["bias"] = "all"; }, ErrorCode::kInvalidArgument, "bias \"all\"");
  config_error([](nlohmann::json& c) { c["fan_in_fan_out"] = true; }, ErrorCode::kInvalidArgument, "fan_in_fan_out");
  config_error([](nlohmann::json& c) { c["rank_pattern"] = {{"q_proj", 8}}; }, ErrorCode::kUnsupported, "\"rank_pattern\"");
  config_error([](nlohmann::json& c) { c["alpha_pattern"] = {{"q_proj", 8}}; }, ErrorCode::kUnsupported, "\"alpha_pattern\"");
  config_error([](nlohmann::json& c) { c["use_dora"] = true; }, ErrorCode::kUnsupported, "DoRA");
  config_error([](nlohmann::json& c) { c["target_modules"] = ".*self_attn.*"; }, ErrorCode::kUnsupported, "regular expression");
  config_error([](nlohmann::json& c) { c["target_modules"].push_back("lm_head"); }, ErrorCode::kUnsupported, "'lm_head'");
  config_error([](nlohmann::json& c) { c["target_modules"].push_back("c_attn"); }, ErrorCode::kInvalidArgument,
               "target module 'c_attn' is not a weight the base model has");
  config_error([](nlohmann::json& c) { c["target_modules"] = {"q_proj"}; }, ErrorCode::kCorruptFile,
               "adapts model.layers.1.mlp.up_proj, which target_modules does not list");
  config_error([](nlohmann::json& c) { c.erase("lora_alpha"); }, ErrorCode::kCorruptFile, "lora_alpha");
  {
    test::TempDir t;
    auto all = load_lora_adapter(folder_with_config(t, [](nlohmann::json& c) { c["target_modules"] = "all-linear"; }), stories());
    ASSERT_TRUE(all) << all.status().message();
    EXPECT_EQ(all->tensors.size(), 2u);
  }
  {
    test::TempDir t;
    const std::string dir = folder_with_config(t, [](nlohmann::json&) {});
    test::write_text(dir + "/adapter_config.json", "{\"r\": 4,");
    expect_error(load_lora_adapter(dir, stories()), ErrorCode::kCorruptFile, "adapter_config.json");
    test::Bytes st = test::read_bytes(dir + "/adapter_model.safetensors");
    write_json(dir + "/adapter_config.json", {{"r", 4}, {"lora_alpha", 8}, {"target_modules", {"q_proj", "up_proj"}}});
    ASSERT_TRUE(load_lora_adapter(dir, stories()));
    st.resize(st.size() - 40);
    test::write_bytes(dir + "/adapter_model.safetensors", st);
    EXPECT_EQ(load_lora_adapter(dir, stories()).status().code(), ErrorCode::kCorruptFile);
    std::filesystem::remove(dir + "/adapter_model.safetensors");
    expect_error(load_lora_adapter(dir, stories()), ErrorCode::kNotFound, "has no adapter_model.safetensors");
  }
}

TEST(LoraAdapter, PeftTensorErrorsNameTheTensor) {
  const auto tensors_error = [&](const std::vector<test::StTensor>& tensors, ErrorCode code, const std::string& needle,
                                 nlohmann::json c) {
    test::TempDir t;
    std::filesystem::create_directories(t.file("p"));
    if (c.is_null()) c = {{"r", 4}, {"lora_alpha", 8}, {"target_modules", {"q_proj", "k_proj", "embed_tokens"}}};
    write_json(t.file("p/adapter_config.json"), c);
    test::write_bytes(t.file("p/adapter_model.safetensors"), test::safetensors_bytes(tensors));
    expect_error(load_lora_adapter(t.file("p"), stories()), code, needle);
  };
  const auto f32 = [](std::string name, std::vector<std::int64_t> shape) {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return test::StTensor{std::move(name), "F32", shape, test::f32_bytes(std::vector<float>(static_cast<std::size_t>(n), 0.25f))};
  };
  const std::string q = "base_model.model.model.layers.0.self_attn.q_proj.";
  const nlohmann::json qk = {{"r", 4}, {"lora_alpha", 8}, {"target_modules", {"q_proj", "k_proj"}}};
  tensors_error({f32(q + "lora_A.weight", {4, 64}), f32(q + "lora_B.weight", {64, 4})}, ErrorCode::kUnsupported, "'embed_tokens'",
                nullptr);
  tensors_error({f32(q + "lora_A.weight", {4, 60}), f32(q + "lora_B.weight", {64, 4})}, ErrorCode::kInvalidArgument,
                "LoRA tensor " + q + "lora_A.weight is [4, 60], expected [r, 64] for blk.0.attn_q.weight [64, 64]", qk);
  tensors_error({f32(q + "lora_A.weight", {4, 64}), f32(q + "lora_B.weight", {64, 3})}, ErrorCode::kInvalidArgument,
                "LoRA tensor " + q + "lora_B.weight is [64, 3], expected [64, 4]", qk);
  tensors_error({f32(q + "lora_A.weight", {8, 64}), f32(q + "lora_B.weight", {64, 8})}, ErrorCode::kInvalidArgument,
                q + "lora_A.weight has rank 8, adapter_config.json r 4", qk);
  tensors_error({f32(q + "lora_A.weight", {4, 64})}, ErrorCode::kCorruptFile, q + "lora_A.weight has no lora_B partner", qk);
  tensors_error({f32("base_model.model.model.layers.0.self_attn.k_proj.lora_A.default.weight", {4, 64})}, ErrorCode::kCorruptFile,
                "is not PEFT's <module>.lora_A.weight", qk);
  tensors_error({f32("base_model.model.model.layers.7.self_attn.k_proj.lora_A.weight", {4, 64}),
                 f32("base_model.model.model.layers.7.self_attn.k_proj.lora_B.weight", {32, 4})},
                ErrorCode::kInvalidArgument, "adapts blk.7.attn_k.weight, which the base model does not have", qk);
  tensors_error({f32("base_model.model.model.layers.0.self_attn.c_attn.lora_A.weight", {4, 64}),
                 f32("base_model.model.model.layers.0.self_attn.c_attn.lora_B.weight", {64, 4})},
                ErrorCode::kInvalidArgument, "is not a weight the base model has", qk);
  tensors_error({f32("base_model.model.lm_head.lora_A.weight", {4, 64}), f32("base_model.model.lm_head.lora_B.weight", {512, 4})},
                ErrorCode::kUnsupported, "embedding and LM-head adapters are not supported", nlohmann::json{{"r", 4}, {"lora_alpha", 8}, {"target_modules", "all-linear"}});
  tensors_error({{q + "lora_A.weight", "I32", {4, 64}, test::Bytes(4 * 64 * 4)}, f32(q + "lora_B.weight", {64, 4})},
                ErrorCode::kUnsupported, q + "lora_A.weight is I32", qk);
}

TEST(LoraAdapter, SaveRefusesWhatPeftCannotName) {
  test::TempDir tmp;
  LoraAdapter a = random_adapter(stories(), 4, {"blk.0.attn_q.weight"}, 1);
  a.tensors["blk.0.attn_q.weight"].a.pop_back();
  EXPECT_EQ(save_peft_adapter(a, tmp.file("x"), "m").code(), ErrorCode::kInvalidArgument);
  LoraAdapter b = random_adapter(stories(), 4, {}, 1);
  b.tensors["output_norm.weight"] = LoraPair{4, 64, 1, std::vector<float>(256), std::vector<float>(4)};
  EXPECT_EQ(save_peft_adapter(b, tmp.file("y"), "m").code(), ErrorCode::kInvalidArgument);
  LoraAdapter c = random_adapter(stories(), 4, {"blk.0.attn_q.weight"}, 1);
  c.head_dim = 0;
  EXPECT_EQ(save_peft_adapter(c, tmp.file("z"), "m").code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace peregrine
