// The KV bookkeeping a Batch needs before a forward writes its rows. The owner of a KV cache
// plans each batch — the engine's Scheduler for the engine's cache, a ModelDrafter for its own
// — and the forward of a planned batch only reads block tables and writes rows (vLLM v1: only
// the scheduler's KV cache manager allocates). A forward handed an unplanned batch (tests,
// eval, one-off callers that own their cache) plans it itself.
#pragma once

#include "peregrine/core/status.h"
#include "peregrine/kv/kv_cache.h"
#include "peregrine/model/batch.h"

namespace peregrine {

/// Makes every row's KV slot of `batch` writable in `cache`: a sequence's rows take
/// consecutive slots from its first row's position (Batch's token-tree rule); a sequence whose
/// first slot is below its length is truncated there first (a rewritten tail: speculative rows);
/// the blocks are reserved (KvCache::reserve, copy-on-write) and each sequence's length is set
/// to its last slot + 1. All or nothing: the free-block check counts, for a sequence rewriting
/// its tail, every block its rows touch (an upper bound of what truncate + reserve take).
/// Errors: kInvalidArgument (a sequence's first row is past its cached positions: a gap),
/// kResourceExhausted (not enough free blocks); on error nothing changed.
Status reserve_batch_kv(const Batch& batch, KvCache& cache);

/// reserve_batch_kv, then marks the batch planned (Batch::kv_planned).
Status plan_batch_kv(Batch& batch, KvCache& cache);

/// Whether `cache` holds a block for every row's slot of `batch` in every group (what a
/// planned batch promises the forward).
bool batch_kv_covered(const Batch& batch, const KvCache& cache);

}  // namespace peregrine
