// A persistent thread pool for data-parallel kernels (no thread creation per op).
//
// Decode runs ~8 matmuls per layer, each a parallel_for of tens of microseconds, so waking the
// workers must cost far less than that: workers spin on an atomic job counter for a short
// while (kSpinIterations pause instructions, a few tens of microseconds) before blocking on it
// (C++20 atomic wait = futex on Linux), and the caller spins for completion, yielding when the
// machine is oversubscribed.
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
};

}  // namespace peregrine
