#include "formats/hf/awq_layout.h"

#include "formats/packed_words.h"

namespace peregrine {
namespace {

constexpr std::int64_t kPerWord = 8;  // 4-bit codes per int32
// The nibble of output column 8c + j within word c: the inverse of order [0, 2, 4, 6, 1, 3, 5, 7].
constexpr unsigned kSlot[kPerWord] = {0, 4, 1, 5, 2, 6, 3, 7};

std::int64_t words(std::int64_t out) { return (out + kPerWord - 1) / kPerWord; }

/// Where output column o's nibble of packed row `row` (of `n_words` words) lies.
struct Nibble {
  std::size_t byte;  // of the word
  unsigned shift;
};
Nibble nibble(std::int64_t row, std::int64_t n_words, std::int64_t o) {
  return {static_cast<std::size_t>((row * n_words + o / kPerWord) * 4), 4 * kSlot[o % kPerWord]};
}

unsigned read_nibble(const std::uint8_t* base, std::int64_t row, std::int64_t n_words, std::int64_t o) {
  const Nibble at = nibble(row, n_words, o);
  return (load_u32(base + at.byte) >> at.shift) & 0xf;
}

void write_nibble(std::uint8_t* base, std::int64_t row, std::int64_t n_words, std::int64_t o, unsigned v) {
  const Nibble at = nibble(row, n_words, o);
  store_u32(base + at.byte, load_u32(base + at.byte) | (v << at.shift));
}

}  // namespace

std::vector<HfPart> awq_parts(std::int64_t out, std::int64_t in, const HfQuantConfig& q) {
  const std::int64_t groups = int_group_count(q.params(in), in);
  return {{"qweight", SafetensorsDtype::kI32, {in, words(out)}},
          {"qzeros", SafetensorsDtype::kI32, {groups, words(out)}},
          {"scales", SafetensorsDtype::kF16, {groups, out}}};
}

std::vector<std::vector<std::uint8_t>> encode_awq(const TensorView& w, const HfQuantConfig& q) {
  const std::int64_t out = w.n_rows(), in = w.row_length(), n_words = words(out);
  const std::int64_t groups = int_group_count(q.params(in), in);
  const std::vector<IntRow> rows = unpack_int_rows(w);
  std::vector<std::uint8_t> qweight(static_cast<std::size_t>(in * n_words * 4));
  std::vector<std::uint8_t> qzeros(static_cast<std::size_t>(groups * n_words * 4));
  for (std::int64_t o = 0; o < out; ++o) {
    const IntRow& row = rows[static_cast<std::size_t>(o)];
    for (std::int64_t i = 0; i < in; ++i) write_nibble(qweight.data(), i, n_words, o, row.codes[static_cast<std::size_t>(i)]);
    for (std::int64_t g = 0; g < groups; ++g) {
      write_nibble(qzeros.data(), g, n_words, o, static_cast<unsigned>(row.groups[static_cast<std::size_t>(g)].zero));
    }
  }
  return {std::move(qweight), std::move(qzeros), encode_group_scales(rows, groups)};
}

Expected<OwnedTensor> decode_awq(const HfParts& parts, const std::string& module, const HfQuantConfig& q,
                                 const std::string& name, std::int64_t out, std::int64_t in) {
  PEREGRINE_RETURN_IF_ERROR(expect_only(parts, module, {"qweight", "qzeros", "scales"}, "AWQ"));
  const QuantParams p = q.params(in);
  const std::string context = "out_features " + std::to_string(out) + ", in_features " + std::to_string(in) +
                              ", group_size " + std::to_string(q.group_size);
  const auto spec = awq_parts(out, in, q);
  const SafetensorsTensor* t[3];
  for (std::size_t k = 0; k < spec.size(); ++k) {
    PEREGRINE_ASSIGN_OR_RETURN(t[k], expect_part(parts, module, spec[k].suffix, spec[k].dtype, spec[k].shape, context));
  }
  const std::int64_t n_words = words(out);
  std::vector<IntRow> rows(static_cast<std::size_t>(out));
  PEREGRINE_RETURN_IF_ERROR(read_group_params(
      *t[2], p, [&](std::int64_t g, std::int64_t o) { return static_cast<int>(read_nibble(t[1]->data, g, n_words, o)); },
      module, rows));
  for (std::int64_t o = 0; o < out; ++o) {
    auto& codes = rows[static_cast<std::size_t>(o)].codes;
    codes.resize(static_cast<std::size_t>(in));
    for (std::int64_t i = 0; i < in; ++i) {
      codes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(read_nibble(t[0]->data, i, n_words, o));
    }
  }
  return pack_int_rows(name, in, p, rows);
}

}  // namespace peregrine
