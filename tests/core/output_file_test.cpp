// OutputFile: bytes written and kept on close(); removed when dropped unclosed; errors name
// the path.
#include "peregrine/core/output_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "test_paths.h"

namespace peregrine {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(OutputFile, WritesAndKeepsTheFileOnClose) {
  const std::string path = test::make_temp_dir() + "/f.bin";
  auto f = OutputFile::create(path);
  ASSERT_TRUE(f) << f.status().message();
  const std::uint8_t abc[] = {'a', 'b', 'c'};
  ASSERT_TRUE(f->write(abc).is_ok());
  ASSERT_TRUE(f->write_zeros(2).is_ok());
  EXPECT_EQ(f->size(), 5u);
  ASSERT_TRUE(f->close().is_ok());
  EXPECT_EQ(read_all(path), std::string("abc\0\0", 5));
  EXPECT_EQ(f->write(abc).code(), ErrorCode::kIoError);  // closed
}

TEST(OutputFile, AnUnclosedFileIsRemoved) {
  const std::string path = test::make_temp_dir() + "/f.bin";
  {
    auto f = OutputFile::create(path);
    ASSERT_TRUE(f);
    OutputFile moved = std::move(*f);  // the moved-from object owns nothing
    EXPECT_TRUE(std::filesystem::exists(path));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(OutputFile, UncreatablePathIsAnIoErrorNamingIt) {
  auto f = OutputFile::create("/nonexistent-dir/f.bin");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.status().code(), ErrorCode::kIoError);
  EXPECT_NE(f.status().message().find("cannot create /nonexistent-dir/f.bin"), std::string::npos);
}

}  // namespace
}  // namespace peregrine
