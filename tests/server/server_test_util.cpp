#include "server_test_util.h"

#include <gtest/gtest.h>

#include "test_paths.h"

namespace peregrine::test {
namespace {

std::unique_ptr<Tokenizer> load(const std::string& path) {
  auto tok = load_tokenizer_file(path);
  EXPECT_TRUE(tok) << path << ": " << tok.status().message();
  return tok ? std::move(*tok) : nullptr;
}

}  // namespace

std::unique_ptr<Tokenizer> stories_tokenizer() { return load(shared_dir() + "/models/stories260K/tok512.bin"); }

std::unique_ptr<Tokenizer> gpt2_tokenizer() { return load(shared_dir() + "/tokenizers/gguf-vocab/ggml-vocab-gpt-2.gguf"); }

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (b < 0x80) {
      len = 1, cp = b;
    } else if (b >= 0xC2 && b < 0xE0) {
      len = 2, cp = b & 0x1F;
    } else if (b >= 0xE0 && b < 0xF0) {
      len = 3, cp = b & 0x0F;
    } else if (b >= 0xF0 && b < 0xF5) {
      len = 4, cp = b & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
      return false;
    }
    i += len;
  }
  return true;
}

}  // namespace peregrine::test
