#include "stories_teacher.h"

#include <gtest/gtest.h>

#include "peregrine/core/text_file.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine::test {

StoriesTeacher stories_teacher() {
  auto file = load_model_file(stories260k_path());
  EXPECT_TRUE(file) << file.status().message();
  auto tok = load_tokenizer(*file);
  EXPECT_TRUE(tok) << tok.status().message();
  auto text = read_text_file(shared_dir() + "/data/tinystories/tinystories_valid_excerpt.txt");
  EXPECT_TRUE(text) << text.status().message();
  auto held_out = read_text_file(shared_dir() + "/data/tinystories/tinystories_sample.txt");
  EXPECT_TRUE(held_out) << held_out.status().message();
  auto f = FloatModel::from(*file);
  EXPECT_TRUE(f);
  auto teacher = LlamaModel::create(*file);
  EXPECT_TRUE(teacher);
  return {std::make_unique<LlamaModel>(std::move(*teacher)), std::move(*f), (*tok)->encode(*text, true), (*tok)->bos_id(),
          (*tok)->encode(*held_out, true)};
}

}  // namespace peregrine::test
