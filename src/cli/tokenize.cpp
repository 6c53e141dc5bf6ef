// peregrine tokenize: text → token ids (and pieces).
#include <cstdio>
#include <memory>

#include "common.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

struct TokenizeArgs {
  ModelOptions model;
  std::string text;
  std::string file;
  bool no_bos = false;
  bool ids_only = false;
};

int run(const TokenizeArgs& args) {
  auto text = text_or_file(args.text, args.file);
  if (!text) return report(text.status());
  std::unique_ptr<Tokenizer> tok;
  if (!args.model.tokenizer.empty() && args.model.model.empty()) {
    auto t = load_tokenizer_file(args.model.tokenizer);
    if (!t) return report(t.status());
    tok = std::move(*t);
  } else {
    auto file = open_model(args.model);
    if (!file) return report(file.status());
    auto t = load_tokenizer(*file, args.model.tokenizer);
    if (!t) return report(t.status());
    tok = std::move(*t);
  }
  const auto ids = tok->encode(*text, tok->add_bos_default() && !args.no_bos);
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
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text");
  add_model_options(*cmd, args->model);
  auto* text = cmd->add_option("text", args->text, "Text to tokenize");
  auto* file = cmd->add_option("-f,--file", args->file, "Read the text from a file");
  text->excludes(file);
  cmd->add_flag("--no-bos", args->no_bos, "Do not prepend BOS (by default it is added when the tokenizer's config says so)");
  cmd->add_flag("--ids", args->ids_only, "Print only the ids, as [1, 2, 3]");
  return {cmd, [args] { return run(*args); }};
}

}  // namespace peregrine::cli
