#include "test_models.h"

#include <gtest/gtest.h>

#include "peregrine/formats/model_file.h"
#include "test_paths.h"

namespace peregrine::test {

std::string stories260k_path() { return shared_dir() + "/models/stories260K/stories260K.bin"; }

std::unique_ptr<LlamaModel> load_stories260k() {
  auto file = load_model_file(stories260k_path());
  EXPECT_TRUE(file) << file.status().message();
  if (!file) return nullptr;
  auto m = LlamaModel::create(std::move(*file));
  EXPECT_TRUE(m) << m.status().message();
  if (!m) return nullptr;
  return std::make_unique<LlamaModel>(std::move(*m));
}

}  // namespace peregrine::test
