#include "peregrine/core/thread_pool.h"

namespace peregrine {
namespace {

std::pair<std::int64_t, std::int64_t> chunk(std::int64_t n, int parts, int index) {
  const std::int64_t base = n / parts, extra = n % parts;
  const std::int64_t begin = index * base + std::min<std::int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::parallel_for(std::int64_t n,
                              const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    pending_ = n_threads_ - 1;
    ++generation_;
  }
  work_cv_.notify_all();
  auto [b, e] = chunk(n, n_threads_, 0);
  if (b < e) fn(b, e);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    const std::function<void(std::int64_t, std::int64_t)>* job;
    std::int64_t n;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
    }
    auto [b, e] = chunk(n, n_threads_, index);
    if (b < e) (*job)(b, e);
    {
      std::lock_guard<std::mutex> lock(mu_);
      --pending_;
    }
    done_cv_.notify_one();
  }
}

}  // namespace peregrine
