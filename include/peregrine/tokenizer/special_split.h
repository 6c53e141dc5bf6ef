// Splitting input text around tokens that must be matched verbatim (user-defined tokens).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "peregrine/tokenizer/vocab.h"

namespace peregrine {

/// A piece of the input: raw text to tokenize (token == -1) or one verbatim token id.
struct TextFragment {
  std::string_view text;
  std::int32_t token = -1;
};

/// Splits `text` at every occurrence of the vocabulary's user-defined tokens (with
/// `parse_special`, also of its control and unknown tokens), longest token first (then lower
/// id), each searched left to right in the raw text left by the longer ones — llama.cpp's
/// tokenizer_st_partition (parse_special=false never matches control and unknown tokens in
/// text). Empty raw fragments are dropped. The views point into `text`.
std::vector<TextFragment> split_special_tokens(std::string_view text, const Vocab& vocab, bool parse_special);

}  // namespace peregrine
