#include "peregrine/formats/safetensors/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "formats/safetensors/safetensors_writer.h"
#include "test_paths.h"

namespace peregrine {
namespace {

using test::Bytes;
using test::StTensor;

std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

Bytes u16_bytes(const std::vector<std::uint16_t>& v) {
  Bytes b(v.size() * 2);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

Expected<SafetensorsFile> parse(const Bytes& b) { return SafetensorsFile::parse(b, "test.safetensors"); }

/// Parses a file made from a raw header and data and expects an error of `code`.
void expect_error(const std::string& header, const Bytes& data, ErrorCode code,
                  const std::string& message_part) {
  const Bytes b = test::safetensors_from_header(header, data);
  auto f = parse(b);
  ASSERT_FALSE(f) << "accepted header " << header;
  EXPECT_EQ(f.status().code(), code) << f.status().message();
  EXPECT_NE(f.status().message().find(message_part), std::string::npos) << f.status().message();
}

TEST(Safetensors, ReadsF32F16BF16AndMetadata) {
  const auto a = random_floats(6, 1);
  const auto c = random_floats(4, 2);
  std::vector<std::uint16_t> b_half, c_bf16;
  for (float x : random_floats(3, 3)) b_half.push_back(test::to_f16(x));
  for (float x : c) c_bf16.push_back(test::to_bf16(x));
  const Bytes file = test::safetensors_bytes(
      {{"a", "F32", {2, 3}, test::f32_bytes(a)},
       {"b", "F16", {3}, u16_bytes(b_half)},
       {"c", "BF16", {2, 1, 2}, u16_bytes(c_bf16)},
       {"scalar", "F32", {}, test::f32_bytes({7.0f})},
       {"empty", "F32", {0, 4}, {}}},
      {{"format", "pt"}});
  test::TempDir dir;
  test::write_bytes(dir.file("m.safetensors"), file);
  auto f = SafetensorsFile::open(dir.file("m.safetensors"));
  ASSERT_TRUE(f) << f.status().message();
  ASSERT_EQ(f->tensors().size(), 5u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  ASSERT_NE(f->file(), nullptr);

  const SafetensorsTensor* ta = f->find("a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->dtype, SafetensorsDtype::kF32);
  EXPECT_EQ(ta->shape, (std::vector<std::int64_t>{2, 3}));
  ASSERT_EQ(ta->nbytes, 24u);
  EXPECT_EQ(std::memcmp(ta->data, a.data(), 24), 0);
  const auto* mapped = ta->data;
  EXPECT_TRUE(mapped >= f->file()->data() && mapped + ta->nbytes <= f->file()->data() + f->file()->size());

  const SafetensorsTensor* tb = f->find("b");
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(tb->dtype, SafetensorsDtype::kF16);
  EXPECT_EQ(std::memcmp(tb->data, b_half.data(), 6), 0);
  const SafetensorsTensor* tc = f->find("c");
  ASSERT_NE(tc, nullptr);
  EXPECT_EQ(tc->dtype, SafetensorsDtype::kBF16);
  EXPECT_EQ(tc->shape, (std::vector<std::int64_t>{2, 1, 2}));
  EXPECT_EQ(std::memcmp(tc->data, c_bf16.data(), 8), 0);
  const SafetensorsTensor* ts = f->find("scalar");
  ASSERT_NE(ts, nullptr);
  EXPECT_TRUE(ts->shape.empty());
  EXPECT_EQ(ts->nbytes, 4u);
  const SafetensorsTensor* te = f->find("empty");
  ASSERT_NE(te, nullptr);
  EXPECT_EQ(te->nbytes, 0u);
  EXPECT_EQ(f->find("missing"), nullptr);
}

TEST(Safetensors, EmptyHeaderIsValid) {
  auto f = parse(test::safetensors_from_header("{}", {}));
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_TRUE(f->tensors().empty());
}

TEST(Safetensors, RejectsBadHeaderLength) {
  Bytes b = test::safetensors_bytes({{"a", "F32", {1}, test::f32_bytes({1.0f})}});
  test::poke(b, 0, std::uint64_t{kMaxSafetensorsHeaderBytes + 1});
  auto f = parse(b);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.status().code(), ErrorCode::kCorruptFile);
  EXPECT_NE(f.status().message().find("limit"), std::string::npos);
  test::poke(b, 0, std::uint64_t{1000});
  f = parse(b);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.status().code(), ErrorCode::kCorruptFile);
  EXPECT_NE(f.status().message().find("past the end"), std::string::npos);
  f = parse(Bytes{1, 2, 3});
  ASSERT_FALSE(f);
  EXPECT_EQ(f.status().code(), ErrorCode::kCorruptFile);
}

TEST(Safetensors, RejectsMalformedJson) {
  const Bytes four = test::f32_bytes({1.0f});
  expect_error("[1, 2]", {}, ErrorCode::kCorruptFile, "'{'");
  expect_error("{\"a\": ", {}, ErrorCode::kCorruptFile, "malformed JSON");
  expect_error("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
               " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
               four, ErrorCode::kCorruptFile, "duplicate");
  expect_error("{\"a\": {\"dtype\": \"F32\", \"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
               four, ErrorCode::kCorruptFile, "duplicate");
  expect_error("{\"a\": [[[[1]]]]}", {}, ErrorCode::kCorruptFile, "nested");
}

TEST(Safetensors, RejectsIllTypedEntries) {
  const Bytes four = test::f32_bytes({1.0f});
  expect_error(R"({"a": 3})", four, ErrorCode::kCorruptFile, "expected an object");
  expect_error(R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", four, ErrorCode::kCorruptFile, "dtype");
  expect_error(R"({"a": {"dtype": 1, "shape": [1], "data_offsets": [0, 4]}})", four, ErrorCode::kCorruptFile, "dtype");
  expect_error(R"({"a": {"dtype": "F32", "shape": 1, "data_offsets": [0, 4]}})", four, ErrorCode::kCorruptFile, "shape");
  expect_error(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", four, ErrorCode::kCorruptFile, "data_offsets");
  expect_error(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})", four, ErrorCode::kCorruptFile, "data_offsets");
  expect_error(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4.0]}})", four, ErrorCode::kCorruptFile, "data_offsets");
  expect_error(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", four, ErrorCode::kCorruptFile, "non-negative");
  expect_error(R"({"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", four, ErrorCode::kCorruptFile, "non-negative");
  expect_error(R"({"a": {"dtype": "F32", "shape": ["1"], "data_offsets": [0, 4]}})", four, ErrorCode::kCorruptFile, "non-negative");
  expect_error(R"({"__metadata__": {"k": 1}})", {}, ErrorCode::kCorruptFile, "__metadata__");
  expect_error(R"({"__metadata__": [1]})", {}, ErrorCode::kCorruptFile, "__metadata__");
}

TEST(Safetensors, RejectsInconsistentSizesAndOffsets) {
  const Bytes eight = test::f32_bytes({1.0f, 2.0f});
  // shape × dtype ≠ end - begin
  expect_error(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", eight, ErrorCode::kCorruptFile, "needs 12");
  // overflowing shapes
  expect_error(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})", eight,
               ErrorCode::kCorruptFile, "overflow");
  expect_error(R"({"a": {"dtype": "F32", "shape": [4294967296, 2147483648, 0], "data_offsets": [0, 0]}})", eight,
               ErrorCode::kCorruptFile, "overflow");
  expect_error(R"({"a": {"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 8]}})", eight,
               ErrorCode::kCorruptFile, "overflow");
  expect_error(R"({"a": {"dtype": "F32", "shape": [18446744073709551615], "data_offsets": [0, 8]}})", eight,
               ErrorCode::kCorruptFile, "overflow");
  // reversed, past the end, overlap, hole, trailing bytes
  expect_error(R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", eight, ErrorCode::kCorruptFile, "reversed");
  expect_error(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}})", eight, ErrorCode::kCorruptFile, "past the end");
  expect_error(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [18446744073709551612, 0]}})", eight,
               ErrorCode::kCorruptFile, "data_offsets");
  expect_error(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                   "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", eight, ErrorCode::kCorruptFile, "overlapping");
  expect_error(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", eight, ErrorCode::kCorruptFile, "hole");
  expect_error(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", eight, ErrorCode::kCorruptFile, "trailing");
}

TEST(Safetensors, UnsupportedDtypesAreNamed) {
  const Bytes eight = test::f32_bytes({1.0f, 2.0f});
  expect_error(R"({"a": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", eight, ErrorCode::kUnsupported, "I64");
  expect_error(R"({"a": {"dtype": "F8_E8M0", "shape": [8], "data_offsets": [0, 8]}})", eight, ErrorCode::kUnsupported, "F8_E8M0");
  expect_error(R"({"a": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", eight, ErrorCode::kUnsupported, "F64");
  expect_error(R"({"a": {"dtype": "f32", "shape": [2], "data_offsets": [0, 8]}})", eight, ErrorCode::kUnsupported,
               "not a safetensors dtype");
}

TEST(Safetensors, MessagesStayOnOneLine) {
  const Bytes four = test::f32_bytes({1.0f});
  const Bytes b = test::safetensors_from_header(
      "{\"bad\\nname\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}", four);
  auto f = parse(b);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.status().message().find('\n'), std::string::npos) << f.status().message();
}

}  // namespace
}  // namespace peregrine

namespace peregrine {
namespace {

TEST(Safetensors, ReadsTheRawTypesOfQuantizedLayouts) {
  // GPTQ/AWQ's I32 qweight and W8A8 / FP8's I8 and F8 weights; none is a weight view by itself.
  const Bytes file = test::safetensors_bytes({{"qweight", "I32", {2, 3}, Bytes(24, 0x5a)},
                                              {"w8", "I8", {4}, Bytes{0x80, 0x7f, 0x00, 0x01}},
                                              {"e4m3", "F8_E4M3", {2, 2}, Bytes{1, 2, 3, 4}},
                                              {"e5m2", "F8_E5M2", {1}, Bytes{9}},
                                              {"f", "F32", {1}, test::f32_bytes({2.5f})}});
  auto f = parse(file);
  ASSERT_TRUE(f) << f.status().message();
  const std::pair<const char*, SafetensorsDtype> want[] = {{"qweight", SafetensorsDtype::kI32},
                                                           {"w8", SafetensorsDtype::kI8},
                                                           {"e4m3", SafetensorsDtype::kF8E4M3},
                                                           {"e5m2", SafetensorsDtype::kF8E5M2}};
  for (const auto& [name, dtype] : want) {
    const SafetensorsTensor* t = f->find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->dtype, dtype) << name;
    EXPECT_EQ(t->nbytes, static_cast<std::size_t>(t->numel()) * safetensors_dtype_bytes(dtype)) << name;
    EXPECT_FALSE(t->weight_view()) << name;
  }
  EXPECT_EQ(f->find("qweight")->data[23], 0x5a);
  const auto view = f->find("f")->weight_view();
  ASSERT_TRUE(view);
  EXPECT_EQ(view->dtype, DType::kF32);
  EXPECT_EQ(view->name, "f");
  // I32 sizes are checked like every other type.
  expect_error(R"({"a": {"dtype": "I32", "shape": [3], "data_offsets": [0, 8]}})", Bytes(8), ErrorCode::kCorruptFile,
               "needs 12");
}

}  // namespace
}  // namespace peregrine
