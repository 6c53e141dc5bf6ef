// tokenizer_file_of (model_writer.h): where a loaded model's tokenizer lives.
#include <filesystem>

#include "peregrine/core/file_lookup.h"
#include "peregrine/formats/model_writer.h"

namespace peregrine {

namespace fs = std::filesystem;

Expected<std::string> tokenizer_file_of(const ModelFile& m) {
  switch (m.format) {
    case ModelFormat::kGguf: return std::string();
    case ModelFormat::kLlama2c: {
      const fs::path dir = fs::path(m.path).parent_path();
      std::string f = first_existing_file(dir.empty() ? fs::path(".") : dir, {"tokenizer.bin", "tok512.bin"});
      if (f.empty()) return not_found("no tokenizer.bin or tok512.bin beside " + m.path);
      return f;
    }
    case ModelFormat::kHuggingFace: {
      std::string f = first_existing_file(m.path, {"tokenizer.json", "tokenizer.model", "tokenizer.bin", "tokenizer.gguf"});
      if (f.empty()) return not_found(m.path + " has no tokenizer.json, tokenizer.model, tokenizer.bin or tokenizer.gguf");
      return f;
    }
  }
  return not_found(m.path + ": unknown model format");
}

}  // namespace peregrine
