#include "formats/hf/gptq_layout.h"

#include "formats/packed_words.h"

namespace peregrine {
namespace {

std::string dims(std::int64_t out, std::int64_t in, const HfQuantConfig& q) {
  return "out_features " + std::to_string(out) + ", in_features " + std::to_string(in) + ", bits " +
         std::to_string(q.bits) + ", group_size " + std::to_string(q.group_size);
}

/// The stored value of zero point z: z − 1 (v1, masked to `bits` like AutoGPTQ's uint32 pack) or z.
unsigned stored_zero(int z, const HfQuantConfig& q) {
  return static_cast<unsigned>(q.gptq_v2 ? z : z - 1) & ((1u << q.bits) - 1);
}

/// g_idx must map input column i to group i / group_size.
Status check_g_idx(const SafetensorsTensor& g_idx, const QuantParams& p, std::int64_t groups, const std::string& module) {
  for (std::int64_t i = 0; i < g_idx.shape[0]; ++i) {
    const auto g = static_cast<std::int32_t>(load_u32(g_idx.data + 4 * i));
    if (g < 0 || g >= groups) {
      return corrupt_file(module + ".g_idx[" + std::to_string(i) + "] = " + std::to_string(g) + " is outside [0, " +
                          std::to_string(groups) + ")");
    }
    if (g != i / p.group_size) {
      return unsupported(module + ".g_idx[" + std::to_string(i) + "] = " + std::to_string(g) + " (expected " +
                         std::to_string(i / p.group_size) +
                         "): act-order groups are not runs of consecutive columns, which the runtime int format "
                         "needs; re-quantize without desc_act (or with static_groups)");
    }
  }
  return Status::ok();
}

}  // namespace

std::vector<HfPart> gptq_parts(std::int64_t out, std::int64_t in, const HfQuantConfig& q) {
  const std::int64_t groups = int_group_count(q.params(in), in);
  return {{"qweight", SafetensorsDtype::kI32, {packed_word_count(in, q.bits), out}},
          {"qzeros", SafetensorsDtype::kI32, {groups, packed_word_count(out, q.bits)}},
          {"scales", SafetensorsDtype::kF16, {groups, out}},
          {"g_idx", SafetensorsDtype::kI32, {in}}};
}

std::vector<std::vector<std::uint8_t>> encode_gptq(const TensorView& w, const HfQuantConfig& q) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  const QuantParams p = q.params(in);
  const std::int64_t groups = int_group_count(p, in), zero_words = packed_word_count(out, q.bits);
  const std::vector<IntRow> rows = unpack_int_rows(w);
  std::vector<std::uint8_t> qweight(static_cast<std::size_t>(packed_word_count(in, q.bits) * out * 4));
  std::vector<std::uint8_t> qzeros(static_cast<std::size_t>(groups * zero_words * 4));
  std::vector<std::uint8_t> g_idx(static_cast<std::size_t>(in * 4));
  const auto column_stride = static_cast<std::size_t>(out * 4);
  for (std::int64_t o = 0; o < out; ++o) {
    const IntRow& row = rows[static_cast<std::size_t>(o)];
    for (std::int64_t i = 0; i < in; ++i) write_packed_code(qweight.data() + 4 * o, column_stride, i, q.bits, row.codes[static_cast<std::size_t>(i)]);
    for (std::int64_t g = 0; g < groups; ++g) {
      write_packed_code(qzeros.data() + g * zero_words * 4, 4, o, q.bits, stored_zero(row.groups[static_cast<std::size_t>(g)].zero, q));
    }
  }
  for (std::int64_t i = 0; i < in; ++i) store_u32(g_idx.data() + 4 * i, static_cast<std::uint32_t>(i / p.group_size));
  return {std::move(qweight), std::move(qzeros), encode_group_scales(rows, groups), std::move(g_idx)};
}

Expected<OwnedTensor> decode_gptq(const HfParts& parts, const std::string& module, const HfQuantConfig& q,
                                  const std::string& name, std::int64_t out, std::int64_t in) {
  PEREGRINE_RETURN_IF_ERROR(expect_only(parts, module, {"qweight", "qzeros", "scales", "g_idx"}, "GPTQ"));
  const QuantParams p = q.params(in);
  const std::string context = dims(out, in, q);
  const auto spec = gptq_parts(out, in, q);
  const SafetensorsTensor* t[3];
  for (std::size_t k = 0; k < 3; ++k) {
    PEREGRINE_ASSIGN_OR_RETURN(t[k], expect_part(parts, module, spec[k].suffix, spec[k].dtype, spec[k].shape, context));
  }
  const SafetensorsTensor &qweight = *t[0], &qzeros = *t[1], &scales = *t[2];
  const std::int64_t groups = scales.shape[0], zero_words = qzeros.shape[1];
  if (parts.count("g_idx")) {
    PEREGRINE_ASSIGN_OR_RETURN(const SafetensorsTensor* g_idx, expect_part(parts, module, "g_idx", spec[3].dtype, spec[3].shape, context));
    PEREGRINE_RETURN_IF_ERROR(check_g_idx(*g_idx, p, groups, module));
  }
  std::vector<IntRow> rows(static_cast<std::size_t>(out));
  const int offset = q.gptq_v2 ? 0 : 1;
  PEREGRINE_RETURN_IF_ERROR(read_group_params(
      scales, p,
      [&](std::int64_t g, std::int64_t o) {
        return static_cast<int>(read_packed_code(qzeros.data + g * zero_words * 4, 4, o, q.bits)) + offset;
      },
      module, rows));
  const auto column_stride = static_cast<std::size_t>(out * 4);
  for (std::int64_t o = 0; o < out; ++o) {
    auto& codes = rows[static_cast<std::size_t>(o)].codes;
    codes.resize(static_cast<std::size_t>(in));
    for (std::int64_t i = 0; i < in; ++i) {
      codes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(read_packed_code(qweight.data + 4 * o, column_stride, i, q.bits));
    }
  }
  return pack_int_rows(name, in, p, rows);
}

}  // namespace peregrine
