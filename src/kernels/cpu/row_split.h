// How matmul's kernels split output rows across the thread pool.
#pragma once

#include <cstdint>
#include <functional>

#include "peregrine/core/thread_pool.h"

namespace peregrine {

/// Calls rows(begin, end) to cover the output rows [0, out) of a product of
/// out·macs_per_row multiply-adds: once on the calling thread when that is below
/// min_parallel_macs (see matmul.h), else split across `pool` in contiguous chunks of whole
/// `tile`s (the last one may be shorter). Preconditions: out >= 0, tile >= 1.
void split_rows(std::int64_t out, std::int64_t macs_per_row, std::int64_t tile, ThreadPool& pool,
                std::int64_t min_parallel_macs, const std::function<void(std::int64_t, std::int64_t)>& rows);

}  // namespace peregrine
