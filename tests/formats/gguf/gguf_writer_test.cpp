// GgufWriter: every metadata type and tensor dtype written, read back by GgufFile byte for
// byte; a real model copied through it; and the errors (bad values, short or long tensor data,
// unwritable paths, partial files removed).
#include "peregrine/formats/gguf/gguf_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "peregrine/formats/gguf/gguf_model.h"
#include "formats/test_files.h"

namespace peregrine {
namespace {

using test::Bytes;

struct Tensor {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  Bytes data;
};

Bytes random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes b(n);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  return b;
}

Tensor random_tensor(std::string name, DType dtype, std::vector<std::int64_t> shape, std::uint32_t seed) {
  std::int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  const std::size_t n = *dtype_row_bytes(dtype, static_cast<std::uint64_t>(shape.back())) * static_cast<std::size_t>(rows);
  return {std::move(name), dtype, std::move(shape), random_bytes(n, seed)};
}

std::vector<Tensor> tensors_of_every_dtype() {
  return {random_tensor("a.f32", DType::kF32, {3, 7}, 1),  // 84 bytes: padded to 96
          random_tensor("b.f16", DType::kF16, {5}, 2),
          random_tensor("c.bf16", DType::kBF16, {2, 3, 9}, 3),
          random_tensor("d.q8_0", DType::kQ8_0, {4, 64}, 4),
          random_tensor("e.q4_0", DType::kQ4_0, {3, 96}, 5)};
}

std::map<std::string, GgufValue> metadata_of_every_type() {
  auto scalar = [](GgufType t, GgufScalar s) {
    GgufValue v;
    v.type = t;
    v.scalar = std::move(s);
    return v;
  };
  using U = std::uint64_t;
  using I = std::int64_t;
  return {
      {"t.u8", scalar(GgufType::kU8, U{255})},
      {"t.i8", scalar(GgufType::kI8, I{-128})},
      {"t.u16", scalar(GgufType::kU16, U{65535})},
      {"t.i16", scalar(GgufType::kI16, I{-32768})},
      {"t.u32", gguf_u32(4000000000u)},
      {"t.i32", gguf_i32(-2000000000)},
      {"t.u64", scalar(GgufType::kU64, U{1} << 60)},
      {"t.i64", scalar(GgufType::kI64, -(I{1} << 60))},
      {"t.f32", gguf_f32(0.1f)},
      {"t.f64", scalar(GgufType::kF64, 0.1)},
      {"t.bool", gguf_bool(true)},
      {"t.string", gguf_string("héllo\nworld")},
      {"t.empty_string", gguf_string("")},
      {"t.strings", gguf_array(GgufType::kString, {std::string("a"), std::string(""), std::string("▁the")})},
      {"t.f32s", gguf_array(GgufType::kF32, {-1.5, 0.0, 1e-3})},
      {"t.i32s", gguf_array(GgufType::kI32, {I{-1}, I{0}, I{2147483647}})},
      {"t.u32s", gguf_array(GgufType::kU32, {U{0}, U{4294967295u}})},
      {"t.empty_array", gguf_array(GgufType::kU8, {})},
  };
}

/// Writes `tensors` (each in two pieces when it has at least 2 bytes) after `metadata`.
Status write_file(const std::string& path, const std::map<std::string, GgufValue>& metadata,
                  const std::vector<Tensor>& tensors) {
  GgufWriter w;
  for (const auto& [k, v] : metadata) PEREGRINE_RETURN_IF_ERROR(w.add(k, v));
  for (const auto& t : tensors) PEREGRINE_RETURN_IF_ERROR(w.add_tensor(t.name, t.dtype, t.shape));
  PEREGRINE_RETURN_IF_ERROR(w.begin(path));
  for (const auto& t : tensors) {
    const std::span<const std::uint8_t> all(t.data);
    PEREGRINE_RETURN_IF_ERROR(w.write_tensor_data(all.first(t.data.size() / 2)));
    PEREGRINE_RETURN_IF_ERROR(w.write_tensor_data(all.subspan(t.data.size() / 2)));
  }
  return w.finish();
}

/// A float metadata value reads back as the f32 it was narrowed to.
GgufScalar as_written(GgufType t, const GgufScalar& s) {
  if (t == GgufType::kF32) return GgufScalar(static_cast<double>(static_cast<float>(std::get<double>(s))));
  return s;
}

TEST(GgufWriter, RoundTripsEveryMetadataTypeAndTensorDtype) {
  test::TempDir dir;
  const auto metadata = metadata_of_every_type();
  const auto tensors = tensors_of_every_dtype();
  ASSERT_TRUE(write_file(dir.file("t.gguf"), metadata, tensors).is_ok());

  auto g = GgufFile::open(dir.file("t.gguf"));
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(*g->get_int("general.alignment"), 32);
  EXPECT_EQ(g->metadata().size(), metadata.size() + 1);
  for (const auto& [key, want] : metadata) {
    const GgufValue* got = g->find(key);
    ASSERT_NE(got, nullptr) << key;
    EXPECT_EQ(got->type, want.type) << key;
    if (want.type == GgufType::kArray) {
      EXPECT_EQ(got->elem_type, want.elem_type) << key;
      ASSERT_EQ(got->array.size(), want.array.size()) << key;
      for (std::size_t i = 0; i < want.array.size(); ++i) EXPECT_EQ(got->array[i], as_written(want.elem_type, want.array[i])) << key;
    } else {
      EXPECT_EQ(got->scalar, as_written(want.type, want.scalar)) << key;
    }
  }
  ASSERT_EQ(g->tensors().size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorView& t = g->tensors()[i];
    EXPECT_EQ(t.name, tensors[i].name);
    EXPECT_EQ(t.dtype, tensors[i].dtype) << t.name;
    EXPECT_EQ(t.shape, tensors[i].shape) << t.name;
    ASSERT_EQ(t.nbytes, tensors[i].data.size()) << t.name;
    EXPECT_EQ(std::memcmp(t.data, tensors[i].data.data(), t.nbytes), 0) << t.name;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data) % 32, 0u) << t.name;  // mmap is page-aligned
  }
}

TEST(GgufWriter, CopiesARealModelThatLoadsWithTheSameTensors) {
  test::TempDir dir;
  auto src = GgufFile::open(test::shared_dir() + "/models/stories260K/stories260K.gguf");
  ASSERT_TRUE(src) << src.status().message();
  GgufWriter w;
  for (const auto& [k, v] : src->metadata()) {
    if (k != "general.alignment") {
      ASSERT_TRUE(w.add(k, v).is_ok()) << k;
    }
  }
  for (const auto& t : src->tensors()) ASSERT_TRUE(w.add_tensor(t.name, t.dtype, t.shape).is_ok());
  ASSERT_TRUE(w.begin(dir.file("copy.gguf")).is_ok());
  for (const auto& t : src->tensors()) {
    ASSERT_TRUE(w.write_tensor_data({static_cast<const std::uint8_t*>(t.data), t.nbytes}).is_ok());
  }
  ASSERT_TRUE(w.finish().is_ok());

  auto copy = load_model_file(dir.file("copy.gguf"));
  ASSERT_TRUE(copy) << copy.status().message();
  auto orig = load_model_file(test::shared_dir() + "/models/stories260K/stories260K.gguf");
  ASSERT_TRUE(orig);
  EXPECT_EQ(copy->config.dim, orig->config.dim);
  EXPECT_EQ(copy->config.rms_eps, orig->config.rms_eps);
  ASSERT_EQ(copy->tensors.size(), orig->tensors.size());
  for (const auto& [name, t] : orig->tensors) {
    const TensorView* c = copy->find(name);
    ASSERT_NE(c, nullptr) << name;
    ASSERT_EQ(c->nbytes, t.nbytes);
    EXPECT_EQ(std::memcmp(c->data, t.data, t.nbytes), 0) << name;
  }
  EXPECT_EQ(*copy->gguf->get_string_array("tokenizer.ggml.tokens"), *orig->gguf->get_string_array("tokenizer.ggml.tokens"));
}

TEST(GgufWriter, RejectsBadMetadata) {
  GgufWriter w;
  ASSERT_TRUE(w.add("a", gguf_u32(1)).is_ok());
  EXPECT_EQ(w.add("a", gguf_u32(2)).code(), ErrorCode::kInvalidArgument);  // duplicate
  EXPECT_EQ(w.add("general.alignment", gguf_u32(64)).code(), ErrorCode::kInvalidArgument);
  GgufValue too_big;
  too_big.type = GgufType::kU8;
  too_big.scalar = std::uint64_t{256};
  EXPECT_EQ(w.add("b", too_big).code(), ErrorCode::kInvalidArgument);
  GgufValue wrong_kind = gguf_u32(1);
  wrong_kind.scalar = std::string("x");
  EXPECT_EQ(w.add("c", wrong_kind).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(w.add("d", gguf_array(GgufType::kArray, {})).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(w.add("e", gguf_array(GgufType::kF32, {std::uint64_t{1}})).code(), ErrorCode::kInvalidArgument);
  GgufValue negative_unsigned = gguf_u32(0);
  negative_unsigned.scalar = std::int64_t{-1};
  EXPECT_EQ(w.add("f", negative_unsigned).code(), ErrorCode::kInvalidArgument);
}

TEST(GgufWriter, RejectsBadTensors) {
  GgufWriter w;
  ASSERT_TRUE(w.add_tensor("x", DType::kF32, {2, 3}).is_ok());
  EXPECT_EQ(w.add_tensor("x", DType::kF32, {2}).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(w.add_tensor("q", DType::kQ4_0, {2, 33}).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(w.add_tensor("z", DType::kF32, {0, 3}).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(w.add_tensor("", DType::kF32, {3}).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(w.add_tensor("s", DType::kF32, {}).code(), ErrorCode::kInvalidArgument);
}

TEST(GgufWriter, TooManyOrTooFewBytesAreErrorsAndLeaveNoFile) {
  test::TempDir dir;
  const std::string path = dir.file("short.gguf");
  {
    GgufWriter w;
    ASSERT_TRUE(w.add_tensor("x", DType::kF32, {4}).is_ok());
    ASSERT_TRUE(w.begin(path).is_ok());
    const Bytes five(20, 0);
    EXPECT_EQ(w.write_tensor_data(five).code(), ErrorCode::kInvalidArgument);
    ASSERT_TRUE(w.write_tensor_data(std::span(five).first(8)).is_ok());
    const Status st = w.finish();
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(st.message().find("'x' got 8 of its 16 bytes"), std::string::npos) << st.message();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(GgufWriter, UnwritablePathIsAnIoError) {
  GgufWriter w;
  const Status st = w.begin("/nonexistent-dir/x.gguf");
  EXPECT_EQ(st.code(), ErrorCode::kIoError);
  EXPECT_NE(st.message().find("/nonexistent-dir/x.gguf"), std::string::npos) << st.message();
}

TEST(GgufWriter, MetadataAfterBeginIsRejected) {
  test::TempDir dir;
  GgufWriter w;
  ASSERT_TRUE(w.begin(dir.file("x.gguf")).is_ok());
  EXPECT_EQ(w.add("late", gguf_u32(1)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(w.add_tensor("late", DType::kF32, {1}).code(), ErrorCode::kInvalidArgument);
  ASSERT_TRUE(w.finish().is_ok());
  EXPECT_TRUE(GgufFile::open(dir.file("x.gguf")));
}

}  // namespace
}  // namespace peregrine
