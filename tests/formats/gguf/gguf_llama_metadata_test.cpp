// add_llama_metadata / copy_tokenizer_metadata: stories260K rewritten from its ModelConfig
// loads back with the same hyper-parameters and tokenizer.
#include "peregrine/formats/gguf/gguf_llama_metadata.h"

#include <gtest/gtest.h>

#include "peregrine/tokenizer/tokenizer.h"
#include "formats/test_files.h"

namespace peregrine {
namespace {

TEST(GgufLlamaMetadata, ConfigAndTokenizerRoundTrip) {
  const std::string src = test::shared_dir() + "/models/stories260K/stories260K.gguf";
  auto orig = load_model_file(src);
  ASSERT_TRUE(orig) << orig.status().message();
  test::TempDir dir;
  GgufWriter w;
  ASSERT_TRUE(add_llama_metadata(w, "copy", orig->config, DType::kF32).is_ok());
  ASSERT_TRUE(copy_tokenizer_metadata(w, src, orig->config.vocab_size).is_ok());
  for (const auto& [name, t] : orig->tensors) ASSERT_TRUE(w.add_tensor(name, t.dtype, t.shape).is_ok());
  ASSERT_TRUE(w.begin(dir.file("m.gguf")).is_ok());
  for (const auto& [name, t] : orig->tensors) {
    ASSERT_TRUE(w.write_tensor_data({static_cast<const std::uint8_t*>(t.data), t.nbytes}).is_ok());
  }
  ASSERT_TRUE(w.finish().is_ok());

  auto m = load_model_file(dir.file("m.gguf"));
  ASSERT_TRUE(m) << m.status().message();
  const ModelConfig &a = orig->config, &b = m->config;
  EXPECT_EQ(b.dim, a.dim);
  EXPECT_EQ(b.n_layers, a.n_layers);
  EXPECT_EQ(b.n_heads, a.n_heads);
  EXPECT_EQ(b.n_kv_heads, a.n_kv_heads);
  EXPECT_EQ(b.head_dim, a.head_dim);
  EXPECT_EQ(b.ffn_dim, a.ffn_dim);
  EXPECT_EQ(b.vocab_size, a.vocab_size);
  EXPECT_EQ(b.max_seq_len, a.max_seq_len);
  EXPECT_EQ(b.rms_eps, a.rms_eps);
  EXPECT_EQ(b.rope_theta, a.rope_theta);
  EXPECT_EQ(*m->gguf->get_string("general.name"), "copy");
  EXPECT_EQ(*m->gguf->get_int("general.file_type"), 0);
  EXPECT_EQ(m->gguf->find("general.quantization_version"), nullptr);
  auto tok = load_tokenizer(*m);
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ((*tok)->encode("Once upon a time", true), (std::vector<std::int32_t>{1, 403, 407, 261, 378}));
}

TEST(GgufLlamaMetadata, FileTypesAreLlamaCppsAndVocabSizeMustMatch) {
  EXPECT_EQ(llama_file_type(DType::kF32), 0u);
  EXPECT_EQ(llama_file_type(DType::kF16), 1u);
  EXPECT_EQ(llama_file_type(DType::kQ4_0), 2u);
  EXPECT_EQ(llama_file_type(DType::kQ8_0), 7u);
  EXPECT_EQ(llama_file_type(DType::kBF16), 32u);
  GgufWriter w;
  const Status st = copy_tokenizer_metadata(w, test::shared_dir() + "/models/stories260K/stories260K.gguf", 32000);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("has 512 tokens"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace peregrine
