// save_hf_model + load_hf_model: stories260K with RTN-quantized linears in the GPTQ (bits 2/3/4/8
// × sym/asym × group 32/64/per-channel), AWQ (4-bit) and compressed (int8 W8A8, W4A8, FP8)
// layouts reads back to the same kInt / F8 rows byte for byte (Q/K rows in HF's NeoX order),
// the same config, a model LlamaModel accepts, and the same logits; the tokenizer and the
// Hadamard flag travel with the folder; what a layout cannot hold is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/model_compare.h"
#include "peregrine/formats/hf/hf_model.h"
#include "peregrine/formats/model_writer.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/quant/convert_model.h"
#include "peregrine/tokenizer/llama2c_tokenizer.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "formats/quantized_model_helpers.h"
#include "formats/test_files.h"
#include "test_models.h"

namespace peregrine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string tok512() { return test::shared_dir() + "/models/stories260K/tok512.bin"; }
constexpr const char* kChatTemplate = "microsoft-Phi-3.5-mini-instruct.jinja";

json quantization_config(const std::string& dir) {
  return json::parse(test::read_file(dir + "/config.json")).value("quantization_config", json());
}

/// Saves `m` in `layout`, loads it back and checks config and tensors; returns the loaded model.
ModelFile round_trip(const ModelFile& m, HfQuantLayout layout, const std::string& dir) {
  const Status st = save_hf_model(m, dir, layout, tok512());
  EXPECT_TRUE(st.is_ok()) << st.message();
  auto loaded = load_model_file(dir);
  EXPECT_TRUE(loaded) << loaded.status().message();
  if (!loaded) return {};
  EXPECT_EQ(loaded->format, ModelFormat::kHuggingFace);
  EXPECT_EQ(loaded->config.rope_style, RopeStyle::kNeox);
  test::expect_same_config(m.config, loaded->config);
  test::expect_same_tensors(m, *loaded);
  return std::move(*loaded);
}

std::string label(int bits, bool asym, std::int64_t group) {
  return std::to_string(bits) + "-bit " + (asym ? "asym" : "sym") + " group " + std::to_string(group);
}

TEST(HfQuantLayouts, GptqRoundTripsEveryBitsSymmetryAndGroupSize) {
  test::TempDir dir;
  for (int bits : {2, 3, 4, 8}) {
    for (bool asym : {false, true}) {
      for (std::int64_t group : {32, 64, -1}) {
        SCOPED_TRACE(label(bits, asym, group));
        const std::string folder = dir.file("gptq-" + std::to_string(bits) + (asym ? "a" : "s") + std::to_string(group));
        const ModelFile q = test::int_linears(test::stories260k_model(), bits, asym, group);
        round_trip(q, HfQuantLayout::kGptq, folder);
        if (::testing::Test::HasFatalFailure()) return;
        const json c = quantization_config(folder);
        EXPECT_EQ(c["quant_method"], "gptq");
        EXPECT_EQ(c["bits"], bits);
        EXPECT_EQ(c["group_size"], group);
        EXPECT_EQ(c["sym"], !asym);
        EXPECT_EQ(json::parse(test::read_file(folder + "/quantize_config.json")), c);
      }
    }
  }
}

TEST(HfQuantLayouts, GptqWritesV1ZerosUnlessAZeroPointIsZero) {
  test::TempDir dir;
  const ModelFile q = test::int_linears(test::stories260k_model(), 4, true, 32);
  round_trip(q, HfQuantLayout::kGptq, dir.file("v1"));
  EXPECT_EQ(quantization_config(dir.file("v1"))["checkpoint_format"], "gptq");
  // Non-negative weights quantize to zero point 0, which v1 (zero − 1) cannot store.
  ModelFile positive = test::stories260k_model();
  TensorView& t = positive.tensors["blk.2.ffn_up.weight"];
  auto abs_values = std::make_shared<std::vector<float>>(static_cast<const float*>(t.data),
                                                         static_cast<const float*>(t.data) + t.numel());
  for (float& x : *abs_values) x = std::fabs(x);
  t.data = abs_values->data();
  positive.storage.push_back(abs_values);
  round_trip(test::int_linears(positive, 4, true, 32), HfQuantLayout::kGptq, dir.file("v2"));
  EXPECT_EQ(quantization_config(dir.file("v2"))["checkpoint_format"], "gptq_v2");
}

TEST(HfQuantLayouts, AwqRoundTripsFourBitWeights) {
  test::TempDir dir;
  for (bool asym : {false, true}) {
    for (std::int64_t group : {32, 64, -1}) {
      SCOPED_TRACE(label(4, asym, group));
      const std::string folder = dir.file(std::string("awq-") + (asym ? "a" : "s") + std::to_string(group));
      round_trip(test::int_linears(test::stories260k_model(), 4, asym, group), HfQuantLayout::kAwq, folder);
      if (::testing::Test::HasFatalFailure()) return;
      const json c = quantization_config(folder);
      EXPECT_EQ(c["quant_method"], "awq");
      EXPECT_EQ(c["zero_point"], asym);
      EXPECT_EQ(c["version"], "gemm");
    }
  }
}

TEST(HfQuantLayouts, CompressedRoundTripsW8A8W4A8AndFp8) {
  test::TempDir dir;
  struct Case {
    std::string name;
    ModelFile model;
    HfQuantLayout layout;
  };
  const Case cases[] = {
      {"w8a8", test::int_linears(test::stories260k_model(), 8, false, -1, 8), HfQuantLayout::kGptq},
      {"llm-int8", test::int_linears(test::stories260k_model(), 8, false, -1, 8, 6.0f), HfQuantLayout::kAwq},
      {"w4a8", test::int_linears(test::stories260k_model(), 4, false, -1, 8), HfQuantLayout::kGptq},
      {"w8a16", test::int_linears(test::stories260k_model(), 8, false, -1), HfQuantLayout::kCompressed},
      {"fp8-e4m3", test::fp8_linears(test::stories260k_model(), DType::kF8E4M3), HfQuantLayout::kGptq},
      {"fp8-e5m2", test::fp8_linears(test::stories260k_model(), DType::kF8E5M2), HfQuantLayout::kAwq},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    round_trip(c.model, c.layout, dir.file(c.name));
    if (::testing::Test::HasFatalFailure()) return;
    const json q = quantization_config(dir.file(c.name));
    EXPECT_EQ(q["quant_method"], "peregrine");
    EXPECT_EQ(q["format"], "compressed");
  }
}

TEST(HfQuantLayouts, SavedModelsLoadIntoLlamaModelWithTheSameLogits) {
  // The loaded rows are the saved ones byte for byte (above); here the whole model: LlamaModel
  // accepts the loaded file, and its weights (decoded to f32, so the comparison does not depend
  // on the int / FP8 matmul kernels) give the in-memory model's logits up to the f32 summation
  // order of the attention dot products, which the NeoX pairing changes.
  test::TempDir dir;
  struct Case {
    std::string name;
    ModelFile model;
    HfQuantLayout layout;
  };
  const Case cases[] = {
      {"f32", test::stories260k_model(), HfQuantLayout::kGptq},
      {"gptq-4-asym-32", test::int_linears(test::stories260k_model(), 4, true, 32), HfQuantLayout::kGptq},
      {"gptq-3-sym-channel", test::int_linears(test::stories260k_model(), 3, false, -1), HfQuantLayout::kGptq},
      {"awq-4-asym-64", test::int_linears(test::stories260k_model(), 4, true, 64), HfQuantLayout::kAwq},
      {"w8a8", test::int_linears(test::stories260k_model(), 8, false, -1, 8), HfQuantLayout::kCompressed},
      {"fp8-e4m3", test::fp8_linears(test::stories260k_model(), DType::kF8E4M3), HfQuantLayout::kCompressed},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ModelFile loaded = round_trip(c.model, c.layout, dir.file(c.name));
    const auto want = test::prefill_logits(c.model, true), got = test::prefill_logits(loaded, true);
    ASSERT_FALSE(want.empty());
    EXPECT_LE(test::max_abs_diff(want, got), 1e-5f);
    EXPECT_TRUE(LlamaModel::create(std::move(loaded)));
  }
}

TEST(HfQuantLayouts, TokenizerAndHadamardFlagTravelWithTheFolder) {
  test::TempDir dir;
  ModelFile m = test::stories260k_model();
  m.config.ffn_down_hadamard = true;
  ModelFile hf = round_trip(m, HfQuantLayout::kGptq, dir.file("bin"));
  EXPECT_TRUE(hf.config.ffn_down_hadamard);
  EXPECT_EQ(json::parse(test::read_file(dir.file("bin") + "/config.json"))["peregrine_ffn_down_hadamard"], true);
  auto want = load_llama2c_tokenizer(tok512());
  ASSERT_TRUE(want);
  const std::string text = "Once upon a time, Lily saw a big red ball.";
  auto from_bin = load_tokenizer(hf);
  ASSERT_TRUE(from_bin) << from_bin.status().message();
  EXPECT_EQ((*from_bin)->encode(text, true), (*want)->encode(text, true));

  // Re-saving a folder takes the tokenizer file and the chat template beside it along.
  const std::string chat_template = test::read_file(test::shared_dir() + "/chat-templates/" + kChatTemplate);
  ASSERT_FALSE(chat_template.empty());
  test::write_text(dir.file("bin") + "/chat_template.jinja", chat_template);
  auto bin_tokenizer = tokenizer_file_of(hf);
  ASSERT_TRUE(bin_tokenizer) << bin_tokenizer.status().message();
  ASSERT_TRUE(save_hf_model(hf, dir.file("again"), HfQuantLayout::kAwq, *bin_tokenizer).is_ok());
  EXPECT_EQ(test::read_file(dir.file("again") + "/chat_template.jinja"), chat_template);
  EXPECT_EQ(test::read_file(dir.file("again") + "/tokenizer.bin"), test::read_file(tok512()));

  // A GGUF source without a tokenizer file writes its vocabulary as tokenizer.gguf.
  auto gguf = load_model_file(test::shared_dir() + "/models/stories260K/stories260K.gguf");
  ASSERT_TRUE(gguf) << gguf.status().message();
  auto file = tokenizer_file_of(*gguf);
  ASSERT_TRUE(file);
  EXPECT_EQ(*file, "");
  ASSERT_TRUE(save_hf_model(*gguf, dir.file("gguf"), HfQuantLayout::kGptq, *file).is_ok());
  auto from_gguf_folder = load_model_file(dir.file("gguf"));
  ASSERT_TRUE(from_gguf_folder) << from_gguf_folder.status().message();
  auto path = tokenizer_file_of(*from_gguf_folder);
  ASSERT_TRUE(path) << path.status().message();
  EXPECT_EQ(fs::path(*path).filename(), "tokenizer.gguf");
  auto tok = load_tokenizer(*from_gguf_folder);
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ((*tok)->encode(text, true), (*want)->encode(text, true));
  test::expect_same_tensors(*gguf, *from_gguf_folder);
}

TEST(HfQuantLayouts, AutoGptqQuantizeConfigAloneDescribesTheFile) {
  test::TempDir dir;
  const ModelFile q = test::int_linears(test::stories260k_model(), 4, true, 64);
  round_trip(q, HfQuantLayout::kGptq, dir.path);
  json config = json::parse(test::read_file(dir.file("config.json")));
  config.erase("quantization_config");
  test::write_text(dir.file("config.json"), config.dump());
  auto loaded = load_model_file(dir.path);
  ASSERT_TRUE(loaded) << loaded.status().message();
  test::expect_same_tensors(q, *loaded);
}

// Group-wise weights with per-token int8 activations (W8A8 / W4A8 with groups) keep the GPTQ
// layout; the activation mode rides in quantization_config's act_bits.
TEST(HfQuantLayouts, GroupWiseInt8ActivationsKeepTheGptqLayout) {
  test::TempDir dir;
  round_trip(test::int_linears(test::stories260k_model(), 8, false, 32, 8), HfQuantLayout::kGptq, dir.path);
  const json config = json::parse(test::read_file(dir.file("config.json")));
  EXPECT_EQ(config["quantization_config"]["quant_method"], "gptq");
  EXPECT_EQ(config["quantization_config"]["act_bits"], 8);
}

TEST(HfQuantLayouts, RefusesWhatALayoutCannotHold) {
  test::TempDir dir;
  auto expect_refused = [&](const ModelFile& m, HfQuantLayout layout, const std::string& part) {
    const Status st = save_hf_model(m, dir.file("x"), layout, tok512());
    EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.message();
    EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
    EXPECT_FALSE(fs::exists(dir.file("x") + "/model.safetensors"));
  };
  expect_refused(test::int_linears(test::stories260k_model(), 3, true, 32), HfQuantLayout::kAwq, "4-bit");
  expect_refused(test::int_linears(test::stories260k_model(), 4, true, 32), HfQuantLayout::kCompressed, "asymmetric");
  ModelFile mixed = test::int_linears(test::stories260k_model(), 4, true, 32);
  const ModelFile other = test::int_linears(test::stories260k_model(), 4, true, 64);
  mixed.tensors["blk.3.ffn_down.weight"] = other.tensors.at("blk.3.ffn_down.weight");
  mixed.storage.insert(mixed.storage.end(), other.storage.begin(), other.storage.end());
  expect_refused(mixed, HfQuantLayout::kGptq, "blk.3.ffn_down.weight");
  ModelFile q8 = test::stories260k_model();
  ASSERT_TRUE(convert_model_weights(q8, DType::kQ8_0));
  expect_refused(q8, HfQuantLayout::kGptq, "q8_0");
  const Status st = save_hf_model(test::stories260k_model(), dir.file("y"), HfQuantLayout::kGptq, "");
  EXPECT_EQ(st.code(), ErrorCode::kNotFound) << st.message();
}

}  // namespace
}  // namespace peregrine
