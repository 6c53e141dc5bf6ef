// Medusa head folders (spec/medusa_heads.h): a written folder reads back to the same values,
// and a folder for another model, a missing or damaged one, gives one clear error.
#include "peregrine/spec/medusa_heads.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "test_paths.h"

namespace peregrine {
namespace {

MedusaHeads random_heads(std::int64_t heads, std::int64_t layers, std::int64_t hidden, std::int64_t vocab) {
  MedusaHeads m{heads, layers, hidden, vocab, "stories260K.bin", {}};
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  for (const std::string& name : m.names()) {
    std::int64_t n = 1;
    for (std::int64_t d : m.shape(name)) n *= d;
    std::vector<float>& v = m.tensors[name];
    v.resize(static_cast<std::size_t>(n));
    for (float& x : v) x = normal(rng);
  }
  return m;
}

TEST(MedusaHeads, WrittenFolderReadsBackTheSameValues) {
  const std::string dir = test::make_temp_dir() + "/medusa";
  const MedusaHeads m = random_heads(3, 2, 64, 512);
  ASSERT_TRUE(save_medusa_heads(m, dir).is_ok());
  EXPECT_TRUE(std::filesystem::exists(dir + "/config.json"));
  auto back = load_medusa_heads(dir, 64, 512);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->heads, 3);
  EXPECT_EQ(back->layers, 2);
  EXPECT_EQ(back->base_model, "stories260K.bin");
  EXPECT_EQ(back->tensors, m.tensors);
  EXPECT_EQ(m.shape("2.2.weight"), (std::vector<std::int64_t>{512, 64}));
  EXPECT_EQ(m.shape("1.0.linear.bias"), (std::vector<std::int64_t>{64}));
  EXPECT_TRUE(m.shape("3.0.linear.weight").empty());
}

TEST(MedusaHeads, BadFoldersGiveOneClearError) {
  const std::string dir = test::make_temp_dir() + "/medusa";
  ASSERT_TRUE(save_medusa_heads(random_heads(2, 1, 64, 512), dir).is_ok());
  auto other = load_medusa_heads(dir, 2048, 32000);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("hidden size 64 and 512 tokens; the target has 2048 and 32000"), std::string::npos)
      << other.status().message();
  EXPECT_EQ(load_medusa_heads(dir + "/nowhere", 64, 512).status().code(), ErrorCode::kNotFound);
  std::ofstream(dir + "/config.json") << "{\"medusa_num_heads\": 5, \"medusa_num_layers\": 1}";
  EXPECT_EQ(load_medusa_heads(dir, 64, 512).status().code(), ErrorCode::kCorruptFile);  // heads 2..4 missing
  std::ofstream(dir + "/config.json") << "{not json";
  EXPECT_EQ(load_medusa_heads(dir, 64, 512).status().code(), ErrorCode::kCorruptFile);
  MedusaHeads short_one = random_heads(1, 1, 64, 512);
  short_one.tensors["0.1.weight"].pop_back();
  EXPECT_EQ(save_medusa_heads(short_one, dir + "/x").code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace peregrine
