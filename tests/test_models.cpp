#include "test_models.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "peregrine/formats/model_file.h"
#include "test_paths.h"

namespace peregrine::test {

std::string stories260k_path() { return shared_dir() + "/models/stories260K/stories260K.bin"; }

namespace {

std::unique_ptr<LlamaModel> load_model(const std::string& path) {
  auto file = load_model_file(path);
  EXPECT_TRUE(file) << file.status().message();
  if (!file) return nullptr;
  auto m = LlamaModel::create(std::move(*file));
  EXPECT_TRUE(m) << m.status().message();
  if (!m) return nullptr;
  return std::make_unique<LlamaModel>(std::move(*m));
}

}  // namespace

std::unique_ptr<LlamaModel> load_stories260k() { return load_model(stories260k_path()); }

std::unique_ptr<LlamaModel> load_test_model(const std::string& name) { return load_model(testdata_dir() + "/" + name); }

KvCache make_kv_cache(const ModelConfig& config, std::int64_t n_tokens, std::int32_t n_seqs,
                      std::int32_t block_size, DType dtype) {
  const auto n_blocks = static_cast<std::int32_t>(n_seqs * blocks_for_tokens(n_tokens, block_size));
  auto cache = KvCache::create(config, {n_blocks, block_size, dtype});
  if (!cache) {
    ADD_FAILURE() << cache.status().message();
    std::abort();
  }
  return std::move(*cache);
}

}  // namespace peregrine::test
