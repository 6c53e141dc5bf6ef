// Micro-batches of a pipeline-parallel forward (GPipe, Huang et al. 2019): a step's Batch cut
// into consecutive row ranges at sequence boundaries, so that stage s runs micro-batch m + 1
// while stage s + 1 runs micro-batch m (model/pipeline_parallel.h). Each micro-batch holds
// whole sequences: their rows attend only to their own sequence, so the parts run one after
// the other exactly as the whole batch would.
#pragma once

#include <cstdint>
#include <vector>

#include "peregrine/model/batch.h"

namespace peregrine {

/// `batch` cut into at most `n` non-empty micro-batches of consecutive rows, each cut between
/// two sequences and placed to balance the rows; their concatenation is `batch` (row order,
/// every field, lora_slots included). Returns {batch} when n <= 1, when the batch has token-tree
/// rows (parents), or when its sequences' rows are interleaved so that no cut keeps them whole.
std::vector<Batch> split_micro_batches(const Batch& batch, std::int64_t n);

}  // namespace peregrine
