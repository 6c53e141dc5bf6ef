#include "peregrine/prune/gguf_storage.h"

#include <cstring>
#include <memory>

#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/fp16.h"
#include "peregrine/quant/int_group.h"

namespace peregrine {
namespace {

constexpr std::int64_t kBlock = 32;

bool block_compatible(const TensorView& t) {
  const QuantParams& p = t.quant;
  return !p.asymmetric && p.act_bits == 16 && (p.bits == 4 || p.bits == 8) && p.group_size % kBlock == 0 &&
         t.row_length() % kBlock == 0;
}

// One row of kInt codes as Q4_0 ({f16 d; 16 bytes: value j low nibble, j + 16 high}) or Q8_0
// ({f16 d; int8 q[32]}) blocks; d = the group's scale, q = code (Q4_0) or code − 128 (Q8_0).
void write_blocks(const QuantParams& p, const IntRow& row, std::uint8_t* dst) {
  const std::size_t block_bytes = p.bits == 4 ? 18 : 34;
  for (std::size_t b = 0; b * kBlock < row.codes.size(); ++b) {
    std::uint8_t* out = dst + b * block_bytes;
    const std::uint16_t d = f32_to_f16(row.groups[b * kBlock / static_cast<std::size_t>(p.group_size)].scale);
    std::memcpy(out, &d, sizeof d);
    const std::uint8_t* q = row.codes.data() + b * kBlock;
    for (std::size_t j = 0; j < kBlock; ++j) {
      if (p.bits == 8) {
        out[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(q[j] - 128));
      } else if (j < kBlock / 2) {
        out[2 + j] = static_cast<std::uint8_t>(q[j] | (q[j + kBlock / 2] << 4));
      }
    }
  }
}

struct Converted {
  TensorView view;
  std::shared_ptr<std::vector<std::uint8_t>> bytes;
};

Converted to_blocks(const TensorView& t) {
  const DType d = t.quant.bits == 4 ? DType::kQ4_0 : DType::kQ8_0;
  const std::int64_t cols = t.row_length();
  const std::size_t src_rb = *t.row_bytes(), dst_rb = *dtype_row_bytes(d, static_cast<std::uint64_t>(cols));
  auto bytes = std::make_shared<std::vector<std::uint8_t>>(dst_rb * static_cast<std::size_t>(t.n_rows()));
  for (std::int64_t r = 0; r < t.n_rows(); ++r) {
    const IntRow row = unpack_int_row(t.quant, static_cast<const std::uint8_t*>(t.data) + src_rb * static_cast<std::size_t>(r), cols);
    write_blocks(t.quant, row, bytes->data() + dst_rb * static_cast<std::size_t>(r));
  }
  return {TensorView{t.name, d, t.shape, bytes->data(), bytes->size(), {}}, bytes};
}

Converted to_f16(const TensorView& t) {
  const std::int64_t cols = t.row_length();
  auto bytes = std::make_shared<std::vector<std::uint8_t>>(static_cast<std::size_t>(t.numel()) * 2);
  std::vector<float> row(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < t.n_rows(); ++r) {
    dequantize_row(t, r, row);
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::uint16_t h = f32_to_f16(row[static_cast<std::size_t>(j)]);
      std::memcpy(bytes->data() + static_cast<std::size_t>(r * cols + j) * 2, &h, 2);
    }
  }
  return {TensorView{t.name, DType::kF16, t.shape, bytes->data(), bytes->size(), {}}, bytes};
}

}  // namespace

Expected<ModelFile> gguf_storage(const ModelFile& pruned, std::vector<std::string>& notes) {
  ModelFile out = pruned;
  for (auto& [name, t] : out.tensors) {
    if (t.dtype != DType::kInt) continue;
    if (!t.row_bytes() || *t.row_bytes() * static_cast<std::size_t>(t.n_rows()) != t.nbytes) {
      return invalid_argument("gguf storage: tensor '" + name + "' does not match its " + std::to_string(t.nbytes) + " bytes");
    }
    Converted c = block_compatible(t) ? to_blocks(t) : to_f16(t);
    if (c.view.dtype == DType::kF16) {
      notes.push_back(name + ": " + t.format_string() + " rows of " + std::to_string(t.row_length()) +
                      " values are not whole Q4_0 / Q8_0 blocks: stored as F16 of its values");
    }
    t = std::move(c.view);
    out.storage.push_back(std::move(c.bytes));
  }
  return out;
}

}  // namespace peregrine
