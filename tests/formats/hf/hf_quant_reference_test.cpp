// The GPTQ and AWQ tensors save_hf_model writes are those AutoGPTQ and AutoAWQ write: for
// linears whose dimensions their packers accept (stories260K's attn_v [32, 64] and attn_output
// [64, 64]), qweight / qzeros / scales / g_idx are compared with the packing loops of AutoGPTQ's
// QuantLinear.pack (qlinear_cuda_old.py, 3-bit branch included) and AutoAWQ's
// WQLinear_GEMM.from_linear, transcribed here independently of the writers.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "peregrine/formats/model_writer.h"
#include "peregrine/formats/safetensors/safetensors.h"
#include "peregrine/quant/fp16.h"
#include "peregrine/quant/int_group.h"
#include "formats/quantized_model_helpers.h"
#include "formats/test_files.h"
#include "test_models.h"

namespace peregrine {
namespace {

using U32 = std::vector<std::uint32_t>;  // row-major

/// codes[i][o] (AutoGPTQ's intweight after .t(): input-major) and zeros[g][o] of a kInt tensor.
struct Unpacked {
  std::int64_t in = 0, out = 0, groups = 0;
  U32 codes, zeros;
  std::vector<float> scales;  // [groups][out]
};

Unpacked unpack(const TensorView& w) {
  Unpacked u;
  u.out = w.shape[0];
  u.in = w.shape[1];
  u.groups = int_group_count(w.quant, u.in);
  u.codes.resize(static_cast<std::size_t>(u.in * u.out));
  u.zeros.resize(static_cast<std::size_t>(u.groups * u.out));
  u.scales.resize(u.zeros.size());
  for (std::int64_t o = 0; o < u.out; ++o) {
    const IntRow row = unpack_int_row(w.quant, static_cast<const std::uint8_t*>(w.data) + o * *w.row_bytes(), u.in);
    for (std::int64_t i = 0; i < u.in; ++i) u.codes[static_cast<std::size_t>(i * u.out + o)] = row.codes[static_cast<std::size_t>(i)];
    for (std::int64_t g = 0; g < u.groups; ++g) {
      u.zeros[static_cast<std::size_t>(g * u.out + o)] = static_cast<std::uint32_t>(row.groups[static_cast<std::size_t>(g)].zero);
      u.scales[static_cast<std::size_t>(g * u.out + o)] = row.groups[static_cast<std::size_t>(g)].scale;
    }
  }
  return u;
}

/// AutoGPTQ QuantLinear.pack's loop over the rows of `v` [rows, cols] (qweight: v = intweight,
/// packed along rows) — the same loop packs qzeros along columns, see pack_columns.
U32 autogptq_pack_rows(const U32& v, std::int64_t rows, std::int64_t cols, int bits) {
  U32 q(static_cast<std::size_t>(rows / 32 * bits * cols), 0);
  auto at = [&](std::int64_t r) { return &v[static_cast<std::size_t>(r * cols)]; };
  auto out = [&](std::int64_t r) { return &q[static_cast<std::size_t>(r * cols)]; };
  auto or_shift = [&](std::int64_t row, std::int64_t j, int shift) {
    for (std::int64_t c = 0; c < cols; ++c) out(row)[c] |= at(j)[c] << shift;
  };
  std::int64_t i = 0, row = 0;
  while (row < rows / 32 * bits) {
    if (bits != 3) {
      for (std::int64_t j = i; j < i + 32 / bits; ++j) or_shift(row, j, static_cast<int>(bits * (j - i)));
      i += 32 / bits;
      row += 1;
      continue;
    }
    for (std::int64_t j = i; j < i + 10; ++j) or_shift(row, j, static_cast<int>(3 * (j - i)));
    i += 10;
    or_shift(row, i, 30);
    row += 1;
    for (std::int64_t c = 0; c < cols; ++c) out(row)[c] |= (at(i)[c] >> 2) & 1;
    i += 1;
    for (std::int64_t j = i; j < i + 10; ++j) or_shift(row, j, static_cast<int>(3 * (j - i) + 1));
    i += 10;
    or_shift(row, i, 31);
    row += 1;
    for (std::int64_t c = 0; c < cols; ++c) out(row)[c] |= (at(i)[c] >> 1) & 0x3;
    i += 1;
    for (std::int64_t j = i; j < i + 10; ++j) or_shift(row, j, static_cast<int>(3 * (j - i) + 2));
    i += 10;
    row += 1;
  }
  return q;
}

U32 transpose(const U32& v, std::int64_t rows, std::int64_t cols) {
  U32 t(v.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) t[static_cast<std::size_t>(c * rows + r)] = v[static_cast<std::size_t>(r * cols + c)];
  }
  return t;
}

/// AutoAWQ's GEMM packing of `v` [rows, cols] along columns with order_map [0, 2, 4, 6, 1, 3, 5, 7].
U32 autoawq_pack(const U32& v, std::int64_t rows, std::int64_t cols) {
  const int order_map[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  U32 q(static_cast<std::size_t>(rows * cols / 8), 0);
  for (std::int64_t col = 0; col < cols / 8; ++col) {
    for (int i = 0; i < 8; ++i) {
      for (std::int64_t r = 0; r < rows; ++r) {
        q[static_cast<std::size_t>(r * cols / 8 + col)] |= v[static_cast<std::size_t>(r * cols + col * 8 + order_map[i])] << (i * 4);
      }
    }
  }
  return q;
}

U32 as_u32(const SafetensorsTensor& t) {
  U32 v(t.nbytes / 4);
  std::memcpy(v.data(), t.data, t.nbytes);
  return v;
}

std::vector<float> as_f16_values(const SafetensorsTensor& t) {
  std::vector<float> v(t.nbytes / 2);
  for (std::size_t k = 0; k < v.size(); ++k) {
    std::uint16_t h;
    std::memcpy(&h, t.data + 2 * k, 2);
    v[k] = f16_to_f32(h);
  }
  return v;
}

constexpr std::pair<const char*, const char*> kModules[] = {
    {"blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj"},
    {"blk.4.attn_output.weight", "model.layers.4.self_attn.o_proj"}};

TEST(HfQuantReference, GptqTensorsMatchAutoGptqPack) {
  test::TempDir dir;
  for (int bits : {2, 3, 4, 8}) {
    for (bool asym : {false, true}) {
      SCOPED_TRACE(std::to_string(bits) + (asym ? "-bit asym" : "-bit sym"));
      const ModelFile q = test::int_linears(test::stories260k_model(), bits, asym, 32);
      const std::string folder = dir.file(std::to_string(bits) + (asym ? "a" : "s"));
      ASSERT_TRUE(save_hf_model(q, folder, HfQuantLayout::kGptq, test::shared_dir() + "/models/stories260K/tok512.bin").is_ok());
      const auto config = nlohmann::json::parse(test::read_file(folder + "/config.json"))["quantization_config"];
      auto f = SafetensorsFile::open(folder + "/model.safetensors");
      ASSERT_TRUE(f) << f.status().message();
      for (const auto& [name, module] : kModules) {
        SCOPED_TRACE(name);
        const Unpacked u = unpack(*q.find(name));
        EXPECT_EQ(as_u32(*f->find(std::string(module) + ".qweight")), autogptq_pack_rows(u.codes, u.in, u.out, bits));
        if (config["checkpoint_format"] == "gptq") {  // v1: zero − 1, packed along out_features
          U32 stored = u.zeros;
          for (auto& z : stored) z -= 1;
          const U32 packed = autogptq_pack_rows(transpose(stored, u.groups, u.out), u.out, u.groups, bits);
          EXPECT_EQ(as_u32(*f->find(std::string(module) + ".qzeros")), transpose(packed, u.out / 32 * bits, u.groups));
        }
        EXPECT_EQ(as_f16_values(*f->find(std::string(module) + ".scales")), u.scales);
        U32 g_idx(static_cast<std::size_t>(u.in));
        for (std::int64_t i = 0; i < u.in; ++i) g_idx[static_cast<std::size_t>(i)] = static_cast<std::uint32_t>(i / 32);
        EXPECT_EQ(as_u32(*f->find(std::string(module) + ".g_idx")), g_idx);
      }
    }
  }
}

TEST(HfQuantReference, AwqTensorsMatchAutoAwqPack) {
  test::TempDir dir;
  for (bool asym : {false, true}) {
    const ModelFile q = test::int_linears(test::stories260k_model(), 4, asym, 32);
    const std::string folder = dir.file(asym ? "a" : "s");
    ASSERT_TRUE(save_hf_model(q, folder, HfQuantLayout::kAwq, test::shared_dir() + "/models/stories260K/tok512.bin").is_ok());
    auto f = SafetensorsFile::open(folder + "/model.safetensors");
    ASSERT_TRUE(f) << f.status().message();
    for (const auto& [name, module] : kModules) {
      SCOPED_TRACE(name);
      const Unpacked u = unpack(*q.find(name));
      EXPECT_EQ(as_u32(*f->find(std::string(module) + ".qweight")), autoawq_pack(u.codes, u.in, u.out));
      EXPECT_EQ(as_u32(*f->find(std::string(module) + ".qzeros")), autoawq_pack(u.zeros, u.groups, u.out));
      EXPECT_EQ(as_f16_values(*f->find(std::string(module) + ".scales")), u.scales);
    }
  }
}

}  // namespace
}  // namespace peregrine
