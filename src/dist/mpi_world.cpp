#include "peregrine/dist/mpi_world.h"

#include <cstdlib>
#include <string>

#ifdef PEREGRINE_HAVE_MPI
#include <mpi.h>
#endif

namespace peregrine {

#ifdef PEREGRINE_HAVE_MPI
namespace {

MpiWorld* g_world = nullptr;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

class MpiTensorParallelGroup final : public TensorParallelGroup {
 public:
  explicit MpiTensorParallelGroup(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(std::span<float> x) override {
    const int n = static_cast<int>(x.size());
    if (size_ == 2) {
      MPI_Allreduce(MPI_IN_PLACE, x.data(), n, MPI_FLOAT, MPI_SUM, comm_);
      return;
    }
    MPI_Reduce(rank_ == 0 ? MPI_IN_PLACE : x.data(), x.data(), n, MPI_FLOAT, MPI_SUM, 0, comm_);
    MPI_Bcast(x.data(), n, MPI_FLOAT, 0, comm_);
  }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

class MpiPipelineStage final : public PipelineStageLink {
 public:
  explicit MpiPipelineStage(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &stage_);
    MPI_Comm_size(comm_, &n_stages_);
  }
  int stage() const override { return stage_; }
  int n_stages() const override { return n_stages_; }
  void recv_hidden(std::span<float> x) override {
    MPI_Recv(x.data(), static_cast<int>(x.size()), MPI_FLOAT, stage_ - 1, kHiddenTag, comm_, MPI_STATUS_IGNORE);
  }
  void send_hidden(std::span<const float> x) override {
    MPI_Send(x.data(), static_cast<int>(x.size()), MPI_FLOAT, stage_ + 1, kHiddenTag, comm_);
  }
  void broadcast_logits(std::span<float> logits) override {
    MPI_Bcast(logits.data(), static_cast<int>(logits.size()), MPI_FLOAT, n_stages_ - 1, comm_);
  }

 private:
  static constexpr int kHiddenTag = 1;
  MPI_Comm comm_;
  int stage_ = 0, n_stages_ = 1;
};

}  // namespace

bool mpi_built() { return true; }

Expected<MpiWorld*> mpi_world() {
  if (g_world != nullptr) return g_world;
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    return unavailable("MPI_Init_thread failed");
  }
  std::atexit(finalize_at_exit);
  if (provided < MPI_THREAD_SERIALIZED) {
    return unavailable("this MPI library does not allow calls from more than one thread (MPI_THREAD_SERIALIZED)");
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  static MpiWorld world(rank, size);
  g_world = &world;
  return g_world;
}

bool in_multi_rank_run() { return g_world != nullptr && g_world->size() > 1; }

Expected<std::shared_ptr<TensorParallelGroup>> MpiWorld::tensor_parallel_group(int tp) {
  if (tp < 1 || size_ % tp != 0) {
    return invalid_argument("--tp " + std::to_string(tp) + " does not divide the run's " + std::to_string(size_) + " ranks");
  }
  MPI_Comm comm;
  MPI_Comm_split(MPI_COMM_WORLD, rank_ / tp, rank_, &comm);
  return std::shared_ptr<TensorParallelGroup>(std::make_shared<MpiTensorParallelGroup>(comm));
}

Expected<std::shared_ptr<PipelineStageLink>> MpiWorld::pipeline_stage_link(int tp, int pp) {
  if (tp < 1 || pp < 1 || size_ != tp * pp) {
    return invalid_argument("--tp " + std::to_string(tp) + " --pp " + std::to_string(pp) + " needs " + std::to_string(tp * pp) +
                            " ranks; the run has " + std::to_string(size_));
  }
  MPI_Comm comm;
  MPI_Comm_split(MPI_COMM_WORLD, rank_ % tp, rank_, &comm);
  return std::shared_ptr<PipelineStageLink>(std::make_shared<MpiPipelineStage>(comm));
}

std::vector<std::int64_t> MpiWorld::all_gather(std::int64_t value) const {
  std::vector<std::int64_t> all(static_cast<std::size_t>(size_));
  MPI_Allgather(&value, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, MPI_COMM_WORLD);
  return all;
}

void MpiWorld::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this keeps the compiler's [[noreturn]] promise
}

#else  // no MPI in this build

bool mpi_built() { return false; }

Expected<MpiWorld*> mpi_world() {
  return unavailable("this peregrine was built without MPI: install Open MPI (Debian: openmpi-bin libopenmpi-dev) and rebuild");
}

bool in_multi_rank_run() { return false; }

Expected<std::shared_ptr<TensorParallelGroup>> MpiWorld::tensor_parallel_group(int) {
  return unavailable("this peregrine was built without MPI");
}

Expected<std::shared_ptr<PipelineStageLink>> MpiWorld::pipeline_stage_link(int, int) {
  return unavailable("this peregrine was built without MPI");
}

std::vector<std::int64_t> MpiWorld::all_gather(std::int64_t value) const { return {value}; }

void MpiWorld::abort(int code) const { std::_Exit(code); }

#endif

}  // namespace peregrine
