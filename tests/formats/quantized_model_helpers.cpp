#include "quantized_model_helpers.h"

#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <vector>

#include "peregrine/quant/int_group.h"
#include "peregrine/quant/quantize_rtn.h"
#include "test_models.h"

namespace peregrine::test {
namespace {

bool is_linear(const std::string& name, const TensorView& t) { return t.shape.size() == 2 && name != "token_embd.weight"; }

std::span<const float> values(const TensorView& t) {
  return {static_cast<const float*>(t.data), static_cast<std::size_t>(t.numel())};
}

/// Points `t` at `bytes` (kept alive by m.storage) with `dtype` and `quant`.
void replace(ModelFile& m, TensorView& t, DType dtype, const QuantParams& quant, std::vector<std::uint8_t> bytes) {
  auto owned = std::make_shared<std::vector<std::uint8_t>>(std::move(bytes));
  t = TensorView{t.name, dtype, t.shape, owned->data(), owned->size(), quant};
  m.storage.push_back(std::move(owned));
}

}  // namespace

const ModelFile& stories260k_model() {
  static const ModelFile m = [] {
    auto f = load_model_file(stories260k_path());
    EXPECT_TRUE(f) << f.status().message();
    return f ? std::move(*f) : ModelFile{};
  }();
  return m;
}

ModelFile int_linears(ModelFile m, int bits, bool asymmetric, std::int64_t group, int act_bits, float outlier_threshold) {
  for (auto& [name, t] : m.tensors) {
    if (!is_linear(name, t)) continue;
    const QuantParams p{bits, group == -1 ? t.shape[1] : group, asymmetric, act_bits, outlier_threshold};
    replace(m, t, DType::kInt, p, quantize_int_rtn(values(t), t.shape[0], t.shape[1], p));
  }
  return m;
}

ModelFile fp8_linears(ModelFile m, DType type) {
  for (auto& [name, t] : m.tensors) {
    if (!is_linear(name, t)) continue;
    const std::size_t n = static_cast<std::size_t>(t.shape[1]), rb = *dtype_row_bytes(type, n);
    std::vector<std::uint8_t> bytes(rb * static_cast<std::size_t>(t.shape[0]));
    for (std::size_t r = 0; r < static_cast<std::size_t>(t.shape[0]); ++r) {
      quantize_rtn(type, values(t).subspan(r * n, n), bytes.data() + r * rb);
    }
    replace(m, t, type, QuantParams{}, std::move(bytes));
  }
  return m;
}

}  // namespace peregrine::test
