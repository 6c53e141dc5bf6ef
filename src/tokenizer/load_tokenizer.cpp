// load_tokenizer / load_tokenizer_file: find and open the tokenizer that belongs to a model.
#include <filesystem>

#include "peregrine/core/mapped_file.h"
#include "peregrine/tokenizer/gguf_tokenizer.h"
#include "peregrine/tokenizer/hf_tokenizer.h"
#include "peregrine/tokenizer/llama2c_tokenizer.h"
#include "peregrine/tokenizer/sentencepiece_tokenizer.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {
namespace {

namespace fs = std::filesystem;

bool has_gguf_magic(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return false;
  const auto b = (*file)->bytes();
  return b.size() >= 4 && b[0] == 'G' && b[1] == 'G' && b[2] == 'U' && b[3] == 'F';
}

// The first of `names` that exists as a regular file in `dir`, or "".
std::string first_existing(const fs::path& dir, std::initializer_list<const char*> names) {
  std::error_code ec;
  for (const char* n : names) {
    if (fs::is_regular_file(dir / n, ec)) return (dir / n).string();
  }
  return "";
}

Expected<std::unique_ptr<Tokenizer>> load_from_dir(const fs::path& dir) {
  const std::string f = first_existing(dir, {"tokenizer.json", "tokenizer.model", "tokenizer.bin", "tok512.bin"});
  if (f.empty()) {
    return not_found(dir.string() + " has no tokenizer.json, tokenizer.model, tokenizer.bin or tok512.bin");
  }
  return load_tokenizer_file(f);
}

Status check_fits(const Tokenizer& tok, const ModelFile& model) {
  if (model.config.vocab_size > 0 && tok.vocab_size() > model.config.vocab_size) {
    return invalid_argument("the tokenizer has " + std::to_string(tok.vocab_size()) + " tokens but the model '" +
                            model.path + "' only " + std::to_string(model.config.vocab_size));
  }
  return Status::ok();
}

Expected<std::unique_ptr<Tokenizer>> find_for_model(const ModelFile& model) {
  switch (model.format) {
    case ModelFormat::kGguf:
      if (!model.gguf) return not_found(model.path + ": GGUF metadata is not loaded");
      return load_gguf_tokenizer(*model.gguf, model.path);
    case ModelFormat::kLlama2c: {
      const fs::path dir = fs::path(model.path).parent_path();
      const std::string f = first_existing(dir.empty() ? fs::path(".") : dir, {"tokenizer.bin", "tok512.bin"});
      if (f.empty()) return not_found("no tokenizer.bin or tok512.bin beside " + model.path + " (use --tokenizer)");
      return load_llama2c_tokenizer(f);
    }
    case ModelFormat::kHuggingFace: {
      const std::string f = first_existing(model.path, {"tokenizer.json", "tokenizer.model"});
      if (f.empty()) return not_found(model.path + " has no tokenizer.json or tokenizer.model (use --tokenizer)");
      return load_tokenizer_file(f);
    }
  }
  return not_found(model.path + ": unknown model format");
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> load_tokenizer_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return load_from_dir(path);
  if (!fs::exists(path, ec)) return not_found(path + ": no such tokenizer file");
  if (path.ends_with(".gguf") || has_gguf_magic(path)) return load_gguf_tokenizer_file(path);
  if (path.ends_with(".json")) return load_hf_tokenizer_json(path);
  if (path.ends_with(".model")) return load_sentencepiece_model(path);
  return load_llama2c_tokenizer(path);
}

Expected<std::unique_ptr<Tokenizer>> load_tokenizer(const ModelFile& model, const std::string& override_path) {
  auto tok = override_path.empty() ? find_for_model(model) : load_tokenizer_file(override_path);
  if (!tok) return tok;
  PEREGRINE_RETURN_IF_ERROR(check_fits(**tok, model));
  return tok;
}

}  // namespace peregrine
