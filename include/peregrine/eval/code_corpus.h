// Real source code for the coder models' speculative-decoding runs: the Python standard
// library's .py files shipped on the machine, split by file so that what trains a drafter
// (train-draft) never holds a file the evaluation prompts come from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "peregrine/core/status.h"

namespace peregrine {

/// The .py files directly in a directory, sorted by name and split by file: every fourth file
/// (index % 4 == 3) is held out for evaluation, the others are for training.
struct CodeCorpus {
  std::vector<std::string> train, eval;  // paths
};

/// The newest /usr/lib/python3.N that holds os.py (the standard library's sources), or an
/// empty string when there is none.
std::string default_python_source_dir();

/// Lists and splits the .py files of `dir` as CodeCorpus says. Errors: kNotFound when `dir`
/// cannot be read or holds fewer than 4 .py files.
Expected<CodeCorpus> split_code_corpus(const std::string& dir);

/// A code-completion prompt from a source file's text: the text from its start through the
/// first line at or past `min_chars` characters that opens a function (a line whose first
/// non-blank characters are "def "), so that the model continues with a function body. Returns
/// an empty string when the file has no such line within `max_chars` characters.
std::string code_completion_prompt(const std::string& text, std::int64_t min_chars, std::int64_t max_chars);

}  // namespace peregrine
