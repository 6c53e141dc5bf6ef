// SafetensorsWriter: F32/F16/BF16 tensors and metadata read back byte for byte by
// SafetensorsFile (which checks that they tile the data buffer); Q8_0/Q4_0 refused.
#include "peregrine/formats/safetensors/safetensors_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "peregrine/formats/safetensors/safetensors.h"
#include "formats/test_files.h"

namespace peregrine {
namespace {

using test::Bytes;

TEST(SafetensorsWriter, RoundTripsTensorsAndMetadata) {
  struct T {
    std::string name;
    DType dtype;
    std::vector<std::int64_t> shape;
    Bytes data;
  };
  std::mt19937 rng(3);
  auto bytes = [&rng](std::size_t n) {
    Bytes b(n);
    for (auto& x : b) x = static_cast<std::uint8_t>(rng());
    return b;
  };
  const std::vector<T> tensors = {{"model.z", DType::kF32, {3, 5}, bytes(60)},
                                  {"model.a", DType::kF16, {7}, bytes(14)},
                                  {"lm_head.weight", DType::kBF16, {2, 1, 3}, bytes(12)}};
  test::TempDir dir;
  const std::string path = dir.file("model.safetensors");
  SafetensorsWriter w;
  w.add_metadata("format", "pt");
  for (const auto& t : tensors) ASSERT_TRUE(w.add_tensor(t.name, t.dtype, t.shape).is_ok());
  ASSERT_TRUE(w.begin(path).is_ok());
  for (const auto& t : tensors) ASSERT_TRUE(w.write_tensor_data(t.data).is_ok());
  ASSERT_TRUE(w.finish().is_ok());

  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->metadata().at("format"), "pt");
  ASSERT_EQ(f->tensors().size(), tensors.size());
  for (const auto& t : tensors) {
    const SafetensorsTensor* v = f->find(t.name);
    ASSERT_NE(v, nullptr) << t.name;
    EXPECT_EQ(v->dtype, safetensors_dtype_of(t.dtype));
    EXPECT_EQ(v->shape, t.shape);
    ASSERT_EQ(v->nbytes, t.data.size());
    EXPECT_EQ(std::memcmp(v->data, t.data.data(), v->nbytes), 0) << t.name;
  }
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, test::read_bytes(path).data(), 8);
  EXPECT_EQ(header_len % 8, 0u);  // the data buffer starts 8-byte aligned
}

TEST(SafetensorsWriter, RefusesBlockQuantizedDtypes) {
  SafetensorsWriter w;
  for (DType t : {DType::kQ8_0, DType::kQ4_0}) {
    const Status st = w.add_tensor("w", t, {2, 32});
    EXPECT_EQ(st.code(), ErrorCode::kUnsupported);
    EXPECT_NE(st.message().find(std::string(dtype_name(t))), std::string::npos) << st.message();
  }
  EXPECT_EQ(w.add_tensor("__metadata__", DType::kF32, {1}).code(), ErrorCode::kInvalidArgument);
}

TEST(SafetensorsWriter, UnfinishedFileIsRemoved) {
  test::TempDir dir;
  const std::string path = dir.file("model.safetensors");
  {
    SafetensorsWriter w;
    ASSERT_TRUE(w.add_tensor("x", DType::kF32, {4}).is_ok());
    ASSERT_TRUE(w.begin(path).is_ok());
    EXPECT_TRUE(std::filesystem::exists(path));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace peregrine
