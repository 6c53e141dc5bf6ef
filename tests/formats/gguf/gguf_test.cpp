#include "peregrine/formats/gguf/gguf.h"

#include <gtest/gtest.h>

#include "peregrine/formats/model_file.h"
#include "test_paths.h"

namespace peregrine {
namespace {

TEST(Gguf, ReadsStories260KMetadataAndTensors) {
  auto g = GgufFile::open(test::shared_dir() + "/models/stories260K/stories260K.gguf");
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(*g->get_string("general.architecture"), "llama");
  EXPECT_EQ(*g->get_int("llama.embedding_length"), 64);
  auto tokens = g->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens);
  EXPECT_EQ(tokens->size(), 512u);
}

TEST(ModelFile, GgufAndLlama2cAgreeOnConfig) {
  auto a = load_model_file(test::shared_dir() + "/models/stories260K/stories260K.gguf");
  auto b = load_model_file(test::shared_dir() + "/models/stories260K/stories260K.bin");
  ASSERT_TRUE(a) << a.status().message();
  ASSERT_TRUE(b) << b.status().message();
  EXPECT_EQ(a->config.dim, 64);
  EXPECT_EQ(a->config.n_layers, 5);
  EXPECT_EQ(a->config.n_heads, 8);
  EXPECT_EQ(a->config.n_kv_heads, 4);
  EXPECT_EQ(a->config.ffn_dim, 172);
  EXPECT_EQ(a->config.vocab_size, 512);
  EXPECT_EQ(b->config.dim, a->config.dim);
  EXPECT_EQ(b->config.n_kv_heads, a->config.n_kv_heads);
  EXPECT_EQ(b->config.ffn_dim, a->config.ffn_dim);
  EXPECT_TRUE(b->config.tied_embeddings);
  EXPECT_EQ(b->tensors.size(), 2u + 9u * 5u);  // tied: no output.weight
}

}  // namespace
}  // namespace peregrine
