#include "thread_tensor_parallel.h"

#include <algorithm>

namespace peregrine::test {
namespace {

struct Shared {
  explicit Shared(int size) : size(size), sync(size), buffers(static_cast<std::size_t>(size)) {}
  int size;
  std::barrier<> sync;
  std::vector<std::span<float>> buffers;
  std::vector<float> sum;
};

class ThreadGroup final : public TensorParallelGroup {
 public:
  ThreadGroup(std::shared_ptr<Shared> shared, int rank) : shared_(std::move(shared)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return shared_->size; }
  void all_reduce_sum(std::span<float> x) override {
    Shared& s = *shared_;
    s.buffers[static_cast<std::size_t>(rank_)] = x;
    s.sync.arrive_and_wait();  // every rank's buffer is posted
    if (rank_ == 0) {
      s.sum.assign(x.begin(), x.end());
      for (int r = 1; r < s.size; ++r) {
        const std::span<float> b = s.buffers[static_cast<std::size_t>(r)];
        for (std::size_t i = 0; i < s.sum.size(); ++i) s.sum[i] += b[i];
      }
    }
    s.sync.arrive_and_wait();  // the sum is ready
    std::copy(s.sum.begin(), s.sum.end(), x.begin());
    s.sync.arrive_and_wait();  // every rank has copied it: the next call may overwrite
  }

 private:
  std::shared_ptr<Shared> shared_;
  int rank_;
};

}  // namespace

std::vector<std::shared_ptr<TensorParallelGroup>> thread_tensor_parallel_groups(int size) {
  auto shared = std::make_shared<Shared>(size);
  std::vector<std::shared_ptr<TensorParallelGroup>> groups;
  for (int r = 0; r < size; ++r) groups.push_back(std::make_shared<ThreadGroup>(shared, r));
  return groups;
}

}  // namespace peregrine::test
