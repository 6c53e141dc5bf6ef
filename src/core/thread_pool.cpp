#include "peregrine/core/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace peregrine {
namespace {

// ~40 µs of spinning on a 2.6 GHz x86 core (a pause is ~100+ cycles on Zen/Skylake-SP):
// longer than the gap between two matmuls of a decode step, short enough that an idle server
// stops burning its cores almost at once.
constexpr int kSpinIterations = 1000;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

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
  stop_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::parallel_for(std::int64_t n,
                              const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  auto [b, e] = chunk(n, n_threads_, 0);
  if (b < e) fn(b, e);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinIterations) {
      cpu_relax();
    } else {
      std::this_thread::yield();  // a worker is descheduled (more threads than cores)
    }
  }
  job_ = nullptr;
}

std::uint64_t ThreadPool::await_job(std::uint64_t seen) {
  for (int i = 0;; ++i) {
    const std::uint64_t g = generation_.load(std::memory_order_acquire);
    if (g != seen) return g;
    if (i < kSpinIterations) {
      cpu_relax();
    } else if (warm_.load(std::memory_order_relaxed) > 0) {
      std::this_thread::yield();  // warm: spin on, letting an oversubscribed core run others
      i = 0;
    } else {
      break;
    }
  }
  generation_.wait(seen, std::memory_order_acquire);
  return generation_.load(std::memory_order_acquire);
}

void ThreadPool::worker_loop(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    seen = await_job(seen);
    if (stop_.load(std::memory_order_relaxed)) return;
    auto [b, e] = chunk(job_n_, n_threads_, index);
    if (b < e) (*job_)(b, e);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace peregrine
