#include "peregrine/tokenizer/gguf_tokenizer.h"

#include "peregrine/tokenizer/bpe_tokenizer.h"
#include "peregrine/tokenizer/merge_ranks.h"
#include "peregrine/tokenizer/spm_tokenizer.h"

namespace peregrine {
namespace {

constexpr const char* kPrefix = "tokenizer.ggml.";

std::string key(const char* name) { return std::string(kPrefix) + name; }

Expected<bool> get_bool(const GgufFile& g, const std::string& k, bool fallback) {
  const GgufValue* v = g.find(k);
  if (!v) return fallback;
  if (const bool* b = std::get_if<bool>(&v->scalar); b && v->type == GgufType::kBool) return *b;
  return corrupt_file("GGUF key '" + k + "' is not a bool");
}

// Special id from `k`, or `fallback` when absent; UINT32_MAX and negatives mean "none".
Expected<std::int32_t> get_special_id(const GgufFile& g, const std::string& k, std::int32_t fallback) {
  if (!g.find(k)) return fallback;
  PEREGRINE_ASSIGN_OR_RETURN(std::int64_t id, g.get_int(k));
  if (id < 0 || id == 0xFFFFFFFFll) return -1;
  if (id > (std::int64_t{1} << 30)) return corrupt_file("GGUF key '" + k + "' = " + std::to_string(id) + " is absurd");
  return static_cast<std::int32_t>(id);
}

Status read_types(const GgufFile& g, Vocab& v) {
  v.types.assign(v.pieces.size(), TokenType::kNormal);
  if (!g.find(key("token_type"))) return Status::ok();
  PEREGRINE_ASSIGN_OR_RETURN(auto types, g.get_number_array(key("token_type")));
  if (types.size() != v.pieces.size()) {
    return corrupt_file("GGUF: " + std::to_string(v.pieces.size()) + " tokens but " +
                        std::to_string(types.size()) + " token types");
  }
  for (std::size_t i = 0; i < types.size(); ++i) v.types[i] = token_type_from_int(static_cast<std::int64_t>(types[i]));
  promote_control_looking_tokens(v);
  return Status::ok();
}

Status read_scores(const GgufFile& g, Vocab& v) {
  v.scores.assign(v.pieces.size(), 0.0f);
  if (!g.find(key("scores"))) return Status::ok();
  PEREGRINE_ASSIGN_OR_RETURN(auto scores, g.get_number_array(key("scores")));
  if (scores.size() != v.pieces.size()) {
    return corrupt_file("GGUF: " + std::to_string(v.pieces.size()) + " tokens but " +
                        std::to_string(scores.size()) + " scores");
  }
  for (std::size_t i = 0; i < scores.size(); ++i) v.scores[i] = static_cast<float>(scores[i]);
  return Status::ok();
}

// Tokens, scores, types and special ids; `spm` selects llama.cpp's SentencePiece defaults.
Expected<Vocab> read_vocab(const GgufFile& g, bool spm) {
  Vocab v;
  PEREGRINE_ASSIGN_OR_RETURN(v.pieces, g.get_string_array(key("tokens")));
  PEREGRINE_RETURN_IF_ERROR(read_scores(g, v));
  PEREGRINE_RETURN_IF_ERROR(read_types(g, v));
  PEREGRINE_ASSIGN_OR_RETURN(v.bos_id, get_special_id(g, key("bos_token_id"), spm ? 1 : -1));
  PEREGRINE_ASSIGN_OR_RETURN(v.eos_id, get_special_id(g, key("eos_token_id"), spm ? 2 : -1));
  PEREGRINE_ASSIGN_OR_RETURN(v.unk_id, get_special_id(g, key("unknown_token_id"), spm ? 0 : -1));
  if (spm && v.pieces.size() < 3) return corrupt_file("SentencePiece vocabulary with fewer than 3 tokens");
  PEREGRINE_RETURN_IF_ERROR(v.finalize("tokenizer.ggml.tokens"));
  return v;
}

Expected<std::vector<std::pair<std::string, std::string>>> read_merges(const GgufFile& g) {
  PEREGRINE_ASSIGN_OR_RETURN(auto lines, g.get_string_array(key("merges")));
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(lines.size());
  for (const auto& line : lines) {
    PEREGRINE_ASSIGN_OR_RETURN(auto m, split_merge_line(line));
    merges.push_back(std::move(m));
  }
  return merges;
}

Expected<std::unique_ptr<Tokenizer>> make_spm(const GgufFile& g) {
  PEREGRINE_ASSIGN_OR_RETURN(Vocab vocab, read_vocab(g, true));
  SpmOptions opt;
  PEREGRINE_ASSIGN_OR_RETURN(opt.add_space_prefix, get_bool(g, key("add_space_prefix"), true));
  PEREGRINE_ASSIGN_OR_RETURN(opt.add_bos_default, get_bool(g, key("add_bos_token"), true));
  return std::unique_ptr<Tokenizer>(SpmTokenizer::create(std::move(vocab), std::move(opt)));
}

Expected<std::unique_ptr<Tokenizer>> make_bpe(const GgufFile& g) {
  PEREGRINE_ASSIGN_OR_RETURN(Vocab vocab, read_vocab(g, false));
  PEREGRINE_ASSIGN_OR_RETURN(auto merges, read_merges(g));
  std::string pre = "default";
  if (g.find(key("pre"))) {
    PEREGRINE_ASSIGN_OR_RETURN(pre, g.get_string(key("pre")));
  }
  BpeOptions opt;
  PEREGRINE_ASSIGN_OR_RETURN(opt.pre, pretokenizer_spec(pre));
  PEREGRINE_ASSIGN_OR_RETURN(opt.add_bos_default, get_bool(g, key("add_bos_token"), false));
  PEREGRINE_ASSIGN_OR_RETURN(auto tok, BpeTokenizer::create(std::move(vocab), merges, std::move(opt)));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> load_gguf_tokenizer(const GgufFile& gguf, const std::string& what) {
  if (!gguf.find(key("model"))) return not_found(what + " has no tokenizer (no tokenizer.ggml.model key)");
  PEREGRINE_ASSIGN_OR_RETURN(std::string model, gguf.get_string(key("model")));
  Expected<std::unique_ptr<Tokenizer>> tok = unsupported("");
  if (model == "llama") {
    tok = make_spm(gguf);
  } else if (model == "gpt2") {
    tok = make_bpe(gguf);
  } else {
    return unsupported(what + ": tokenizer.ggml.model '" + model + "' is not supported (supported: llama, gpt2)");
  }
  if (!tok) return Status(tok.status().code(), what + ": " + tok.status().message());
  return tok;
}

Expected<std::unique_ptr<Tokenizer>> load_gguf_tokenizer_file(const std::string& path) {
  PEREGRINE_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::open(path));
  return load_gguf_tokenizer(gguf, path);
}

}  // namespace peregrine
