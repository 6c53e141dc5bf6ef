#include "peregrine/kv/kv_layer_view.h"

#include <cstring>

namespace peregrine {

KvLayerView chain_view(const KvLayerView& view, std::int64_t p0, std::span<const std::int32_t> path,
                       std::vector<std::uint8_t>& buffer) {
  KvLayerView out = view;
  out.tail_begin = p0 / view.block_size * view.block_size;
  const std::int64_t cached = p0 - out.tail_begin, n = cached + static_cast<std::int64_t>(path.size());
  buffer.resize(static_cast<std::size_t>(n * view.row_bytes));
  const auto rb = static_cast<std::size_t>(view.row_bytes);
  for (std::int64_t i = 0; i < cached; ++i) std::memcpy(&buffer[static_cast<std::size_t>(i) * rb], view.row(out.tail_begin + i), rb);
  for (std::size_t j = 0; j < path.size(); ++j) {
    std::memcpy(&buffer[static_cast<std::size_t>(cached + static_cast<std::int64_t>(j)) * rb], view.row(p0 + path[j]), rb);
  }
  out.tail = buffer.data();
  return out;
}

}  // namespace peregrine
