// How matmul's kernels split output rows across the thread pool.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "peregrine/core/thread_pool.h"

namespace peregrine {

/// Calls rows(begin, end) to cover the output rows [0, out) of a product of
/// out·macs_per_row multiply-adds: once on the calling thread when that is below
/// min_parallel_macs (see matmul.h), else split across `pool` in contiguous chunks of whole
/// `tile`s (the last one may be shorter). Preconditions: out >= 0, tile >= 1.
void split_rows(std::int64_t out, std::int64_t macs_per_row, std::int64_t tile, ThreadPool& pool,
                std::int64_t min_parallel_macs, const std::function<void(std::int64_t, std::int64_t)>& rows);

/// Calls rows(begin, end) to cover [0, out) from every thread of `pool`: threads take row
/// ranges from a shared counter, guided (as OpenMP's schedule(guided)): each takes 1/(2·threads)
/// of the rows still left, at least ~64 KiB of weights (row_bytes per row), in multiples of
/// `tile` rows. Long ranges keep the hardware prefetcher's streams going (64 KiB ranges
/// throughout ran ~20% slower on the tinyllama GEMVs); taking ranges rather than being assigned
/// halves lets the others absorb the share of a late-waking or preempted thread.
/// Preconditions: out >= 0, tile >= 1; not called from inside a pool.parallel_for.
void split_rows_guided(std::int64_t out, std::size_t row_bytes, std::int64_t tile, ThreadPool& pool,
                       const std::function<void(std::int64_t, std::int64_t)>& rows);

/// Several products' output rows side by side (e.g. a layer's Q, K and V, or a token's experts),
/// split as one range: calls part(p, begin, end) for rows [begin, end) of product p, covering
/// [0, outs[p]) of every p — on the calling thread when `macs` (the products' multiply-adds in
/// all) is below min_parallel_macs, else by split_rows_guided over the concatenated rows
/// (row_bytes: the longest row's bytes), so one parallel region serves all the products.
/// Preconditions: `tile` divides every outs[p]; not called from inside a pool.parallel_for.
void split_products_guided(std::span<const std::int64_t> outs, std::int64_t macs, std::size_t row_bytes,
                           std::int64_t tile, ThreadPool& pool, std::int64_t min_parallel_macs,
                           const std::function<void(std::size_t, std::int64_t, std::int64_t)>& part);

}  // namespace peregrine
