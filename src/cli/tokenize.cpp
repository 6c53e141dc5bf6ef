// peregrine tokenize: text → token ids (and pieces).
#include <cstdio>
#include <memory>

#include "common.h"
#include "peregrine/formats/gguf/gguf.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

struct TokenizeArgs {
  ModelOptions model;
  std::string text;
  std::string file;
  bool no_bos = false;
  bool no_parse_special = false;  // special-token text as plain text (llama-tokenize --no-parse-special)
  bool ids_only = false;
};

/// The tokenizer to use: --tokenizer alone, or -m's GGUF metadata (a model or a vocab-only
/// file, as llama-tokenize reads it: no weights loaded or checked), else the model's own
/// tokenizer found beside it (checked against its vocabulary size when --tokenizer overrides it).
Expected<std::unique_ptr<Tokenizer>> tokenizer_for(const ModelOptions& o) {
  if (o.model.empty() && !o.tokenizer.empty()) return load_tokenizer_file(o.tokenizer);
  if (o.tokenizer.empty() && !o.model.empty() && is_gguf_file(o.model)) return load_tokenizer_file(o.model);
  PEREGRINE_ASSIGN_OR_RETURN(ModelFile file, open_model(o));
  return load_tokenizer(file, o.tokenizer);
}

int run(const TokenizeArgs& args) {
  auto text = text_or_file(args.text, args.file);
  if (!text) return report(text.status());
  auto loaded = tokenizer_for(args.model);
  if (!loaded) return report(loaded.status());
  const std::unique_ptr<Tokenizer>& tok = *loaded;
  const auto ids = tok->encode(*text, tok->add_bos_default() && !args.no_bos,
                               args.no_parse_special ? ParseSpecial::kNo : ParseSpecial::kYes);
  if (args.ids_only) {
    std::string line = "[";
    for (std::size_t i = 0; i < ids.size(); ++i) line += (i ? ", " : "") + std::to_string(ids[i]);
    std::printf("%s]\n", line.c_str());
    return 0;
  }
  for (auto id : ids) std::printf("%6d -> '%s'\n", id, tok->piece(id).c_str());
  return 0;
}

}  // namespace

Verb add_tokenize(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text (-m may be a vocab-only GGUF)");
  add_model_options(*cmd, args->model);
  auto* text = cmd->add_option("text", args->text, "Text to tokenize");
  auto* file = cmd->add_option("-f,--file", args->file, "Read the text from a file");
  text->excludes(file);
  cmd->add_flag("--no-bos", args->no_bos, "Do not prepend BOS (by default it is added when the tokenizer's config says so)");
  cmd->add_flag("--ids", args->ids_only, "Print only the ids, as [1, 2, 3]");
  cmd->add_flag("--no-parse-special", args->no_parse_special,
                "Tokenize special-token text (\"<|im_start|>\", \"<s>\") as plain text; by default it becomes those tokens, "
                "as llama-tokenize does");
  return {cmd, [args] { return run(*args); }};
}

}  // namespace peregrine::cli
