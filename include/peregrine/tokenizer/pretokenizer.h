// Regex pre-tokenization for byte-level BPE: text → words that BPE merges never cross.
//
// A pre-tokenizer is an ordered list of regexes. Each regex is applied to every fragment left
// by the previous one; both its matches and the unmatched gaps between them become fragments
// (Hugging Face `Split` with behavior "Isolated"; llama.cpp `unicode_regex_split`). Regexes use
// PCRE2 syntax with PCRE2_UTF | PCRE2_UCP (\p{L}, \p{N}, \p{P} are Unicode categories) and are
// matched against one fragment at a time, so lookaheads and `$` stop at the fragment's end.
// `\s` also covers U+0085 (NEL), as Unicode White_Space (and Rust/Oniguruma regexes) do.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/core/status.h"

namespace peregrine {

/// The regex list and options of a named pre-tokenizer.
struct PreTokenizerSpec {
  std::vector<std::string> regexes;
  /// Look the whole word up in the vocabulary before merging (llama3's "ignore_merges").
  bool ignore_merges = false;
};

/// Spec of a GGUF `tokenizer.ggml.pre` name, following the lists llama.cpp (llama-vocab.cpp)
/// associates with each name: "default" (also used when the key is absent), "gpt-2" (+ "mpt",
/// "olmo", "jais"), "falcon", "starcoder" (+ "refact", "command-r", "smollm", "codeshell",
/// "exaone", "minerva"), "deepseek-coder", "llama3"/"llama-v3"/"llama-bpe" (+ "dbrx", "smaug-bpe"),
/// "qwen2" (+ "stablelm2").
/// Errors: kUnsupported for any other name.
Expected<PreTokenizerSpec> pretokenizer_spec(std::string_view pre_name);

/// The GPT-2 regex ('s|'t|... | ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)), the single regex
/// of the Hugging Face ByteLevel pre-tokenizer with use_regex=true.
const std::string& gpt2_regex();

/// A compiled list of regexes. Immutable after compile(); safe for concurrent split() calls.
class PreTokenizer {
 public:
  /// Compiles `regexes` (see the file comment). An empty list splits nothing.
  /// Errors: kUnsupported naming the regex and PCRE2's message when one does not compile.
  static Expected<PreTokenizer> compile(const std::vector<std::string>& regexes);

  /// The words of `text` (views into it, in order, concatenating back to `text`; none empty).
  /// Invalid UTF-8 never fails: invalid bytes are simply not matched and end up in gaps.
  std::vector<std::string_view> split(std::string_view text) const;

  struct Compiled;  // one PCRE2 pattern (opaque)

 private:
  std::vector<std::shared_ptr<const Compiled>> regexes_;
};

}  // namespace peregrine
