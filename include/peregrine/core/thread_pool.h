// A persistent thread pool for data-parallel kernels (no thread creation per op).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace peregrine {

/// `n_threads` workers including the caller: parallel_for runs chunk 0 on the calling thread
/// and the others on n_threads-1 persistent workers. Not re-entrant: one parallel_for at a time.
class ThreadPool {
 public:
  /// n_threads >= 1 (the CLI validates; 1 means run inline, no workers).
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  /// Splits [0, n) into n_threads contiguous chunks and calls fn(begin, end) for each
  /// non-empty chunk, returning when all are done.
  void parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn);

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(std::int64_t, std::int64_t)>* job_ = nullptr;
  std::int64_t job_n_ = 0;
  std::uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace peregrine
