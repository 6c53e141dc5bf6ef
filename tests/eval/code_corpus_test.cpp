// eval/code_corpus.h on the machine's own Python standard library: the split by file keeps every
// fourth file (by name) for evaluation and the rest for training, disjoint and complete; a
// completion prompt ends right after a function's first line; bad directories are clear errors.
#include "peregrine/eval/code_corpus.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "peregrine/core/text_file.h"

namespace peregrine {
namespace {

TEST(CodeCorpus, SplitsTheStandardLibraryByFile) {
  const std::string dir = default_python_source_dir();
  ASSERT_FALSE(dir.empty()) << "no /usr/lib/python3.N holding os.py";
  auto corpus = split_code_corpus(dir);
  ASSERT_TRUE(corpus) << corpus.status().message();
  std::size_t py_files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) py_files += e.is_regular_file() && e.path().extension() == ".py";
  EXPECT_EQ(corpus->train.size() + corpus->eval.size(), py_files);
  EXPECT_EQ(corpus->eval.size(), py_files / 4);
  std::vector<std::string> all = corpus->train;
  all.insert(all.end(), corpus->eval.begin(), corpus->eval.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());  // disjoint
  EXPECT_EQ(all[3], corpus->eval[0]);                                  // the fourth file by name
}

TEST(CodeCorpus, PromptEndsAfterAFunctionsFirstLine) {
  const std::string text = "import os\n\n\nclass A:\n    x = 1\n\n    def f(self):\n        return 2\n\ndef g():\n    pass\n";
  EXPECT_EQ(code_completion_prompt(text, 0, 1000), "import os\n\n\nclass A:\n    x = 1\n\n    def f(self):\n");
  EXPECT_EQ(code_completion_prompt(text, 40, 1000), text.substr(0, text.find("    pass")));
  EXPECT_EQ(code_completion_prompt(text, 40, 50), "");  // no def line ends within 50 characters
  EXPECT_EQ(code_completion_prompt("x = 1\n", 0, 1000), "");
  auto os_py = read_text_file(default_python_source_dir() + "/os.py");
  ASSERT_TRUE(os_py) << os_py.status().message();
  const std::string prompt = code_completion_prompt(*os_py, 1500, 6000);
  ASSERT_GE(prompt.size(), 1500u);
  const std::string last = prompt.substr(prompt.rfind('\n', prompt.size() - 2) + 1);
  EXPECT_EQ(last.substr(last.find_first_not_of(' '), 4), "def ") << last;
}

TEST(CodeCorpus, UnreadableOrSmallDirectoriesAreErrors) {
  EXPECT_EQ(split_code_corpus("/nonexistent/python").status().code(), ErrorCode::kNotFound);
  const std::string empty = ::testing::TempDir() + "/code_corpus_empty";
  std::filesystem::create_directories(empty);
  EXPECT_EQ(split_code_corpus(empty).status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace peregrine
