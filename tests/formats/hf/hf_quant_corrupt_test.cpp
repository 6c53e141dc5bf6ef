// load_hf_model on damaged quantized folders: wrong shapes, dtypes, missing or extra parts,
// truncation, bad configs, bad scales / zero points / g_idx, act-order files. Each gives one
// clear error of the right kind naming the tensor (or field), never a crash. And what other
// tools write differently but validly: per-tensor and non-f16 compressed scales.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <nlohmann/json.hpp>

#include "peregrine/formats/hf/hf_model.h"
#include "peregrine/formats/model_writer.h"
#include "peregrine/formats/safetensors/safetensors.h"
#include "peregrine/quant/fp16.h"
#include "peregrine/quant/int_group.h"
#include "formats/quantized_model_helpers.h"
#include "formats/safetensors/safetensors_writer.h"
#include "formats/test_files.h"
#include "test_models.h"

namespace peregrine {
namespace {

using nlohmann::json;
using Tensors = std::vector<test::StTensor>;

/// A folder holding `m` in `layout`, whose files a test then damages.
class Folder {
 public:
  Folder(const ModelFile& m, HfQuantLayout layout) {
    const Status st = save_hf_model(m, dir_.path, layout, test::shared_dir() + "/models/stories260K/tok512.bin");
    EXPECT_TRUE(st.is_ok()) << st.message();
  }

  /// Rewrites model.safetensors after `edit` changed its tensors.
  void edit_tensors(const std::function<void(Tensors&)>& edit) const {
    auto f = SafetensorsFile::open(weights());
    ASSERT_TRUE(f) << f.status().message();
    Tensors tensors;
    for (const SafetensorsTensor& t : f->tensors()) {
      tensors.push_back({t.name, std::string(safetensors_dtype_name(t.dtype)), t.shape, test::Bytes(t.data, t.data + t.nbytes)});
    }
    edit(tensors);
    test::write_bytes(weights(), test::safetensors_bytes(tensors));
  }

  /// Rewrites config.json's quantization_config after `edit`.
  void edit_quant_config(const std::function<void(json&)>& edit) const {
    json config = json::parse(test::read_file(dir_.file("config.json")));
    edit(config["quantization_config"]);
    test::write_text(dir_.file("config.json"), config.dump());
  }

  /// load_hf_model fails with `code`, one line mentioning every one of `parts`.
  void expect_error(ErrorCode code, const std::vector<std::string>& parts) const {
    auto m = load_hf_model(dir_.path);
    ASSERT_FALSE(m) << "loaded a damaged folder";
    EXPECT_EQ(m.status().code(), code) << m.status().message();
    EXPECT_EQ(m.status().message().find('\n'), std::string::npos) << m.status().message();
    for (const auto& p : parts) EXPECT_NE(m.status().message().find(p), std::string::npos) << m.status().message();
  }

  std::string weights() const { return dir_.file("model.safetensors"); }
  std::string file(const std::string& name) const { return dir_.file(name); }

 private:
  test::TempDir dir_;
};

test::StTensor& tensor(Tensors& ts, const std::string& name) {
  for (auto& t : ts) {
    if (t.name == name) return t;
  }
  ADD_FAILURE() << "no tensor " << name;
  return ts.front();
}

void remove(Tensors& ts, const std::string& name) {
  std::erase_if(ts, [&](const test::StTensor& t) { return t.name == name; });
}

const std::string kDown = "model.layers.1.mlp.down_proj";  // in_features 172: partial groups
const std::string kUp = "model.layers.2.mlp.up_proj";      // out_features 172: padded words

ModelFile gptq_model() { return test::int_linears(test::stories260k_model(), 4, true, 32); }

TEST(HfQuantCorrupt, GptqTensorsOfTheWrongShapeDtypeOrMissing) {
  const Folder f(gptq_model(), HfQuantLayout::kGptq);
  f.edit_tensors([](Tensors& ts) {
    auto& q = tensor(ts, kDown + ".qweight");  // [22, 64] → [21, 64]
    q.shape[0] -= 1;
    q.data.resize(q.data.size() - 64 * 4);
  });
  f.expect_error(ErrorCode::kCorruptFile, {"down_proj.qweight", "[21, 64]", "[22, 64]"});

  const Folder zeros(gptq_model(), HfQuantLayout::kGptq);
  zeros.edit_tensors([](Tensors& ts) {
    auto& z = tensor(ts, kUp + ".qzeros");  // [2, 22] → [2, 21]
    z.shape[1] -= 1;
    z.data.resize(z.data.size() - 2 * 4);
  });
  zeros.expect_error(ErrorCode::kCorruptFile, {"up_proj.qzeros", "[2, 21]"});

  const Folder dtype(gptq_model(), HfQuantLayout::kGptq);
  dtype.edit_tensors([](Tensors& ts) { tensor(ts, kDown + ".scales").dtype = "BF16"; });
  dtype.expect_error(ErrorCode::kCorruptFile, {"down_proj.scales", "BF16", "F16"});

  const Folder missing(gptq_model(), HfQuantLayout::kGptq);
  missing.edit_tensors([](Tensors& ts) { remove(ts, kDown + ".scales"); });
  missing.expect_error(ErrorCode::kCorruptFile, {"down_proj.scales is missing"});

  const Folder no_qweight(gptq_model(), HfQuantLayout::kGptq);
  no_qweight.edit_tensors([](Tensors& ts) { remove(ts, kDown + ".qweight"); });
  no_qweight.expect_error(ErrorCode::kCorruptFile, {"down_proj", "no"});

  const Folder extra(gptq_model(), HfQuantLayout::kGptq);
  extra.edit_tensors([](Tensors& ts) { ts.push_back({kDown + ".weight_scale", "F32", {64}, test::Bytes(256)}); });
  extra.expect_error(ErrorCode::kCorruptFile, {"down_proj.weight_scale", "GPTQ"});
}

TEST(HfQuantCorrupt, TruncatedWeightsFile) {
  const Folder f(gptq_model(), HfQuantLayout::kGptq);
  test::Bytes b = test::read_bytes(f.weights());
  b.resize(b.size() - 100);
  test::write_bytes(f.weights(), b);
  f.expect_error(ErrorCode::kCorruptFile, {"model.safetensors", "truncated"});
}

TEST(HfQuantCorrupt, BadQuantizationConfigs) {
  struct Case {
    std::function<void(json&)> edit;
    ErrorCode code;
    std::vector<std::string> parts;
  };
  const Case cases[] = {
      {[](json& q) { q["bits"] = 5; }, ErrorCode::kUnsupported, {"bits 5"}},
      {[](json& q) { q["bits"] = "4"; }, ErrorCode::kCorruptFile, {"'bits'", "integer"}},
      {[](json& q) { q.erase("bits"); }, ErrorCode::kCorruptFile, {"'bits' is missing"}},
      {[](json& q) { q.erase("quant_method"); }, ErrorCode::kCorruptFile, {"'quant_method' is missing"}},
      {[](json& q) { q["group_size"] = 0; }, ErrorCode::kCorruptFile, {"group_size 0"}},
      // Groups of 16 split in_features 64 into 4 groups, not the file's 2.
      {[](json& q) { q["group_size"] = 16; }, ErrorCode::kCorruptFile, {"qzeros", "[4, 4]", "group_size 16"}},
      {[](json& q) { q["quant_method"] = "bitsandbytes"; }, ErrorCode::kUnsupported, {"bitsandbytes"}},
      {[](json& q) { q["checkpoint_format"] = "marlin"; }, ErrorCode::kUnsupported, {"marlin"}},
      // A symmetric config over asymmetric zero points.
      {[](json& q) { q["sym"] = true; }, ErrorCode::kCorruptFile, {"zero point", "symmetric"}},
  };
  for (const Case& c : cases) {
    const Folder f(gptq_model(), HfQuantLayout::kGptq);
    f.edit_quant_config(c.edit);
    f.expect_error(c.code, c.parts);
  }
}

TEST(HfQuantCorrupt, QuantizedTensorsWithoutAConfigAreRefused) {
  const Folder f(gptq_model(), HfQuantLayout::kGptq);
  json config = json::parse(test::read_file(f.file("config.json")));
  config.erase("quantization_config");
  test::write_text(f.file("config.json"), config.dump());
  std::filesystem::remove(f.file("quantize_config.json"));
  f.expect_error(ErrorCode::kUnsupported, {".qweight", "quantization_config"});
}

TEST(HfQuantCorrupt, BadScalesZeroPointsAndGroupIndex) {
  const Folder nan(gptq_model(), HfQuantLayout::kGptq);
  nan.edit_tensors([](Tensors& ts) { test::poke(tensor(ts, kUp + ".scales").data, 6, std::uint16_t{0x7e00}); });
  nan.expect_error(ErrorCode::kCorruptFile, {"up_proj", "non-finite scale"});

  // v1 stores zero − 1: a stored 15 (all bits set, AutoGPTQ's -1) means zero point 16.
  const Folder v1(gptq_model(), HfQuantLayout::kGptq);
  v1.edit_tensors([](Tensors& ts) { test::poke(tensor(ts, kDown + ".qzeros").data, 0, std::uint32_t{0xf}); });
  v1.expect_error(ErrorCode::kUnsupported, {"down_proj", "zero point 16"});

  const Folder act_order(gptq_model(), HfQuantLayout::kGptq);
  act_order.edit_tensors([](Tensors& ts) {
    auto& g = tensor(ts, kDown + ".g_idx");
    test::poke(g.data, 0, std::uint32_t{1});
    test::poke(g.data, 32 * 4, std::uint32_t{0});
  });
  act_order.expect_error(ErrorCode::kUnsupported, {"down_proj.g_idx[0]", "act-order"});

  const Folder outside(gptq_model(), HfQuantLayout::kGptq);
  outside.edit_tensors([](Tensors& ts) { test::poke(tensor(ts, kDown + ".g_idx").data, 4 * 171, std::uint32_t{6}); });
  outside.expect_error(ErrorCode::kCorruptFile, {"down_proj.g_idx[171] = 6", "[0, 6)"});
}

TEST(HfQuantCorrupt, AwqDamage) {
  const ModelFile q = test::int_linears(test::stories260k_model(), 4, false, 64);
  const Folder shape(q, HfQuantLayout::kAwq);
  shape.edit_tensors([](Tensors& ts) {
    auto& w = tensor(ts, kUp + ".qweight");  // [64, 22] → [64, 21]
    w.shape[1] -= 1;
    w.data.resize(w.data.size() - 64 * 4);
  });
  shape.expect_error(ErrorCode::kCorruptFile, {"up_proj.qweight", "[64, 21]"});

  const Folder zero(q, HfQuantLayout::kAwq);  // symmetric (zero_point false): zeros must be 8
  zero.edit_tensors([](Tensors& ts) { test::poke(tensor(ts, kUp + ".qzeros").data, 0, std::uint32_t{0x88888887}); });
  zero.expect_error(ErrorCode::kCorruptFile, {"up_proj", "zero point 7"});

  const Folder version(q, HfQuantLayout::kAwq);
  version.edit_quant_config([](json& c) { c["version"] = "gemv"; });
  version.expect_error(ErrorCode::kUnsupported, {"gemv"});

  const Folder bits(q, HfQuantLayout::kAwq);
  bits.edit_quant_config([](json& c) { c["bits"] = 8; });
  bits.expect_error(ErrorCode::kUnsupported, {"bits 8", "4-bit"});
}

TEST(HfQuantCorrupt, CompressedDamage) {
  const ModelFile w4a8 = test::int_linears(test::stories260k_model(), 4, false, -1, 8);
  const Folder scale(w4a8, HfQuantLayout::kCompressed);
  scale.edit_tensors([](Tensors& ts) { remove(ts, kDown + ".weight_scale"); });
  scale.expect_error(ErrorCode::kCorruptFile, {"down_proj.weight_scale is missing"});

  const Folder range(w4a8, HfQuantLayout::kCompressed);  // 4-bit values are in [-8, 7]
  range.edit_tensors([](Tensors& ts) { tensor(ts, kDown + ".weight").data[5] = 8; });
  range.expect_error(ErrorCode::kCorruptFile, {"down_proj.weight[0, 5] = 8", "4-bit"});

  const Folder dtype(w4a8, HfQuantLayout::kCompressed);
  dtype.edit_tensors([](Tensors& ts) {
    auto& s = tensor(ts, kDown + ".weight_scale");
    s.dtype = "BF16";
    s.data.resize(s.data.size() / 2);
  });
  dtype.expect_error(ErrorCode::kUnsupported, {"down_proj.weight_scale is BF16"});

  const Folder shape(test::fp8_linears(test::stories260k_model(), DType::kF8E4M3), HfQuantLayout::kCompressed);
  shape.edit_tensors([](Tensors& ts) {
    auto& s = tensor(ts, kUp + ".weight_scale");
    s.shape = {86, 2};
  });
  shape.expect_error(ErrorCode::kCorruptFile, {"up_proj.weight_scale", "[86, 2]"});

  const Folder no_config(w4a8, HfQuantLayout::kCompressed);
  json config = json::parse(test::read_file(no_config.file("config.json")));
  config.erase("quantization_config");
  test::write_text(no_config.file("config.json"), config.dump());
  no_config.expect_error(ErrorCode::kUnsupported, {".weight is I8", "quantization_config"});
}

TEST(HfQuantCorrupt, UnreadableSafetensorsDtype) {
  const Folder f(gptq_model(), HfQuantLayout::kGptq);
  f.edit_tensors([](Tensors& ts) {
    auto& g = tensor(ts, kDown + ".g_idx");
    g.dtype = "I64";
    g.shape = {86};
  });
  f.expect_error(ErrorCode::kUnsupported, {"down_proj.g_idx", "I64"});
}

TEST(HfQuantCorrupt, RandomByteDamageGivesAModelOrOneCleanError) {
  // Bytes flipped anywhere in the weights file (header, qweight, qzeros, scales, g_idx) of 3-bit
  // GPTQ and FP8 folders: each load either succeeds (value bytes) or fails with one clean line.
  std::mt19937 rng(11);
  for (const ModelFile& m : {test::int_linears(test::stories260k_model(), 3, true, 32), test::fp8_linears(test::stories260k_model(), DType::kF8E5M2)}) {
    const Folder f(m, m.find("blk.0.attn_q.weight")->dtype == DType::kInt ? HfQuantLayout::kGptq : HfQuantLayout::kCompressed);
    const test::Bytes original = test::read_bytes(f.weights());
    int failures = 0;
    for (int trial = 0; trial < 60; ++trial) {
      test::Bytes b = original;
      const std::size_t at = trial < 30 ? rng() % 4096 : rng() % b.size();  // header-heavy, then anywhere
      b[at % b.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
      test::write_bytes(f.weights(), b);
      auto loaded = load_hf_model(f.file(""));
      if (loaded) continue;
      ++failures;
      EXPECT_FALSE(loaded.status().message().empty());
      EXPECT_EQ(loaded.status().message().find('\n'), std::string::npos) << loaded.status().message();
    }
    EXPECT_GT(failures, 0);
  }
}

TEST(HfQuantForeign, CompressedPerTensorScaleIsRoundedToF16ForIntRows) {
  // compressed-tensors' tensor strategy stores one f32 scale; the runtime int rows hold f16.
  const ModelFile w8a8 = test::int_linears(test::stories260k_model(), 8, false, -1, 8);
  const Folder f(w8a8, HfQuantLayout::kCompressed);
  const float scale = 0.0123456789f;
  f.edit_tensors([&](Tensors& ts) {
    auto& s = tensor(ts, kDown + ".weight_scale");
    s.shape = {1};
    s.data = test::f32_bytes({scale});
  });
  auto m = load_hf_model(f.file(""));
  ASSERT_TRUE(m) << m.status().message();
  const TensorView& got = *m->find("blk.1.ffn_down.weight");
  const TensorView& want = *w8a8.find("blk.1.ffn_down.weight");
  ASSERT_EQ(got.quant, want.quant);
  const float f16_scale = f16_to_f32(f32_to_f16(scale));
  ASSERT_NE(f16_scale, scale);
  for (std::int64_t r = 0; r < got.n_rows(); ++r) {
    const IntRow g = unpack_int_row(got.quant, static_cast<const std::uint8_t*>(got.data) + r * *got.row_bytes(), got.row_length());
    const IntRow w = unpack_int_row(want.quant, static_cast<const std::uint8_t*>(want.data) + r * *want.row_bytes(), want.row_length());
    ASSERT_EQ(g.groups.size(), 1u);
    EXPECT_EQ(g.groups[0].scale, f16_scale) << r;
    EXPECT_EQ(g.codes, w.codes) << r;
  }
}

}  // namespace
}  // namespace peregrine
