// tokenizer_file_of (model_writer.h): where a loaded model's tokenizer lives.
#include <filesystem>

#include "peregrine/formats/model_writer.h"

namespace peregrine {
namespace {

namespace fs = std::filesystem;

/// The first of `names` that is a regular file in `dir`, or "".
std::string first_existing(const fs::path& dir, std::initializer_list<const char*> names) {
  std::error_code ec;
  for (const char* n : names) {
    if (fs::is_regular_file(dir / n, ec)) return (dir / n).string();
  }
  return "";
}

}  // namespace

Expected<std::string> tokenizer_file_of(const ModelFile& m) {
  switch (m.format) {
    case ModelFormat::kGguf: return std::string();
    case ModelFormat::kLlama2c: {
      const fs::path dir = fs::path(m.path).parent_path();
      std::string f = first_existing(dir.empty() ? fs::path(".") : dir, {"tokenizer.bin", "tok512.bin"});
      if (f.empty()) return not_found("no tokenizer.bin or tok512.bin beside " + m.path);
      return f;
    }
    case ModelFormat::kHuggingFace: {
      std::string f = first_existing(m.path, {"tokenizer.json", "tokenizer.model", "tokenizer.bin", "tokenizer.gguf"});
      if (f.empty()) return not_found(m.path + " has no tokenizer.json, tokenizer.model, tokenizer.bin or tokenizer.gguf");
      return f;
    }
  }
  return not_found(m.path + ": unknown model format");
}

}  // namespace peregrine
