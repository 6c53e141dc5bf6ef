// A tensor-parallel group of threads in one process (model/tensor_parallel.h): the same
// collective the MPI group (dist/) provides, over shared memory, so that the sharded forward's
// arithmetic is tested without mpirun. Rank 0 adds the ranks' buffers in rank order, as the MPI
// group's reduce does, and every rank copies the sum.
#pragma once

#include <barrier>
#include <memory>
#include <span>
#include <vector>

#include "peregrine/model/tensor_parallel.h"

namespace peregrine::test {

/// The `size` groups of one in-process tensor-parallel run: element r is rank r's; each rank's
/// forwards must run on its own thread.
std::vector<std::shared_ptr<TensorParallelGroup>> thread_tensor_parallel_groups(int size);

}  // namespace peregrine::test
