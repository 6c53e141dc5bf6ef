// The training tests' teacher / target: stories260K, its f32 copy, the tokenized training text
// (tinystories_valid_excerpt.txt, BOS first) and held-out text (tinystories_sample.txt, BOS first).
#pragma once

#include <memory>
#include <vector>

#include "peregrine/model/llama_model.h"
#include "peregrine/quant/float_model.h"

namespace peregrine::test {

struct StoriesTeacher {
  std::unique_ptr<LlamaModel> teacher;
  FloatModel teacher_f32;
  std::vector<std::int32_t> text;
  std::int32_t bos;
  std::vector<std::int32_t> held_out;
};

/// Loads it; fails the calling test (EXPECT) on any error.
StoriesTeacher stories_teacher();

}  // namespace peregrine::test
