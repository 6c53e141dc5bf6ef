#include "thread_parallel.h"

#include <algorithm>
#include <thread>
#include <condition_variable>
#include <mutex>

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

// A one-slot mailbox per message kind: put waits until the slot is empty, take until it is full.
class Mailbox {
 public:
  void put(std::span<const float> x) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !full_; });
    data_.assign(x.begin(), x.end());
    full_ = true;
    changed_.notify_all();
  }
  void take(std::span<float> x) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return full_; });
    std::copy(data_.begin(), data_.end(), x.begin());
    full_ = false;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<float> data_;
  bool full_ = false;
};

struct Pipeline {
  explicit Pipeline(int n) : n_stages(n), hidden(static_cast<std::size_t>(n)), logits(static_cast<std::size_t>(n)) {}
  int n_stages;
  std::vector<Mailbox> hidden;  // [s]: from stage s - 1 to stage s
  std::vector<Mailbox> logits;  // [s]: from the last stage to stage s
};

class ThreadStage final : public PipelineStageLink {
 public:
  ThreadStage(std::shared_ptr<Pipeline> p, int stage) : p_(std::move(p)), stage_(stage) {}
  int stage() const override { return stage_; }
  int n_stages() const override { return p_->n_stages; }
  void recv_hidden(std::span<float> x) override { p_->hidden[static_cast<std::size_t>(stage_)].take(x); }
  void send_hidden(std::span<const float> x) override { p_->hidden[static_cast<std::size_t>(stage_ + 1)].put(x); }
  void broadcast_logits(std::span<float> logits) override {
    if (stage_ == p_->n_stages - 1) {
      for (int s = 0; s < stage_; ++s) p_->logits[static_cast<std::size_t>(s)].put(logits);
    } else {
      p_->logits[static_cast<std::size_t>(stage_)].take(logits);
    }
  }

 private:
  std::shared_ptr<Pipeline> p_;
  int stage_;
};

}  // namespace

std::vector<std::shared_ptr<PipelineStageLink>> thread_pipeline_links(int n_stages) {
  auto p = std::make_shared<Pipeline>(n_stages);
  std::vector<std::shared_ptr<PipelineStageLink>> links;
  for (int s = 0; s < n_stages; ++s) links.push_back(std::make_shared<ThreadStage>(p, s));
  return links;
}

std::vector<std::shared_ptr<TensorParallelGroup>> thread_tensor_parallel_groups(int size) {
  auto shared = std::make_shared<Shared>(size);
  std::vector<std::shared_ptr<TensorParallelGroup>> groups;
  for (int r = 0; r < size; ++r) groups.push_back(std::make_shared<ThreadGroup>(shared, r));
  return groups;
}

Status run_split(const ModelFile& file, int tp, int pp, const std::function<void(int, const LlamaModel&)>& fn) {
  std::vector<LlamaModel> models;
  std::vector<std::vector<std::shared_ptr<TensorParallelGroup>>> groups;  // [stage][tp_rank]
  std::vector<std::vector<std::shared_ptr<PipelineStageLink>>> links;     // [tp_rank][stage]
  for (int s = 0; s < pp; ++s) groups.push_back(thread_tensor_parallel_groups(tp));
  for (int r = 0; r < tp; ++r) links.push_back(thread_pipeline_links(pp));
  for (int s = 0; s < pp; ++s) {
    PEREGRINE_ASSIGN_OR_RETURN(ModelFile stage, shard_pipeline_stage(file, s, pp));
    for (int r = 0; r < tp; ++r) {
      PEREGRINE_ASSIGN_OR_RETURN(ModelFile shard, shard_model_file(stage, r, tp));
      PEREGRINE_ASSIGN_OR_RETURN(LlamaModel m, LlamaModel::create(std::move(shard)));
      if (tp > 1) PEREGRINE_RETURN_IF_ERROR(m.set_tensor_parallel(groups[static_cast<std::size_t>(s)][static_cast<std::size_t>(r)]));
      if (pp > 1) PEREGRINE_RETURN_IF_ERROR(m.set_pipeline_stage(links[static_cast<std::size_t>(r)][static_cast<std::size_t>(s)]));
      models.push_back(std::move(m));
    }
  }
  std::vector<std::jthread> threads;
  for (int rank = 0; rank < tp * pp; ++rank) threads.emplace_back([&, rank] { fn(rank, models[static_cast<std::size_t>(rank)]); });
  return Status::ok();
}

}  // namespace peregrine::test
