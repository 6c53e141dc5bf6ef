#include "peregrine/tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include <nlohmann/json.hpp>

#include "peregrine/core/json_util.h"
#include "peregrine/core/mapped_file.h"
#include "peregrine/tokenizer/bpe_tokenizer.h"
#include "peregrine/tokenizer/merge_ranks.h"
#include "peregrine/tokenizer/spm_tokenizer.h"
#include "spm_piece.h"

namespace peregrine {
namespace {

using json = nlohmann::json;
using Merges = std::vector<std::pair<std::string, std::string>>;
constexpr std::int64_t kMaxId = std::int64_t{1} << 24;
// Real tokenizer.json / tokenizer_config.json files nest about 6 levels deep; untrusted input
// nested deeper is rejected before anything walks it.
constexpr int kMaxJsonDepth = 64;
// Sequence pre-tokenizers / normalizers / decoders / post-processors inside each other.
constexpr int kMaxSequenceDepth = 8;
// The component lists visit_sequence walks, with the key of a Sequence node's children.
constexpr std::pair<const char*, const char*> kSequenceLists[] = {
    {"pre_tokenizer", "pretokenizers"},
    {"normalizer", "normalizers"},
    {"decoder", "decoders"},
    {"post_processor", "processors"},
};

std::string str_or(const json& j, const char* k, std::string fallback) {
  auto it = j.find(k);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

bool bool_or(const json& j, const char* k, bool fallback) {
  auto it = j.find(k);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

bool is_sequence(const json& j, const char* list_key) {
  return j.is_object() && str_or(j, "type", "") == "Sequence" && j.contains(list_key) && j[list_key].is_array();
}

// Depth of Sequence nodes nested inside `j` (0 for a plain component), counted up to `limit`.
int sequence_depth(const json& j, const char* list_key, int limit) {
  if (limit <= 0 || !is_sequence(j, list_key)) return 0;
  int deepest = 0;
  for (const auto& e : j[list_key]) deepest = std::max(deepest, sequence_depth(e, list_key, limit - 1));
  return 1 + deepest;
}

// kCorruptFile when a component list nests Sequences deeper than kMaxSequenceDepth.
Status check_sequence_depth(const json& root) {
  for (const auto& [key, list_key] : kSequenceLists) {
    auto it = root.find(key);
    if (it != root.end() && sequence_depth(*it, list_key, kMaxSequenceDepth + 1) > kMaxSequenceDepth) {
      return corrupt_file(std::string(key) + " nests Sequences deeper than " + std::to_string(kMaxSequenceDepth) +
                          " levels");
    }
  }
  return Status::ok();
}

// Calls f on `j` and, for Sequence nodes, on every element of j[list_key], recursively.
// check_sequence_depth has bounded the nesting; `depth` guards the recursion regardless.
template <typename F>
void visit_sequence(const json& j, const char* list_key, F&& f, int depth = 0) {
  if (!j.is_object() || depth > kMaxSequenceDepth) return;
  if (is_sequence(j, list_key)) {
    for (const auto& e : j[list_key]) visit_sequence(e, list_key, f, depth + 1);
    return;
  }
  f(j);
}

bool has_type(const json& j, const char* list_key, std::string_view type) {
  bool found = false;
  visit_sequence(j, list_key, [&](const json& n) { found = found || str_or(n, "type", "") == type; });
  return found;
}

Status put_piece(Vocab& v, std::int64_t id, std::string piece, TokenType type) {
  if (id < 0 || id >= kMaxId) return corrupt_file("token id " + std::to_string(id) + " is out of range");
  const auto i = static_cast<std::size_t>(id);
  if (i >= v.pieces.size()) {
    v.pieces.resize(i + 1);
    v.types.resize(i + 1, TokenType::kUnused);
    v.scores.resize(i + 1, 0.0f);
  }
  v.pieces[i] = std::move(piece);
  v.types[i] = type;
  return Status::ok();
}

Status read_vocab(const json& model, Vocab& v) {
  auto it = model.find("vocab");
  if (it == model.end() || !it->is_object()) return corrupt_file("model.vocab is missing or not an object");
  for (const auto& [piece, id] : it->items()) {
    if (!id.is_number_integer()) return corrupt_file("model.vocab['" + piece + "'] is not an integer id");
    PEREGRINE_RETURN_IF_ERROR(put_piece(v, id.get<std::int64_t>(), piece, TokenType::kNormal));
  }
  return Status::ok();
}

Status read_added_tokens(const json& root, Vocab& v) {
  auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return Status::ok();
  if (!it->is_array()) return corrupt_file("added_tokens is not an array");
  for (const auto& t : *it) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
        !t["content"].is_string()) {
      return corrupt_file("an added_tokens entry lacks an integer id or a string content");
    }
    const TokenType type = bool_or(t, "special", false) ? TokenType::kControl : TokenType::kUserDefined;
    PEREGRINE_RETURN_IF_ERROR(put_piece(v, t["id"].get<std::int64_t>(), t["content"].get<std::string>(), type));
  }
  return Status::ok();
}

Expected<Merges> read_merges(const json& model) {
  Merges merges;
  auto it = model.find("merges");
  if (it == model.end() || it->is_null()) return merges;
  if (!it->is_array()) return corrupt_file("model.merges is not an array");
  merges.reserve(it->size());
  for (const auto& m : *it) {
    if (m.is_string()) {
      PEREGRINE_ASSIGN_OR_RETURN(auto pair, split_merge_line(m.get<std::string>()));
      merges.push_back(std::move(pair));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return corrupt_file("a model.merges entry is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  return merges;
}

// The lowest id of `piece`, or -1 (what Vocab::find gives once finalized; the vocabulary is
// finalized only after the specials and token types are settled).
std::int32_t first_id(const Vocab& v, std::string_view piece) {
  for (std::int32_t id = 0; id < v.size(); ++id) {
    if (v.piece(id) == piece) return id;
  }
  return -1;
}

// The added/known token named by a hint or the first present candidate piece, or -1.
std::int32_t find_special(const Vocab& v, const std::optional<std::string>& hint,
                          std::initializer_list<std::string_view> candidates) {
  if (hint) return first_id(v, *hint);
  for (auto c : candidates) {
    if (const std::int32_t id = first_id(v, c); id >= 0) return id;
  }
  return -1;
}

// BOS named by a TemplateProcessing post-processor's leading SpecialToken, if any.
std::optional<std::string> template_bos(const json& root) {
  std::optional<std::string> bos;
  auto it = root.find("post_processor");
  if (it == root.end()) return bos;
  visit_sequence(*it, "processors", [&](const json& p) {
    if (str_or(p, "type", "") != "TemplateProcessing" || !p.contains("single") || !p["single"].is_array()) return;
    const json& single = p["single"];
    if (!single.empty() && single[0].contains("SpecialToken")) bos = str_or(single[0]["SpecialToken"], "id", "");
  });
  return bos;
}

// Sets BOS/EOS/UNK (retyping UNK as kUnknown); returns whether prompts start with BOS.
bool set_specials(const json& root, const json& model, const HfTokenizerHints& hints, Vocab& v) {
  const auto tbos = template_bos(root);
  v.bos_id = find_special(v, hints.bos_token ? hints.bos_token : tbos, {"<s>", "<|begin_of_text|>", "<|endoftext|>"});
  v.eos_id = find_special(v, hints.eos_token, {"</s>", "<|end_of_text|>", "<|endoftext|>"});
  v.unk_id = first_id(v, str_or(model, "unk_token", ""));
  if (v.unk_id >= 0) v.types[static_cast<std::size_t>(v.unk_id)] = TokenType::kUnknown;
  return hints.add_bos_token.value_or(tbos.has_value() && v.bos_id >= 0);
}

// Regex list of a byte-level pre-tokenizer (ByteLevel, Split, Digits, Sequence).
Status collect_regexes(const json& pre, BpeOptions& opt) {
  Status st;
  visit_sequence(pre, "pretokenizers", [&](const json& p) {
    if (!st.is_ok()) return;
    const std::string type = str_or(p, "type", "");
    if (type == "ByteLevel") {
      if (bool_or(p, "use_regex", true)) opt.pre.regexes.push_back(gpt2_regex());
      opt.add_prefix_space = bool_or(p, "add_prefix_space", false);
    } else if (type == "Digits") {
      opt.pre.regexes.push_back(bool_or(p, "individual_digits", false) ? "\\p{N}" : "\\p{N}+");
    } else if (type == "Split" && p.contains("pattern") && p["pattern"].is_object()) {
      if (str_or(p, "behavior", "") != "Isolated" || bool_or(p, "invert", false)) {
        st = unsupported("Split pre-tokenizer with behavior '" + str_or(p, "behavior", "") + "'");
        return;
      }
      const json& pat = p["pattern"];
      if (pat.contains("Regex")) opt.pre.regexes.push_back(str_or(pat, "Regex", ""));
      else opt.pre.regexes.push_back("\\Q" + str_or(pat, "String", "") + "\\E");
    } else {
      st = unsupported("pre-tokenizer type '" + type + "'");
    }
  });
  return st;
}

Expected<std::unique_ptr<Tokenizer>> make_byte_level(const json& root, const json& model, Vocab vocab,
                                                     const Merges& merges, bool add_bos) {
  BpeOptions opt;
  opt.add_bos_default = add_bos;
  opt.pre.ignore_merges = bool_or(model, "ignore_merges", false);
  if (root.contains("pre_tokenizer") && !root["pre_tokenizer"].is_null()) {
    PEREGRINE_RETURN_IF_ERROR(collect_regexes(root["pre_tokenizer"], opt));
  }
  PEREGRINE_ASSIGN_OR_RETURN(auto tok, BpeTokenizer::create(std::move(vocab), merges, std::move(opt)));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

// The Metaspace pre-tokenizer node, or null.
const json* metaspace_node(const json& root) {
  const json* found = nullptr;
  if (root.contains("pre_tokenizer")) {
    visit_sequence(root["pre_tokenizer"], "pretokenizers", [&](const json& p) {
      if (str_or(p, "type", "") == "Metaspace") found = &p;
    });
  }
  return found;
}

std::string prepend_scheme(const json& metaspace) {
  return str_or(metaspace, "prepend_scheme", bool_or(metaspace, "add_prefix_space", true) ? "always" : "never");
}

// Whether a Metaspace pre-tokenizer / Prepend normalizer adds the dummy-prefix "▁".
bool metaspace_prefix(const json& root) {
  bool prefix = false;
  if (root.contains("normalizer")) {
    visit_sequence(root["normalizer"], "normalizers", [&](const json& n) {
      prefix = prefix || (str_or(n, "type", "") == "Prepend" && str_or(n, "prepend", "") == kSpmSpace);
    });
  }
  if (const json* m = metaspace_node(root)) prefix = prefix || prepend_scheme(*m) != "never";
  return prefix;
}

// SentencePiece-converted vocabularies: normal "<0xXX>" pieces are byte-fallback tokens.
void type_byte_pieces(Vocab& vocab) {
  for (std::int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.type(id) == TokenType::kNormal && parse_byte_piece(vocab.piece(id))) {
      vocab.types[static_cast<std::size_t>(id)] = TokenType::kByte;
    }
  }
}

// `vocab` is finalized, its byte pieces typed by type_byte_pieces.
std::unique_ptr<Tokenizer> make_metaspace(const json& root, Vocab vocab, const Merges& merges, bool add_bos) {
  SpmOptions opt;
  opt.add_space_prefix = metaspace_prefix(root);
  if (const json* m = metaspace_node(root)) {
    opt.space_prefix_only_at_start = prepend_scheme(*m) == "first";
    opt.split_words = bool_or(*m, "split", true);
  }
  opt.add_bos_default = add_bos;
  opt.ranks = MergeRanks(merges, vocab);
  return SpmTokenizer::create(std::move(vocab), std::move(opt));
}

Expected<std::unique_ptr<Tokenizer>> build(const json& root, const HfTokenizerHints& hints) {
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object()) {
    return corrupt_file("no 'model' object");
  }
  const json& model = root["model"];
  const std::string type = str_or(model, "type", "BPE");
  if (type != "BPE") return unsupported("tokenizer model type '" + type + "' (only BPE is supported)");
  PEREGRINE_RETURN_IF_ERROR(check_sequence_depth(root));
  Vocab vocab;
  PEREGRINE_RETURN_IF_ERROR(read_vocab(model, vocab));
  PEREGRINE_RETURN_IF_ERROR(read_added_tokens(root, vocab));
  PEREGRINE_ASSIGN_OR_RETURN(Merges merges, read_merges(model));
  const bool add_bos = set_specials(root, model, hints, vocab);
  const bool byte_level = (root.contains("pre_tokenizer") && has_type(root["pre_tokenizer"], "pretokenizers", "ByteLevel")) ||
                          (root.contains("decoder") && has_type(root["decoder"], "decoders", "ByteLevel"));
  const bool metaspace = !byte_level && (bool_or(model, "byte_fallback", false) || metaspace_prefix(root));
  if (metaspace) type_byte_pieces(vocab);
  PEREGRINE_RETURN_IF_ERROR(vocab.finalize("tokenizer.json vocabulary"));
  if (byte_level) return make_byte_level(root, model, std::move(vocab), merges, add_bos);
  if (metaspace) return make_metaspace(root, std::move(vocab), merges, add_bos);
  return unsupported("BPE tokenizer.json that is neither byte-level nor SentencePiece-style (Metaspace/byte_fallback)");
}

std::optional<std::string> token_content(const json& j, const char* k) {
  auto it = j.find(k);
  if (it == j.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return std::nullopt;
}

// Hints from the tokenizer_config.json next to `path`; empty when there is none.
// Errors: kCorruptFile naming the file when it is not one well-formed JSON object.
Expected<HfTokenizerHints> read_hints(const std::string& path) {
  HfTokenizerHints h;
  const std::string cfg = (std::filesystem::path(path).parent_path() / "tokenizer_config.json").string();
  std::error_code ec;
  if (!std::filesystem::exists(cfg, ec)) return h;
  PEREGRINE_ASSIGN_OR_RETURN(auto file, MappedFile::open(cfg));
  const auto bytes = file->bytes();
  PEREGRINE_ASSIGN_OR_RETURN(
      const json j, json_util::parse(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), cfg,
                                     kMaxJsonDepth));
  if (!j.is_object()) return corrupt_file(cfg + ": is a JSON " + json_util::type_name(j) + ", expected an object");
  h.bos_token = token_content(j, "bos_token");
  h.eos_token = token_content(j, "eos_token");
  if (j.contains("add_bos_token") && j["add_bos_token"].is_boolean()) h.add_bos_token = j["add_bos_token"].get<bool>();
  return h;
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> parse_hf_tokenizer_json(std::string_view json_text, const std::string& what,
                                                             const HfTokenizerHints& hints) {
  PEREGRINE_ASSIGN_OR_RETURN(const json root, json_util::parse(json_text, what, kMaxJsonDepth));
  try {
    auto tok = build(root, hints);
    if (!tok) return Status(tok.status().code(), what + ": " + tok.status().message());
    return tok;
  } catch (const json::exception& e) {  // a field of an unexpected type slipped past the checks
    return corrupt_file(what + ": unexpected tokenizer.json structure (" + e.what() + ")");
  }
}

Expected<std::unique_ptr<Tokenizer>> load_hf_tokenizer_json(const std::string& path) {
  PEREGRINE_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  const auto bytes = file->bytes();
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  PEREGRINE_ASSIGN_OR_RETURN(const HfTokenizerHints hints, read_hints(path));
  return parse_hf_tokenizer_json(text, path, hints);
}

}  // namespace peregrine
