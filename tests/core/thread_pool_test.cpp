#include "peregrine/core/thread_pool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace peregrine {
namespace {

constexpr int kThreadCounts[] = {1, 2, 3, 8};
constexpr std::int64_t kSizes[] = {0, 1, 2, 3, 17, 1000};

TEST(ThreadPool, ClampsThreadCountToAtLeastOne) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.n_threads(), 1);
  EXPECT_EQ(ThreadPool(3).n_threads(), 3);
}

TEST(ThreadPool, CoversRangeExactlyOnce) {
  for (int threads : kThreadCounts) {
    ThreadPool pool(threads);
    for (std::int64_t n : kSizes) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      pool.parallel_for(n, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
      });
      for (std::int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1)
            << "index " << i << " of n=" << n << " with " << threads << " threads";
      }
    }
  }
}

TEST(ThreadPool, ChunksAreContiguousNonEmptyAndBalanced) {
  for (int threads : kThreadCounts) {
    ThreadPool pool(threads);
    for (std::int64_t n : kSizes) {
      std::mutex mu;
      std::vector<std::pair<std::int64_t, std::int64_t>> chunks;
      pool.parallel_for(n, [&](std::int64_t b, std::int64_t e) {
        std::lock_guard<std::mutex> lock(mu);
        chunks.emplace_back(b, e);
      });
      std::sort(chunks.begin(), chunks.end());
      // Sorted chunks tile [0, n) with no gap or overlap; no empty chunk is handed out.
      std::int64_t next = 0;
      for (auto [b, e] : chunks) {
        EXPECT_EQ(b, next) << "n=" << n << " threads=" << threads;
        EXPECT_LT(b, e) << "empty chunk, n=" << n << " threads=" << threads;
        next = e;
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(static_cast<int>(chunks.size()), threads);
      if (n > 0) {
        EXPECT_EQ(static_cast<std::int64_t>(chunks.size()), std::min<std::int64_t>(n, threads));
        // Balanced split: sizes differ by at most one.
        std::int64_t lo = n, hi = 0;
        for (auto [b, e] : chunks) lo = std::min(lo, e - b), hi = std::max(hi, e - b);
        EXPECT_LE(hi - lo, 1) << "n=" << n << " threads=" << threads;
      }
    }
  }
}

TEST(ThreadPool, ZeroAndNegativeSizesNeverCallFn) {
  ThreadPool pool(3);
  int calls = 0;
  pool.parallel_for(0, [&](std::int64_t, std::int64_t) { ++calls; });
  pool.parallel_for(-5, [&](std::int64_t, std::int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ThreadPool, RepeatedCallsDoNotDeadlockOrLoseWork) {
  for (int threads : kThreadCounts) {
    ThreadPool pool(threads);
    std::atomic<std::int64_t> total{0};
    std::int64_t expected = 0;
    for (int iter = 0; iter < 1000; ++iter) {
      const std::int64_t n = iter % 11;  // includes 0, 1 and n < threads
      expected += n * (n - 1) / 2;
      pool.parallel_for(n, [&](std::int64_t b, std::int64_t e) {
        std::int64_t s = 0;
        for (std::int64_t i = b; i < e; ++i) s += i;
        total.fetch_add(s);
      });
    }
    EXPECT_EQ(total.load(), expected) << threads << " threads";
  }
}

TEST(ThreadPool, ResultsAreVisibleToCallerAfterReturn) {
  // Plain (non-atomic) writes in the workers must be visible once parallel_for returns.
  ThreadPool pool(3);
  std::vector<std::int64_t> out(1000, -1);
  for (int iter = 0; iter < 50; ++iter) {
    pool.parallel_for(1000, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) out[static_cast<std::size_t>(i)] = i * iter;
    });
    for (std::int64_t i = 0; i < 1000; ++i) ASSERT_EQ(out[static_cast<std::size_t>(i)], i * iter);
  }
}

// Warm workers spin through gaps far longer than the spin budget (here 5 ms between jobs,
// more threads than cores) and still run every job; after the scopes end they block again,
// and the pool still runs jobs and shuts down.
TEST(ThreadPool, WarmScopesNestAndOutliveLongGaps) {
  ThreadPool pool(4);
  std::atomic<std::int64_t> total{0};
  const auto job = [&] { pool.parallel_for(8, [&](std::int64_t b, std::int64_t e) { total.fetch_add(e - b); }); };
  {
    const ThreadPool::WarmScope outer(pool);
    job();
    {
      const ThreadPool::WarmScope inner(pool);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      job();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    job();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  job();
  EXPECT_EQ(total.load(), 32);
}

}  // namespace
}  // namespace peregrine
