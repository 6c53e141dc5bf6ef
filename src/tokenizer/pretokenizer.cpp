#include "peregrine/tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "peregrine/tokenizer/utf8.h"

namespace peregrine {

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

const std::string kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const std::string kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const std::string kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// CJK unified ideographs, U+0800..U+4E00 and Hangul (written as code points to keep the source
// ASCII): the deepseek-coder list's "[一-龥ࠀ-一가-퟿]+".
const std::string kDeepseekCjk = "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";

bool name_in(std::string_view name, std::initializer_list<std::string_view> names) {
  for (auto n : names) {
    if (n == name) return true;
  }
  return false;
}

// Rewrites \s and \S so that they include U+0085: outside a class \s → [\s\x{85}] and
// \S → [^\s\x{85}]; inside a class \s → \s\x{85} (a class \S is left as is).
std::string widen_whitespace(const std::string& re) {
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < re.size(); ++i) {
    const char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      const char e = re[++i];
      if (e == 's') {
        out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
      } else if (e == 'S' && !in_class) {
        out += "[^\\s\\x{85}]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class && out.back() != '[' && out.back() != '^') in_class = false;
    out += c;
  }
  return out;
}

Expected<std::shared_ptr<const PreTokenizer::Compiled>> compile_one(const std::string& re);

}  // namespace

const std::string& gpt2_regex() { return kGpt2; }

Expected<PreTokenizerSpec> pretokenizer_spec(std::string_view name) {
  if (name.empty() || name == "default") {
    return PreTokenizerSpec{{"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"}, false};
  }
  if (name_in(name, {"gpt-2", "mpt", "olmo", "jais"})) return PreTokenizerSpec{{kGpt2}, false};
  if (name == "falcon") {
    return PreTokenizerSpec{{"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"}, false};
  }
  if (name_in(name, {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva"})) {
    return PreTokenizerSpec{{"\\p{N}", kGpt2}, false};
  }
  if (name == "deepseek-coder") {
    return PreTokenizerSpec{{"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kDeepseekCjk, "\\p{N}"}, false};
  }
  if (name_in(name, {"llama3", "llama-v3", "llama-bpe"})) return PreTokenizerSpec{{kLlama3}, true};
  if (name_in(name, {"dbrx", "smaug-bpe"})) return PreTokenizerSpec{{kLlama3}, false};
  if (name_in(name, {"qwen2", "stablelm2"})) return PreTokenizerSpec{{kQwen2}, false};
  return unsupported("pre-tokenizer '" + std::string(name) +
                     "' is not supported (known: default, gpt-2, falcon, starcoder, deepseek-coder, "
                     "llama-bpe, qwen2 and their aliases)");
}

namespace {

Expected<std::shared_ptr<const PreTokenizer::Compiled>> compile_one(const std::string& re) {
  const std::string pattern = widen_whitespace(re);
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  const std::uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &err, &err_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return unsupported("pre-tokenizer regex '" + re + "' does not compile: " +
                       reinterpret_cast<const char*>(msg) + " at offset " + std::to_string(err_offset));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional speed-up; falls back to the interpreter
  auto c = std::make_shared<PreTokenizer::Compiled>();
  c->code = code;
  return std::shared_ptr<const PreTokenizer::Compiled>(std::move(c));
}

// Splits one fragment by `code`: matches and the gaps between them, in order.
void split_fragment(const pcre2_code* code, pcre2_match_data* md, std::string_view frag,
                    std::vector<std::string_view>& out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(frag.data());
  std::size_t done = 0;   // end of the last emitted piece
  std::size_t start = 0;  // where the next search begins
  while (start < frag.size()) {
    const int rc = pcre2_match(code, subject, frag.size(), start, 0, md, nullptr);
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH (or a match-limit error): the rest is a gap
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    if (ov[1] <= ov[0]) {  // empty match: step over one character
      start = ov[0] + (ov[0] < frag.size() ? utf8_char_length(frag, ov[0]) : 1);
      continue;
    }
    if (ov[0] > done) out.push_back(frag.substr(done, ov[0] - done));
    out.push_back(frag.substr(ov[0], ov[1] - ov[0]));
    done = start = ov[1];
  }
  if (done < frag.size()) out.push_back(frag.substr(done));
}

}  // namespace

Expected<PreTokenizer> PreTokenizer::compile(const std::vector<std::string>& regexes) {
  PreTokenizer p;
  for (const auto& re : regexes) {
    PEREGRINE_ASSIGN_OR_RETURN(auto c, compile_one(re));
    p.regexes_.push_back(std::move(c));
  }
  return p;
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> words;
  if (text.empty()) return words;
  words.push_back(text);
  for (const auto& re : regexes_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
    std::vector<std::string_view> next;
    next.reserve(words.size() * 2);
    for (auto w : words) split_fragment(re->code, md, w, next);
    pcre2_match_data_free(md);
    words = std::move(next);
  }
  return words;
}

}  // namespace peregrine
