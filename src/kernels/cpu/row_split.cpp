#include "kernels/cpu/row_split.h"

#include <algorithm>
#include <atomic>
#include <vector>

namespace peregrine {

void split_rows(std::int64_t out, std::int64_t macs_per_row, std::int64_t tile, ThreadPool& pool,
                std::int64_t min_parallel_macs, const std::function<void(std::int64_t, std::int64_t)>& rows) {
  if (out * macs_per_row < min_parallel_macs) {
    rows(0, out);
    return;
  }
  pool.parallel_for((out + tile - 1) / tile, [&](std::int64_t begin, std::int64_t end) {
    rows(begin * tile, std::min(out, end * tile));
  });
}

void split_rows_guided(std::int64_t out, std::size_t row_bytes, std::int64_t tile, ThreadPool& pool,
                       const std::function<void(std::int64_t, std::int64_t)>& rows) {
  constexpr std::size_t kMinRangeBytes = std::size_t{1} << 16;
  const auto round_to_tiles = [tile](std::int64_t n) { return std::max(tile, n / tile * tile); };
  const std::int64_t min_rows = round_to_tiles(static_cast<std::int64_t>(kMinRangeBytes / std::max<std::size_t>(row_bytes, 1)));
  const std::int64_t parts = 2 * pool.n_threads();
  std::atomic<std::int64_t> next{0};
  pool.parallel_for(pool.n_threads(), [&](std::int64_t, std::int64_t) {
    std::int64_t begin = next.load(std::memory_order_relaxed);
    while (begin < out) {
      const std::int64_t end = std::min(out, begin + std::max(min_rows, round_to_tiles((out - begin) / parts)));
      if (next.compare_exchange_weak(begin, end, std::memory_order_relaxed)) {
        rows(begin, end);
        begin = next.load(std::memory_order_relaxed);
      }
    }
  });
}

void split_products_guided(std::span<const std::int64_t> outs, std::int64_t macs, std::size_t row_bytes,
                           std::int64_t tile, ThreadPool& pool, std::int64_t min_parallel_macs,
                           const std::function<void(std::size_t, std::int64_t, std::int64_t)>& part) {
  std::vector<std::int64_t> first_row;  // of each product in the rows of all of them
  std::int64_t rows = 0;
  for (std::int64_t out : outs) {
    first_row.push_back(rows);
    rows += out;
  }
  const auto parts = [&](std::int64_t begin, std::int64_t end) {
    for (std::size_t p = 0; p < outs.size(); ++p) {
      const std::int64_t b = std::max(begin, first_row[p]) - first_row[p];
      const std::int64_t e = std::min(end, first_row[p] + outs[p]) - first_row[p];
      if (b < e) part(p, b, e);
    }
  };
  if (macs < min_parallel_macs) return parts(0, rows);
  split_rows_guided(rows, row_bytes, tile, pool, parts);
}

}  // namespace peregrine
