// Issue #16 item 4's acceptance: quantize_model with a GGUF file type, written by save_gguf_model,
// gives every tensor the ggml type and the bytes llama.cpp's `llama-quantize IN OUT TYPE` (c392e50,
// no imatrix) gave it in ../shared/models/kquant-test, for all 18 types made there (plus F32,
// which must reproduce the source). Also the option checks of the GGUF path.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "peregrine/core/thread_pool.h"
#include "peregrine/formats/gguf/gguf.h"
#include "peregrine/formats/model_writer.h"
#include "peregrine/quant/quantize_model.h"
#include "test_paths.h"

namespace peregrine {
namespace {

std::string kquant_file(const std::string& type) {
  return test::shared_dir() + "/models/kquant-test/tiny-llama-256." + (type == "F32" ? "f32" : type) + ".gguf";
}

const ModelFile& f32_source() {
  static const ModelFile m = [] {
    auto loaded = load_model_file(kquant_file("F32"));
    EXPECT_TRUE(loaded.has_value()) << loaded.status().message();
    return std::move(loaded).value();
  }();
  return m;
}

std::size_t differing_bytes(const TensorView& a, const TensorView& b) {
  if (a.nbytes != b.nbytes) return std::max(a.nbytes, b.nbytes);
  const auto* x = static_cast<const std::uint8_t*>(a.data);
  const auto* y = static_cast<const std::uint8_t*>(b.data);
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.nbytes; ++i) n += x[i] != y[i];
  return n;
}

class GgufFileTypeTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GgufFileTypeTest, EveryTensorHasLlamaQuantizesTypeAndBytes) {
  const std::string type = GetParam();
  const auto file_type = gguf_file_type_from_name(type);
  ASSERT_TRUE(file_type.has_value());
  QuantizeOptions o;
  o.gguf_type = file_type;
  ThreadPool pool(2);
  auto q = quantize_model(f32_source(), nullptr, o, pool);
  ASSERT_TRUE(q.has_value()) << q.status().message();
  const std::string path = test::make_temp_dir() + "/q.gguf";
  ASSERT_TRUE(save_gguf_model(*q, path, "", llama_ftype_id(*file_type)).is_ok());

  auto mine = GgufFile::open(path);
  auto ref = GgufFile::open(kquant_file(type));
  ASSERT_TRUE(mine.has_value()) << mine.status().message();
  ASSERT_TRUE(ref.has_value()) << ref.status().message();
  EXPECT_EQ(*mine->get_int("general.file_type"), *ref->get_int("general.file_type"));
  std::map<std::string, const TensorView*> ours;
  for (const TensorView& t : mine->tensors()) ours[t.name] = &t;
  ASSERT_EQ(ours.size(), ref->tensors().size());
  std::map<DType, int> by_dtype;
  for (const TensorView& r : ref->tensors()) {
    SCOPED_TRACE(r.name);
    const auto it = ours.find(r.name);
    ASSERT_NE(it, ours.end());
    const TensorView& t = *it->second;
    EXPECT_EQ(dtype_name(t.dtype), dtype_name(r.dtype));
    EXPECT_EQ(t.shape, r.shape);
    EXPECT_EQ(differing_bytes(t, r), 0u) << "of " << r.nbytes << " bytes (" << dtype_name(r.dtype) << ")";
    ++by_dtype[t.dtype];
  }
  std::printf("[ gguf-type ] %-7s byte-identical with llama-quantize:", type.c_str());
  for (const auto& [d, n] : by_dtype) std::printf(" %s %d", std::string(dtype_name(d)).c_str(), n);
  std::printf("\n");
}

INSTANTIATE_TEST_SUITE_P(KquantTest, GgufFileTypeTest,
                         ::testing::Values("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S",
                                           "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL",
                                           "IQ4_XS"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

TEST(GgufFileType, AnotherMethodIsRejected) {
  QuantizeOptions o;
  o.gguf_type = GgufFileType::kQ4_K_M;
  o.method = QuantMethod::kGptq;
  const Status st = o.validate();
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--method rtn"), std::string::npos) << st.message();
}

TEST(GgufFileType, AlreadyQuantizedInputIsRejected) {
  auto q4 = load_model_file(kquant_file("Q4_0"));
  ASSERT_TRUE(q4.has_value()) << q4.status().message();
  QuantizeOptions o;
  o.gguf_type = GgufFileType::kQ4_K_M;
  ThreadPool pool(1);
  auto q = quantize_model(*q4, nullptr, o, pool);
  ASSERT_FALSE(q.has_value());
  EXPECT_EQ(q.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(q.status().message().find("already"), std::string::npos) << q.status().message();
}

}  // namespace
}  // namespace peregrine
