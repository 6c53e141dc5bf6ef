// The MPI world of a multi-process run (Open MPI; `mpirun -np N peregrine ...` starts the ranks):
// initialization, the tensor-parallel groups over it, and ending every rank on an error.
// Built against Open MPI where the build machine has it (CMake's FindMPI); without it every
// entry point reports kUnavailable.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/model/pipeline_parallel.h"
#include "peregrine/model/tensor_parallel.h"

namespace peregrine {

/// Whether this build links MPI.
bool mpi_built();

/// The world: initialized once per process by mpi_world() (MPI_Init_thread with
/// MPI_THREAD_SERIALIZED: any thread may call MPI, one at a time — the engine's step loop runs
/// the forwards), finalized at process exit. MPI errors abort every rank with MPI's message
/// (MPI_ERRORS_ARE_FATAL): a collective cannot be left half done.
class MpiWorld {
 public:
  int rank() const { return rank_; }
  int size() const { return size_; }

  /// The tensor-parallel group of this rank: the `tp` consecutive world ranks [rank / tp · tp,
  /// + tp) (MPI_Comm_split), whose all_reduce_sum is MPI_Allreduce (MPI_SUM, f32) for 2 ranks
  /// (IEEE addition commutes: both get the same bits) and MPI_Reduce to the group's first rank
  /// plus MPI_Bcast beyond (one summation order for everyone). Collective over the world: every
  /// rank calls it with the same tp. Errors: kInvalidArgument unless tp >= 1 and size() % tp == 0.
  Expected<std::shared_ptr<TensorParallelGroup>> tensor_parallel_group(int tp);

  /// The pipeline link of this rank for a run of tp · pp ranks laid out stage-major (world rank
  /// = stage · tp + tp_rank, so that a stage's tensor-parallel group is tensor_parallel_group's
  /// consecutive ranks): the ranks of one tp_rank form a communicator (MPI_Comm_split) in which
  /// a stage sends its residual stream to the next (MPI_Send / MPI_Recv) and the last stage
  /// broadcasts the logits (MPI_Bcast). Collective over the world. Errors: kInvalidArgument
  /// unless tp, pp >= 1 and size() == tp · pp.
  Expected<std::shared_ptr<PipelineStageLink>> pipeline_stage_link(int tp, int pp);

  /// Every rank's `value`, in rank order (MPI_Allgather; collective over the world).
  std::vector<std::int64_t> all_gather(std::int64_t value) const;

  /// Ends every rank of the run (MPI_Abort with `code`): for an error on one rank, which would
  /// otherwise leave the others waiting in a collective. Does not return.
  [[noreturn]] void abort(int code) const;

 private:
  friend Expected<MpiWorld*> mpi_world();
  MpiWorld(int rank, int size) : rank_(rank), size_(size) {}
  int rank_, size_;
};

/// The process's MPI world, initializing MPI on the first call (a process started without
/// mpirun is a world of one rank). Errors: kUnavailable when this build has no MPI ("install
/// Open MPI — Debian's openmpi-bin libopenmpi-dev — and rebuild").
Expected<MpiWorld*> mpi_world();

/// Whether mpi_world() has been initialized in this process with more than one rank.
bool in_multi_rank_run();

}  // namespace peregrine
