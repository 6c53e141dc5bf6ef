// Issue #16's decoding truth: every tensor of every file in ../shared/models/kquant-test (made by
// llama.cpp's llama-quantize in 18 weight types) decodes to f32 values whose SHA-256 equals that
// of llama.cpp's own dequantization (dequant-sha256.tsv), bit for bit.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "peregrine/formats/gguf/gguf.h"
#include "peregrine/quant/dequantize.h"
#include "test_paths.h"

namespace peregrine {
namespace {

std::string kquant_dir() { return test::shared_dir() + "/models/kquant-test"; }

std::string sha256_hex(const std::vector<float>& v) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(v.data(), v.size() * sizeof(float), digest, &len, EVP_sha256(), nullptr);
  std::string hex;
  char buf[3];
  for (unsigned int i = 0; i < len; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", digest[i]);
    hex += buf;
  }
  return hex;
}

struct Expected {
  std::string ggml_type;
  std::size_t values;
  std::string sha256;
};

// file → tensor → expected decoding.
std::map<std::string, std::map<std::string, Expected>> load_table() {
  std::map<std::string, std::map<std::string, Expected>> table;
  std::ifstream in(kquant_dir() + "/dequant-sha256.tsv");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string file, tensor, type, values, sha;
    std::getline(fields, file, '\t');
    std::getline(fields, tensor, '\t');
    std::getline(fields, type, '\t');
    std::getline(fields, values, '\t');
    std::getline(fields, sha, '\t');
    table[file][tensor] = {type, std::stoull(values), sha};
  }
  return table;
}

TEST(GgmlDequantizeTest, EveryTensorOfEveryKquantTestFileHashesAsLlamaCpp) {
  const auto table = load_table();
  ASSERT_EQ(table.size(), 18u) << "dequant-sha256.tsv lists the 18 quantized files";
  std::map<std::string, int> tensors_by_dtype;
  for (const auto& [file, tensors] : table) {
    SCOPED_TRACE(file);
    auto gguf = GgufFile::open(kquant_dir() + "/" + file);
    ASSERT_TRUE(gguf.has_value()) << gguf.status().message();
    ASSERT_EQ(gguf->tensors().size(), tensors.size());
    for (const TensorView& t : gguf->tensors()) {
      SCOPED_TRACE(t.name);
      const auto it = tensors.find(t.name);
      ASSERT_NE(it, tensors.end());
      ASSERT_EQ(static_cast<std::size_t>(t.numel()), it->second.values);
      std::vector<float> values(static_cast<std::size_t>(t.numel()));
      const std::size_t n = static_cast<std::size_t>(t.row_length());
      for (std::int64_t r = 0; r < t.n_rows(); ++r) {
        dequantize_row(t, r, std::span<float>(values).subspan(static_cast<std::size_t>(r) * n, n));
      }
      EXPECT_EQ(sha256_hex(values), it->second.sha256) << it->second.ggml_type << " first value " << values[0];
      ++tensors_by_dtype[std::string(dtype_name(t.dtype))];
    }
  }
  // Every weight type of the issue was met (and the old ones).
  for (const char* name : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "q2_k", "q3_k",
                           "q4_k", "q5_k", "q6_k", "iq4_xs"}) {
    EXPECT_GT(tensors_by_dtype[name], 0) << name;
  }
}

}  // namespace
}  // namespace peregrine
