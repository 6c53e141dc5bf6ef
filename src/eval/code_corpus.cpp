#include "peregrine/eval/code_corpus.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace peregrine {

std::string default_python_source_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string best;
  int best_minor = -1;
  for (const fs::directory_entry& e : fs::directory_iterator("/usr/lib", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("python3.", 0) != 0 || !fs::exists(e.path() / "os.py", ec)) continue;
    const std::string minor = name.substr(8);
    if (minor.empty() || !std::all_of(minor.begin(), minor.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    if (const int m = std::stoi(minor); m > best_minor) {
      best_minor = m;
      best = e.path().string();
    }
  }
  return best;
}

Expected<CodeCorpus> split_code_corpus(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec) && e.path().extension() == ".py") files.push_back(e.path().string());
  }
  if (ec) return not_found("cannot list the source directory " + dir + ": " + ec.message());
  if (files.size() < 4) return not_found("the source directory " + dir + " holds fewer than 4 .py files");
  std::sort(files.begin(), files.end());
  CodeCorpus corpus;
  for (std::size_t i = 0; i < files.size(); ++i) (i % 4 == 3 ? corpus.eval : corpus.train).push_back(files[i]);
  return corpus;
}

std::string code_completion_prompt(const std::string& text, std::int64_t min_chars, std::int64_t max_chars) {
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) break;
    if (static_cast<std::int64_t>(end + 1) > max_chars) break;
    const std::size_t first = text.find_first_not_of(" \t", pos);
    if (static_cast<std::int64_t>(pos) >= min_chars && first < end && text.compare(first, 4, "def ") == 0) {
      return text.substr(0, end + 1);
    }
    pos = end + 1;
  }
  return {};
}

}  // namespace peregrine
