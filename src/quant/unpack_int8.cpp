#include "peregrine/quant/unpack_int8.h"

#include <cstring>

#include "peregrine/quant/fp16.h"

namespace peregrine {

float unpack_block_int8(DType t, const std::uint8_t* block, std::int8_t* q) {
  std::uint16_t d;
  std::memcpy(&d, block, sizeof d);
  const std::uint8_t* data = block + sizeof d;
  if (t == DType::kQ8_0) {
    std::memcpy(q, data, kQuantBlock);
  } else {
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      q[j] = static_cast<std::int8_t>((data[j] & 0x0f) - 8);
      q[j + kQuantBlock / 2] = static_cast<std::int8_t>((data[j] >> 4) - 8);
    }
  }
  return f16_to_f32(d);
}

}  // namespace peregrine
