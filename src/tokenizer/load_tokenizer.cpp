// load_tokenizer / load_tokenizer_file: find and open the tokenizer that belongs to a model.
#include <filesystem>

#include "peregrine/core/file_lookup.h"
#include "peregrine/formats/gguf/gguf.h"
#include "peregrine/formats/model_writer.h"
#include "peregrine/tokenizer/gguf_tokenizer.h"
#include "peregrine/tokenizer/hf_tokenizer.h"
#include "peregrine/tokenizer/llama2c_tokenizer.h"
#include "peregrine/tokenizer/sentencepiece_tokenizer.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {
namespace {

namespace fs = std::filesystem;

Expected<std::unique_ptr<Tokenizer>> load_from_dir(const fs::path& dir) {
  const std::string f =
      first_existing_file(dir, {"tokenizer.json", "tokenizer.model", "tokenizer.bin", "tok512.bin", "tokenizer.gguf"});
  if (f.empty()) {
    return not_found(dir.string() + " has no tokenizer.json, tokenizer.model, tokenizer.bin, tok512.bin or tokenizer.gguf");
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
  if (model.format == ModelFormat::kGguf) {
    if (!model.gguf) return not_found(model.path + ": GGUF metadata is not loaded");
    return load_gguf_tokenizer(*model.gguf, model.path);
  }
  auto f = tokenizer_file_of(model);
  if (!f) return not_found(f.status().message() + " (use --tokenizer)");
  return load_tokenizer_file(*f);
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> load_tokenizer_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return load_from_dir(path);
  if (!fs::exists(path, ec)) return not_found(path + ": no such tokenizer file");
  if (is_gguf_file(path)) return load_gguf_tokenizer_file(path);
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
