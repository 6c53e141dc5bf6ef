#include "kernels/cpu/row_split.h"

#include <algorithm>

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

}  // namespace peregrine
