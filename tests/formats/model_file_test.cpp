// llama_tensor_shape (the canonical layout's shapes) and tokenizer_file_of (where a model's
// tokenizer lives) on stories260K's config and folders.
#include <gtest/gtest.h>

#include <filesystem>

#include "peregrine/formats/model_file.h"
#include "peregrine/formats/model_writer.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "test_files.h"
#include "test_models.h"

namespace peregrine {
namespace {

using Shape = std::vector<std::int64_t>;

TEST(ModelFile, CanonicalTensorShapesFollowTheConfig) {
  auto m = load_model_file(test::stories260k_path());
  ASSERT_TRUE(m) << m.status().message();
  const ModelConfig& c = m->config;  // dim 64, 8 heads, 4 KV heads of 8, ffn 172, vocab 512, 5 layers
  EXPECT_EQ(llama_tensor_shape(c, "token_embd.weight"), (Shape{512, 64}));
  EXPECT_EQ(llama_tensor_shape(c, "output.weight"), (Shape{512, 64}));
  EXPECT_EQ(llama_tensor_shape(c, "output_norm.weight"), (Shape{64}));
  EXPECT_EQ(llama_tensor_shape(c, "blk.4.attn_k.weight"), (Shape{32, 64}));
  EXPECT_EQ(llama_tensor_shape(c, "blk.0.attn_output.weight"), (Shape{64, 64}));
  EXPECT_EQ(llama_tensor_shape(c, "blk.2.ffn_down.weight"), (Shape{64, 172}));
  EXPECT_EQ(llama_tensor_shape(c, "blk.2.ffn_up.weight"), (Shape{172, 64}));
  EXPECT_EQ(llama_tensor_shape(c, "blk.3.ffn_norm.weight"), (Shape{64}));
  EXPECT_EQ(llama_tensor_shape(c, "blk.0.attn_q.bias"), (Shape{64}));  // the families' additions
  EXPECT_EQ(llama_tensor_shape(c, "blk.0.attn_v.bias"), (Shape{32}));
  EXPECT_EQ(llama_tensor_shape(c, "blk.1.attn_k_norm.weight"), (Shape{8}));
  EXPECT_EQ(llama_tensor_shape(c, "rope_freqs.weight"), (Shape{4}));
  for (const auto& [name, t] : m->tensors) EXPECT_EQ(llama_tensor_shape(c, name), t.shape) << name;
  for (const char* bad : {"blk.5.attn_q.weight", "blk.01.attn_q.weight", "blk..attn_q.weight", "blk.0.attn_output.bias",
                          "blk.0.attn_q", "model.norm.weight", ""}) {
    EXPECT_FALSE(llama_tensor_shape(c, bad)) << bad;
  }
}

TEST(ModelFile, TokenizerFileOfEachFormat) {
  auto bin = load_model_file(test::stories260k_path());
  ASSERT_TRUE(bin);
  auto tok = tokenizer_file_of(*bin);
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ(std::filesystem::path(*tok).filename(), "tok512.bin");

  // A checkpoint alone in a folder, and an HF folder without a tokenizer: kNotFound, and
  // load_tokenizer says the same with the --tokenizer hint.
  test::TempDir dir;
  std::filesystem::copy_file(test::stories260k_path(), dir.file("m.bin"));
  auto lonely = load_model_file(dir.file("m.bin"));
  ASSERT_TRUE(lonely) << lonely.status().message();
  EXPECT_EQ(tokenizer_file_of(*lonely).status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(save_hf_model(*bin, dir.file("hf"), HfQuantLayout::kGptq, *tok).is_ok());
  std::filesystem::remove(dir.file("hf/tokenizer.bin"));
  auto hf = load_model_file(dir.file("hf"));
  ASSERT_TRUE(hf) << hf.status().message();
  const auto missing = tokenizer_file_of(*hf);
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.status().message().find("tokenizer.gguf"), std::string::npos) << missing.status().message();
  const auto none = load_tokenizer(*hf);
  EXPECT_EQ(none.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(none.status().message().find("--tokenizer"), std::string::npos) << none.status().message();
}

}  // namespace
}  // namespace peregrine
