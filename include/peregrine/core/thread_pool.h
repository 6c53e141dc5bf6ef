// A persistent thread pool for data-parallel kernels (no thread creation per op).
//
// Decode runs ~8 matmuls per layer, each a parallel_for of tens of microseconds, so waking the
// workers must cost far less than that: workers spin on an atomic job counter for a short
// while (kSpinIterations pause instructions, a few tens of microseconds) before blocking on it
// (C++20 atomic wait = futex on Linux), and the caller spins for completion, yielding when the
// machine is oversubscribed. Inside a forward, where single-threaded steps (norms, RoPE, short
// attention) can outlast that spin, a WarmScope keeps the workers spinning throughout, as
// llama.cpp's threads spin for a whole graph: a futex wake-up costs tens of microseconds per op.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace peregrine {

/// `n_threads` workers including the caller: parallel_for runs chunk 0 on the calling thread
/// and the others on n_threads-1 persistent workers. Not re-entrant: one parallel_for at a time
/// (call it from one thread).
class ThreadPool {
 public:
  /// n_threads >= 1 (values below are clamped to 1, which runs everything inline).
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  /// Splits [0, n) into n_threads contiguous chunks of sizes differing by at most one and calls
  /// fn(begin, end) for each non-empty chunk, returning when all are done. fn must not throw.
  void parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn);

  /// While one lives, idle workers spin (yielding now and then) instead of blocking between
  /// jobs; scopes nest. Create it on the thread that calls parallel_for.
  class WarmScope {
   public:
    explicit WarmScope(ThreadPool& pool) : pool_(pool) { pool_.warm_.fetch_add(1, std::memory_order_relaxed); }
    ~WarmScope() { pool_.warm_.fetch_sub(1, std::memory_order_relaxed); }
    WarmScope(const WarmScope&) = delete;
    WarmScope& operator=(const WarmScope&) = delete;

   private:
    ThreadPool& pool_;
  };

 private:
  void worker_loop(int index);
  /// Waits until generation_ differs from `seen` (spin, then block); returns the new value.
  std::uint64_t await_job(std::uint64_t seen);

  int n_threads_;
  std::vector<std::thread> workers_;
  // The job: written by parallel_for before generation_ is bumped (release), read after.
  const std::function<void(std::int64_t, std::int64_t)>* job_ = nullptr;
  std::int64_t job_n_ = 0;
  std::atomic<std::uint64_t> generation_{0};  // bumped once per job; stop_ is checked after
  std::atomic<int> pending_{0};               // workers still running the current job
  std::atomic<bool> stop_{false};
  std::atomic<int> warm_{0};                  // live WarmScopes
};

}  // namespace peregrine
