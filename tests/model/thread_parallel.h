// Tensor-parallel groups and pipeline links of threads in one process (model/tensor_parallel.h,
// model/pipeline_parallel.h): the collectives and messages the MPI ones (dist/) provide, over
// shared memory, so that the split forwards' arithmetic is tested without mpirun. A group's rank
// 0 adds the ranks' buffers in rank order, as the MPI group's reduce does, and every rank copies
// the sum; a pipeline link hands each stage's message to the next stage through a mailbox.
#pragma once

#include <barrier>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "peregrine/model/llama_model.h"
#include "peregrine/model/pipeline_parallel.h"
#include "peregrine/model/tensor_parallel.h"

namespace peregrine::test {

/// The `size` groups of one in-process tensor-parallel run: element r is rank r's; each rank's
/// forwards must run on its own thread.
std::vector<std::shared_ptr<TensorParallelGroup>> thread_tensor_parallel_groups(int size);

/// Runs fn(rank, model) on tp · pp threads, rank = stage · tp + tp_rank holding
/// shard_model_file(shard_pipeline_stage(file, stage, pp), tp_rank, tp) as a model joined to its
/// thread group (tp > 1) and pipeline link (pp > 1), each rank on its own thread; returns the
/// first shard or model error (then nothing ran).
Status run_split(const ModelFile& file, int tp, int pp, const std::function<void(int rank, const LlamaModel& model)>& fn);

/// The `n_stages` links of one in-process pipeline: element s is stage s's; each stage's
/// forwards must run on its own thread.
std::vector<std::shared_ptr<PipelineStageLink>> thread_pipeline_links(int n_stages);

}  // namespace peregrine::test
