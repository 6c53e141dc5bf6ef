// The messages of disaggregated prefill / decode (dist/kv_transfer.h): a malformed prefill
// request is a clear error, and rows that do not fit their request end it with an error
// instead of being written. The whole exchange on the real model is in engine_test's
// ARemotePrefill tests and, across two processes, server/serve_parallel_test.
#include "peregrine/dist/kv_transfer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "kv/kv_test_shape.h"

namespace peregrine {
namespace {

TEST(KvTransfer, PrefillRequestsRoundTripAndMalformedOnesAreRefused) {
  const PrefillRequest r{42, 3, {1, 5, 9, 13, 17}};
  const std::vector<std::uint8_t> m = encode_prefill_request(r);
  auto back = decode_prefill_request(m);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->id, 42u);
  EXPECT_EQ(back->from, 3);
  EXPECT_EQ(back->tokens, r.tokens);
  for (std::size_t cut : {std::size_t{0}, std::size_t{7}, m.size() - 1}) {
    auto bad = decode_prefill_request(std::span(m).first(cut));
    ASSERT_FALSE(bad) << "cut at " << cut;
    EXPECT_EQ(bad.status().code(), ErrorCode::kCorruptFile);
  }
  EXPECT_FALSE(decode_prefill_request(encode_prefill_request({1, 5, {1, 2, 3, 4, 5}})));  // from past the tokens
}

std::vector<std::uint8_t> rows(std::uint64_t id, std::int64_t layer, std::int64_t first, std::int64_t n, std::int64_t bytes) {
  KvRowsHeader h{id, layer, first, n, 0, 0};
  std::vector<std::uint8_t> m(sizeof h + static_cast<std::size_t>(bytes), 0x5a);
  std::memcpy(m.data(), &h, sizeof h);
  return m;
}

TEST(KvTransfer, RowsThatDoNotFitTheirRequestEndItWithAnError) {
  auto cache = KvCache::create(test::kv_test_shape(), {4, 4, DType::kF32});
  ASSERT_TRUE(cache);
  ASSERT_TRUE(cache->reserve(0, 6).is_ok());
  ASSERT_TRUE(cache->reserve(1, 6).is_ok());
  KvReceiver receiver;
  const std::int64_t row = cache->row_bytes();
  const auto end = [&](std::uint64_t id) { return receiver.apply(rows(id, kEndOfRequest, 0, 0, 0), *cache); };
  receiver.expect(7, 0, 2, 6, 2);  // rows [2, 6) of 2 layers
  EXPECT_FALSE(receiver.apply(rows(7, 0, 2, 4, 2 * 4 * row), *cache));
  EXPECT_FALSE(receiver.apply(rows(7, 1, 2, 1, 2 * 1 * row), *cache));  // layer 1 in two parts
  EXPECT_FALSE(receiver.apply(rows(7, 1, 3, 3, 2 * 3 * row), *cache));
  EXPECT_FALSE(receiver.apply(rows(9, 0, 0, 6, 2 * 6 * row), *cache));  // not expected: dropped
  EXPECT_EQ(receiver.bytes(), 2 * 8 * row);
  auto ok = end(7);
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->second.is_ok()) << ok->second.message();
  EXPECT_EQ(cache->length(0), 6);
  // Each of these ends its request with kInternal, the cache length untouched.
  const std::vector<std::vector<std::uint8_t>> bad = {
      rows(8, 2, 2, 4, 2 * 4 * row),                  // no layer 2
      rows(8, 0, 1, 4, 2 * 4 * row),                  // below `from`: the engine's own rows
      rows(8, 0, 2, INT64_MAX, 2 * 4 * row),          // a count that would overflow
      rows(8, 0, 2, 4, 2 * 4 * row + 1),              // a payload of another size
      rows(8, 0, 2, 4, 2 * 4 * row),                  // fits, but layer 1 never comes
  };
  for (const auto& message : bad) {
    receiver.expect(8, 1, 2, 6, 2);
    EXPECT_FALSE(receiver.apply(message, *cache));
    auto failed = end(8);
    ASSERT_TRUE(failed);
    EXPECT_EQ(failed->second.code(), ErrorCode::kInternal) << failed->second.message();
    EXPECT_EQ(cache->length(1), 0);
  }
}

}  // namespace
}  // namespace peregrine
