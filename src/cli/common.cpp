#include "common.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace peregrine::cli {

void add_model_options(CLI::App& cmd, ModelOptions& o) {
  cmd.add_option("-m,--model", o.model,
                 "Model: a .gguf file, a llama2.c .bin, or a Hugging Face folder "
                 "(default: the bundled stories260K)");
  cmd.add_option("--tokenizer", o.tokenizer,
                 "Tokenizer file overriding the model's (tokenizer.bin, tokenizer.model, "
                 "tokenizer.json, or a vocab .gguf)");
}

std::string default_model_path() {
  const std::string rel = "models/stories260K/stories260K.bin";
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto candidate = exe.parent_path().parent_path().parent_path() / rel;
    if (std::filesystem::exists(candidate, ec)) return candidate.string();
  }
  return std::string(PEREGRINE_DEFAULT_MODEL_DIR) + "/stories260K.bin";
}

Expected<ModelFile> open_model(const ModelOptions& o) {
  return load_model_file(o.model.empty() ? default_model_path() : o.model);
}

Status validate_threads(std::int32_t threads) {
  constexpr std::int32_t kMaxThreads = 512;
  if (threads < 1 || threads > kMaxThreads) {
    return invalid_argument("-t/--threads must be in [1, " + std::to_string(kMaxThreads) + "] (got " +
                            std::to_string(threads) + ")");
  }
  return Status::ok();
}

int report(const Status& st) {
  std::fprintf(stderr, "peregrine: error: %s\n", st.message().c_str());
  return 1;
}

Expected<std::string> text_or_file(const std::string& text, const std::string& path) {
  if (path.empty()) return text;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return not_found("cannot read prompt file " + path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace peregrine::cli
