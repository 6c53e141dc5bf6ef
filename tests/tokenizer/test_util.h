// Helpers shared by the tokenizer tests: reading files, llama.cpp vocab test vectors, printing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"

namespace peregrine::test {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A fresh temporary directory, removed with its contents when the object goes away.
struct TempDir {
  std::string path = make_temp_dir();
  TempDir() = default;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

inline std::string vocab_dir() { return shared_dir() + "/tokenizers/gguf-vocab"; }

/// One test vector: an input text and the ids llama.cpp's test-tokenizer-0 produced.
struct VocabCase {
  std::string input;
  std::vector<std::int32_t> ids;
};

/// Inputs of a .inp file: texts separated by "\n__ggml_vocab_test__\n"; the file ends with a
/// separator, so the empty text after the last one is not an input.
inline std::vector<std::string> split_inputs(const std::string& inp) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t hit = inp.find(sep, pos);
    if (hit == std::string::npos) break;
    out.push_back(inp.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  if (pos < inp.size()) out.push_back(inp.substr(pos));
  return out;
}

/// Lines of a .out file: one line of space-separated ids per input.
inline std::vector<std::vector<std::int32_t>> parse_outputs(const std::string& out) {
  std::vector<std::vector<std::int32_t>> rows;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream ids(line);
    std::vector<std::int32_t> row;
    for (std::int32_t id; ids >> id;) row.push_back(id);
    rows.push_back(std::move(row));
  }
  return rows;
}

inline std::string ids_string(const std::vector<std::int32_t>& ids) {
  std::string s;
  for (auto id : ids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(id);
  }
  return "[" + s + "]";
}

/// `s` with control characters and non-ASCII bytes escaped, for failure messages.
inline std::string escaped(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c >= 0x7F) out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

/// Non-empty lines of a text file.
inline std::vector<std::string> text_lines(const std::string& path, std::size_t max_lines = SIZE_MAX) {
  std::vector<std::string> out;
  std::istringstream in(read_file(path));
  std::string line;
  while (out.size() < max_lines && std::getline(in, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

}  // namespace peregrine::test
