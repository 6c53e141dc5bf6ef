#include "peregrine/core/available_memory.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace peregrine {
namespace {

TEST(AvailableMemory, ParsesMemAvailableInKibibytes) {
  EXPECT_EQ(parse_mem_available("MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   22000000 kB\n"),
            std::uint64_t{22000000} * 1024);
  EXPECT_EQ(parse_mem_available("MemAvailable: 0 kB\n"), std::uint64_t{0});
}

TEST(AvailableMemory, MissingOrMalformedLinesGiveNothing) {
  EXPECT_FALSE(parse_mem_available(""));
  EXPECT_FALSE(parse_mem_available("MemTotal: 100 kB\nMemFree: 50 kB\n"));
  EXPECT_FALSE(parse_mem_available("MemAvailable: lots kB\n"));
  EXPECT_FALSE(parse_mem_available("MemAvailable: 100 MB\n"));
  EXPECT_FALSE(parse_mem_available("NotMemAvailable: 100 kB\n"));
  EXPECT_FALSE(parse_mem_available("MemAvailable: 99999999999999999999 kB\n"));
}

// This machine's /proc/meminfo: a value no larger than MemTotal.
TEST(AvailableMemory, ThisMachineHasSome) {
  const auto bytes = available_memory_bytes();
  ASSERT_TRUE(bytes);
  std::ifstream in("/proc/meminfo");
  std::ostringstream text;
  text << in.rdbuf();
  std::uint64_t total_kib = 0;
  ASSERT_EQ(std::sscanf(text.str().c_str(), "MemTotal: %lu kB", &total_kib), 1);
  EXPECT_GT(*bytes, 0u);
  EXPECT_LE(*bytes, total_kib * 1024);
}

}  // namespace
}  // namespace peregrine
