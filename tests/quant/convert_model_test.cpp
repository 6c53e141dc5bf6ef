// convert_model_weights on the real stories260K: which tensors change, the F16 fallback for
// rows of 172 values, bytes equal to quantize_rtn of the original rows, refusal to re-quantize;
// llama.cpp's quantized GGUFs (K-quants, IQ4, Q4_1..Q5_1) and int rows decoded exactly to f32.
#include "peregrine/quant/convert_model.h"

#include <gtest/gtest.h>

#include <cstring>

#include "peregrine/model/llama_model.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/int_group.h"
#include "peregrine/quant/quantize_rtn.h"
#include "test_paths.h"

namespace peregrine {
namespace {

ModelFile stories() {
  auto m = load_model_file(test::shared_dir() + "/models/stories260K/stories260K.gguf");
  EXPECT_TRUE(m) << m.status().message();
  return std::move(*m);
}

std::vector<std::string> ffn_down_names() {
  std::vector<std::string> names;
  for (int l = 0; l < 5; ++l) names.push_back(layer_tensor_name(l, "ffn_down"));
  return names;
}

/// quantize_rtn of every row of `original` (an F32 view) must equal `converted`'s bytes.
void expect_rows_encoded(const TensorView& original, const TensorView& converted) {
  const auto n = static_cast<std::size_t>(original.row_length());
  const std::size_t row_bytes = *dtype_row_bytes(converted.dtype, n);
  ASSERT_EQ(converted.nbytes, row_bytes * static_cast<std::size_t>(original.n_rows()));
  std::vector<std::uint8_t> want(row_bytes);
  for (std::int64_t r = 0; r < original.n_rows(); ++r) {
    const auto* row = static_cast<const float*>(original.data) + static_cast<std::size_t>(r) * n;
    quantize_rtn(converted.dtype, {row, n}, want.data());
    ASSERT_EQ(std::memcmp(static_cast<const std::uint8_t*>(converted.data) + static_cast<std::size_t>(r) * row_bytes,
                          want.data(), row_bytes), 0)
        << converted.name << " row " << r;
  }
}

TEST(ConvertModel, MatrixDtypeFallsBackToF16ForPartialBlocks) {
  EXPECT_EQ(matrix_dtype_for(DType::kQ8_0, 64), DType::kQ8_0);
  EXPECT_EQ(matrix_dtype_for(DType::kQ4_0, 172), DType::kF16);
  EXPECT_EQ(matrix_dtype_for(DType::kBF16, 172), DType::kBF16);
}

TEST(ConvertModel, Q8_0ConvertsEveryMatrixAndFallsBackOnFfnDown) {
  const ModelFile original = stories();
  ModelFile m = stories();
  const std::size_t mappings = m.storage.size();
  ThreadPool pool(2);
  auto fell_back = convert_model_weights(m, DType::kQ8_0, &pool);
  ASSERT_TRUE(fell_back) << fell_back.status().message();
  EXPECT_EQ(*fell_back, ffn_down_names());
  std::size_t converted = 0;
  for (const auto& [name, t] : m.tensors) {
    const TensorView& o = *original.find(name);
    if (t.shape.size() == 1) {
      EXPECT_EQ(t.dtype, DType::kF32) << name;  // norms untouched, still in the mapping
      EXPECT_EQ(t.nbytes, o.nbytes);
      continue;
    }
    const bool is_down = name.find("ffn_down") != std::string::npos;
    EXPECT_EQ(t.dtype, is_down ? DType::kF16 : DType::kQ8_0) << name;
    expect_rows_encoded(o, t);
    ++converted;
  }
  EXPECT_EQ(converted, 2u + 7u * 5u);  // token_embd, output (this GGUF stores it) + 7 per layer
  EXPECT_EQ(m.storage.size(), mappings + converted);
  EXPECT_TRUE(LlamaModel::create(std::move(m)));
}

TEST(ConvertModel, ThreadedAndSingleThreadedGiveTheSameBytes) {
  ModelFile a = stories(), b = stories();
  ThreadPool pool(2);
  ASSERT_TRUE(convert_model_weights(a, DType::kQ4_0, &pool));
  ASSERT_TRUE(convert_model_weights(b, DType::kQ4_0));
  for (const auto& [name, t] : a.tensors) {
    const TensorView& u = *b.find(name);
    ASSERT_EQ(t.nbytes, u.nbytes) << name;
    EXPECT_EQ(std::memcmp(t.data, u.data, t.nbytes), 0) << name;
  }
}

TEST(ConvertModel, HalfToF32UpconvertsExactly) {
  ModelFile m = stories();
  ASSERT_TRUE(convert_model_weights(m, DType::kBF16));
  ModelFile bf16_copy = stories();
  ASSERT_TRUE(convert_model_weights(bf16_copy, DType::kBF16));
  auto fell_back = convert_model_weights(m, DType::kF32);
  ASSERT_TRUE(fell_back) << fell_back.status().message();
  EXPECT_TRUE(fell_back->empty());
  const TensorView& f32 = *m.find("blk.2.attn_q.weight");
  const TensorView& bf16 = *bf16_copy.find("blk.2.attn_q.weight");
  ASSERT_EQ(f32.dtype, DType::kF32);
  std::vector<float> want(static_cast<std::size_t>(bf16.numel()));
  dequantize(DType::kBF16, bf16.data, want);
  EXPECT_EQ(std::memcmp(f32.data, want.data(), f32.nbytes), 0);
}

TEST(ConvertModel, SameDtypeLeavesTheMappingInPlace) {
  ModelFile m = stories();
  const void* before = m.find("token_embd.weight")->data;
  ASSERT_TRUE(convert_model_weights(m, DType::kF32));
  EXPECT_EQ(m.find("token_embd.weight")->data, before);
}

TEST(ConvertModel, RefusesAnAlreadyQuantizedModel) {
  ModelFile m = stories();
  ASSERT_TRUE(convert_model_weights(m, DType::kQ4_0));
  auto again = convert_model_weights(m, DType::kQ8_0);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(again.status().message().find("already quantized"), std::string::npos) << again.status().message();
  EXPECT_NE(again.status().message().find("q4_0"), std::string::npos) << again.status().message();
}

/// Every 2-D tensor of `converted` is F32 and equals dequantize_row of `original`'s, bit for bit.
void expect_decoded_exactly(const ModelFile& original, const ModelFile& converted) {
  for (const auto& [name, o] : original.tensors) {
    const TensorView& t = *converted.find(name);
    if (o.shape.size() != 2) {
      ASSERT_EQ(t.dtype, o.dtype) << name;  // norms untouched
      EXPECT_EQ(std::memcmp(t.data, o.data, o.nbytes), 0) << name;
      continue;
    }
    ASSERT_EQ(t.dtype, DType::kF32) << name;
    const auto n = static_cast<std::size_t>(o.row_length());
    ASSERT_EQ(t.nbytes, n * sizeof(float) * static_cast<std::size_t>(o.n_rows())) << name;
    std::vector<float> want(n);
    for (std::int64_t r = 0; r < o.n_rows(); ++r) {
      dequantize_row(o, r, want);
      ASSERT_EQ(std::memcmp(static_cast<const float*>(t.data) + static_cast<std::size_t>(r) * n, want.data(), n * sizeof(float)), 0)
          << name << " row " << r;
    }
  }
}

TEST(ConvertModel, GgufBlockQuantsDecodeExactlyToF32) {
  // llama.cpp's files, mixes included (Q4_K_M holds q4_k and q6_k matrices).
  ThreadPool pool(2);
  for (const std::string type : {"Q4_K_M", "IQ4_XS", "Q2_K", "Q3_K_L", "Q5_K_S", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "Q8_0"}) {
    SCOPED_TRACE(type);
    const std::string path = test::shared_dir() + "/models/kquant-test/tiny-llama-256." + type + ".gguf";
    auto original = load_model_file(path);
    ASSERT_TRUE(original) << original.status().message();
    auto converted = load_model_file(path);
    ASSERT_TRUE(converted);
    auto fell_back = convert_model_weights(*converted, DType::kF32, &pool);
    ASSERT_TRUE(fell_back) << fell_back.status().message();
    EXPECT_TRUE(fell_back->empty());
    expect_decoded_exactly(*original, *converted);
    EXPECT_TRUE(LlamaModel::create(std::move(*converted)));
  }
}

TEST(ConvertModel, GroupWiseIntDecodesExactlyToF32) {
  ModelFile original = stories();
  TensorView& q = original.tensors.at("blk.0.attn_q.weight");  // one F32 matrix made int4 g32
  QuantParams p;
  p.bits = 4;
  p.group_size = 32;
  auto buf = std::make_shared<std::vector<std::uint8_t>>(quantize_int_rtn(
      {static_cast<const float*>(q.data), static_cast<std::size_t>(q.numel())}, q.n_rows(), q.row_length(), p));
  q.dtype = DType::kInt;
  q.quant = p;
  q.data = buf->data();
  q.nbytes = buf->size();
  original.storage.push_back(buf);
  ModelFile converted = original;
  auto refused = convert_model_weights(converted, DType::kQ8_0);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("'blk.0.attn_q.weight' is int4 g32"), std::string::npos) << refused.status().message();
  ASSERT_TRUE(convert_model_weights(converted, DType::kF32));
  expect_decoded_exactly(original, converted);
  EXPECT_EQ(converted.find("blk.0.attn_q.weight")->quant, QuantParams{});
}

TEST(ConvertModel, OnlyTheRtnFormatsAreTargets) {
  ModelFile m = stories();
  for (DType t : {DType::kQ4_K, DType::kIQ4_XS, DType::kInt, DType::kI8, DType::kF8E4M3}) {
    auto r = convert_model_weights(m, t);
    ASSERT_FALSE(r) << dtype_name(t);
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(convert_target_dtypes().size(), 6u);  // f32, f16, bf16, q8_0, q4_0, nf4
}

}  // namespace
}  // namespace peregrine
