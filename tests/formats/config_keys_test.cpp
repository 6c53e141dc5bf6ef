// The hyper-parameter table of formats/config_keys.h through all four of its users: every row,
// set to zero and to a value no family defaults to, survives save_gguf_model → load and
// save_hf_model → load on Gemma 2 (whose GGUF soft-caps default to llama.cpp's 50 / 30, so a
// zero must be written) and on a Mistral-style llama (no family defaults); a negative value in
// config.json is one error naming its field (the GGUF side: bad_input_test.cpp Gemma2Gguf).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "peregrine/formats/config_keys.h"
#include "formats/model_compare.h"
#include "formats/test_files.h"
#include "peregrine/formats/model_writer.h"

namespace peregrine {
namespace {

ModelFile load(const std::string& path) {
  auto m = load_model_file(path);
  EXPECT_TRUE(m) << m.status().message();
  return m ? std::move(*m) : ModelFile{};
}

/// Sets row k of m's config to `value` (an int64 field to its integer part).
void set_field(ModelFile& m, const ConfigKey& k, float value) {
  std::visit([&](auto field) { m.config.*field = static_cast<std::remove_cvref_t<decltype(m.config.*field)>>(value); }, k.field);
}

TEST(ConfigKeys, EveryRowRoundTripsThroughGgufAndHf) {
  const std::string tok = test::testdata_dir() + "/tok512.bin";
  for (const char* name : {"hf-f32-gemma2", "hf-f32-mistral-swa"}) {
    for (const ConfigKey& k : config_keys()) {
      for (const float value : {0.0f, 7.0f}) {
        SCOPED_TRACE(std::string(name) + " " + k.gguf + " = " + std::to_string(value));
        ModelFile m = load(test::testdata_dir() + "/" + name);
        set_field(m, k, value);
        test::TempDir dir;
        ASSERT_TRUE(save_gguf_model(m, dir.file("m.gguf"), tok).is_ok());
        ASSERT_TRUE(save_hf_model(m, dir.file("hf"), HfQuantLayout::kGptq, tok).is_ok());
        test::expect_same_config(m.config, load(dir.file("m.gguf")).config);
        test::expect_same_config(m.config, load(dir.file("hf")).config);
      }
    }
  }
}

TEST(ConfigKeys, NegativeConfigJsonFieldIsOneErrorNamingIt) {
  const std::string tok = test::testdata_dir() + "/tok512.bin";
  test::TempDir dir;
  ASSERT_TRUE(save_hf_model(load(test::testdata_dir() + "/hf-f32-gemma2"), dir.file("hf"), HfQuantLayout::kGptq, tok).is_ok());
  const std::string config_path = dir.file("hf") + "/config.json";
  const nlohmann::json config = nlohmann::json::parse(test::read_file(config_path));
  for (const ConfigKey& k : config_keys()) {
    SCOPED_TRACE(k.hf);
    nlohmann::json bad = config;
    bad[k.hf] = -3;
    const std::string text = bad.dump();
    test::write_bytes(config_path, test::Bytes(text.begin(), text.end()));
    auto m = load_model_file(dir.file("hf"));
    ASSERT_FALSE(m);
    EXPECT_EQ(m.status().code(), ErrorCode::kCorruptFile);
    EXPECT_NE(m.status().message().find(std::string("'") + k.hf + "' = -3"), std::string::npos) << m.status().message();
  }
}

}  // namespace
}  // namespace peregrine
