// HugePageBuffer (core/huge_page_buffer.h): 2 MiB aligned, zero-filled, writable to its last
// byte, moved without a second unmap.
#include "peregrine/core/huge_page_buffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace peregrine {
namespace {

TEST(HugePageBuffer, IsAlignedZeroedAndWritable) {
  for (std::size_t size : {std::size_t{1}, std::size_t{4097}, HugePageBuffer::kHugePageBytes, 3 * HugePageBuffer::kHugePageBytes + 5}) {
    auto buf = HugePageBuffer::allocate(size);
    ASSERT_TRUE(buf) << buf.status().message();
    ASSERT_EQ(buf->size(), size);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buf->data()) % HugePageBuffer::kHugePageBytes, 0u);
    EXPECT_TRUE(std::all_of(buf->data(), buf->data() + size, [](std::uint8_t b) { return b == 0; }));
    std::fill(buf->data(), buf->data() + size, std::uint8_t{0xa5});
    EXPECT_EQ(buf->data()[size - 1], 0xa5);
  }
}

TEST(HugePageBuffer, EmptyAndMoved) {
  auto empty = HugePageBuffer::allocate(0);
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->data(), nullptr);
  EXPECT_EQ(empty->size(), 0u);
  auto a = HugePageBuffer::allocate(100);
  ASSERT_TRUE(a);
  std::uint8_t* p = a->data();
  HugePageBuffer b = std::move(*a);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a->data(), nullptr);
  HugePageBuffer c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  c.data()[99] = 7;
  EXPECT_EQ(c.bytes()[99], 7);
}

TEST(HugePageBuffer, RefusesAnImpossibleSize) {
  auto buf = HugePageBuffer::allocate(std::size_t{1} << 62);
  ASSERT_FALSE(buf);
  EXPECT_EQ(buf.status().code(), ErrorCode::kResourceExhausted);
}

}  // namespace
}  // namespace peregrine
