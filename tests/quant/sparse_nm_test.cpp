#include "peregrine/quant/sparse_nm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/fp16.h"
#include "peregrine/quant/quantize_rtn.h"
#include "sparse_nm_fixtures.h"

namespace peregrine {
namespace {

constexpr SparsePattern k24{2, 4};
constexpr SparsePattern k48{4, 8};

// rows × cols random normals pruned n:m by magnitude, with every third group emptied further
// (fewer nonzeros than n) and values rounded through `round` (exact in the kept dtype).
std::vector<float> pruned_matrix(std::int64_t rows, std::int64_t cols, SparsePattern p, float (*round)(float),
                                 std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  for (float& v : w) v = round(dist(rng));
  prune_nm_by_magnitude(w, p.n, p.m);
  for (std::size_t g = 0; g < w.size(); g += static_cast<std::size_t>(p.m) * 3) w[g] = w[g + 1] = 0.0f;
  return w;
}

float identity(float v) { return v; }
float via_f16(float v) { return f16_to_f32(f32_to_f16(v)); }
float via_bf16(float v) { return bf16_to_f32(f32_to_bf16(v)); }

TensorView view_of(const SparseEncoded& e, std::int64_t rows, std::int64_t cols) {
  return TensorView{std::string("w"), e.dtype, {rows, cols}, e.bytes.data(), e.bytes.size()};
}

std::vector<float> decode_all(const TensorView& v) {
  std::vector<float> out(static_cast<std::size_t>(v.numel()), -7.0f);
  const auto cols = static_cast<std::size_t>(v.row_length());
  for (std::int64_t r = 0; r < v.n_rows(); ++r) dequantize_row(v, r, std::span<float>(out).subspan(static_cast<std::size_t>(r) * cols, cols));
  return out;
}

TEST(SparseNm, DtypesNamesAndRowBytes) {
  for (SparseBase b : {SparseBase::kF16, SparseBase::kBF16, SparseBase::kQ8, SparseBase::kQ4}) {
    for (SparsePattern p : {k24, k48}) {
      const auto t = sparse_nm_dtype(b, p);
      ASSERT_TRUE(t.has_value());
      EXPECT_EQ(dtype_from_name(dtype_name(*t)), *t);
      EXPECT_EQ(sparse_nm_format(*t)->n, p.n);
      EXPECT_FALSE(is_ggml_block_dtype(*t));
    }
  }
  EXPECT_EQ(dtype_name(DType::kQ4_0_S24), "q4_0_s24");
  EXPECT_EQ(dtype_row_bytes(DType::kF16_S24, 64), 64u + 8u);       // 32 f16 + 64 mask bits
  EXPECT_EQ(dtype_row_bytes(DType::kF16_S24, 172), 172u + 22u);    // 86 f16 + ceil(172 / 8)
  EXPECT_EQ(dtype_row_bytes(DType::kQ4_0_S24, 2048), 32u * 18u + 256u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ8_0_S48, 64), 34u + 8u);
  EXPECT_FALSE(dtype_row_bytes(DType::kQ4_0_S24, 172).has_value());  // 86 kept: not whole blocks
  EXPECT_FALSE(dtype_row_bytes(DType::kF16_S48, 172).has_value());   // not a multiple of 8
  EXPECT_FALSE(sparse_nm_format(DType::kF16).has_value());
  EXPECT_EQ(sparse_nm_dtype(SparseBase::kF16, {1, 4}).status().code(), ErrorCode::kUnsupported);
}

TEST(SparseNm, HalfValuesRoundTripExactly) {
  struct Case { SparseBase base; SparsePattern p; float (*round)(float); std::int64_t cols; };
  for (const Case& c : {Case{SparseBase::kF16, k24, via_f16, 172}, Case{SparseBase::kF16, k48, via_f16, 64},
                        Case{SparseBase::kBF16, k24, via_bf16, 36}, Case{SparseBase::kBF16, k48, via_bf16, 200}}) {
    const std::int64_t rows = 5;
    const auto w = pruned_matrix(rows, c.cols, c.p, c.round, 42);
    const auto e = encode_sparse_nm(w, rows, c.cols, c.p, c.base);
    ASSERT_TRUE(e.has_value()) << e.status().message();
    const TensorView v = view_of(*e, rows, c.cols);
    ASSERT_EQ(v.nbytes, *v.row_bytes() * static_cast<std::size_t>(rows));
    EXPECT_TRUE(validate_sparse_nm(v).is_ok());
    EXPECT_EQ(decode_all(v), w) << dtype_name(e->dtype);
  }
}

// The kept values of Q8 / Q4 are ggml's Q8_0 / Q4_0 blocks over the row's kept values in column
// order (a group with fewer nonzeros keeps its first zero columns).
TEST(SparseNm, QuantizedKeptValuesAreGgmlBlocksOfTheGatheredValues) {
  struct Case { SparseBase base; DType block; SparsePattern p; std::int64_t cols; };
  for (const Case& c : {Case{SparseBase::kQ4, DType::kQ4_0, k24, 128}, Case{SparseBase::kQ8, DType::kQ8_0, k24, 64},
                        Case{SparseBase::kQ4, DType::kQ4_0, k48, 192}, Case{SparseBase::kQ8, DType::kQ8_0, k48, 64}}) {
    const std::int64_t rows = 3;
    const auto w = pruned_matrix(rows, c.cols, c.p, identity, 7);
    const auto e = encode_sparse_nm(w, rows, c.cols, c.p, c.base);
    ASSERT_TRUE(e.has_value()) << e.status().message();
    const TensorView v = view_of(*e, rows, c.cols);
    const auto decoded = decode_all(v);
    const auto cols = static_cast<std::size_t>(c.cols), kept = cols * static_cast<std::size_t>(c.p.n) / static_cast<std::size_t>(c.p.m);
    for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
      std::vector<float> gathered;
      std::vector<std::size_t> columns;
      for (std::size_t g = 0; g < cols; g += static_cast<std::size_t>(c.p.m)) {
        int zeros = c.p.n;
        for (int j = 0; j < c.p.m; ++j) zeros -= w[r * cols + g + static_cast<std::size_t>(j)] != 0.0f;
        for (int j = 0; j < c.p.m; ++j) {
          const float x = w[r * cols + g + static_cast<std::size_t>(j)];
          if (x == 0.0f && zeros-- <= 0) continue;
          gathered.push_back(x);
          columns.push_back(g + static_cast<std::size_t>(j));
        }
      }
      ASSERT_EQ(gathered.size(), kept);
      std::vector<std::uint8_t> blocks(*dtype_row_bytes(c.block, kept));
      quantize_rtn(c.block, gathered, blocks.data());
      EXPECT_EQ(std::memcmp(blocks.data(), e->bytes.data() + r * *v.row_bytes(), blocks.size()), 0);
      std::vector<float> expected_kept(kept);
      dequantize(c.block, blocks.data(), expected_kept);
      std::vector<float> expected(cols, 0.0f);
      for (std::size_t k = 0; k < kept; ++k) expected[columns[k]] = expected_kept[k];
      EXPECT_EQ(std::vector<float>(decoded.begin() + static_cast<std::ptrdiff_t>(r * cols),
                                   decoded.begin() + static_cast<std::ptrdiff_t>((r + 1) * cols)), expected)
          << dtype_name(e->dtype) << " row " << r;
    }
  }
}

TEST(SparseNm, PatternViolationsAndShapesAreRejected) {
  auto w = pruned_matrix(4, 64, k24, identity, 3);
  w[1 * 64 + 2 * 4 + 0] = 1.0f, w[1 * 64 + 2 * 4 + 1] = 2.0f, w[1 * 64 + 2 * 4 + 2] = 3.0f;  // row 1, group 2: 3 of 4
  const auto bad = encode_sparse_nm(w, 4, 64, k24, SparseBase::kF16);
  ASSERT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("row 1 group 2"), std::string::npos) << bad.status().message();
  std::fill_n(w.begin() + 1 * 64 + 3 * 4, 4, 0.0f);  // group 3 empty: 3 of the 8 columns 8..15
  EXPECT_TRUE(encode_sparse_nm(w, 4, 64, k48, SparseBase::kF16).has_value());

  const auto odd = pruned_matrix(2, 172, k24, identity, 5);
  const auto q4 = encode_sparse_nm(odd, 2, 172, k24, SparseBase::kQ4);
  ASSERT_EQ(q4.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(q4.status().message().find("multiple of 32"), std::string::npos) << q4.status().message();
  EXPECT_EQ(encode_sparse_nm(odd, 2, 172, k48, SparseBase::kF16).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(encode_sparse_nm(odd, 3, 172, k24, SparseBase::kF16).status().code(), ErrorCode::kInvalidArgument);
}

TEST(SparseNm, CorruptMasksAreRejectedAndDecodeInBounds) {
  const std::int64_t rows = 3, cols = 68;
  const auto w = pruned_matrix(rows, cols, k24, via_f16, 11);
  auto e = encode_sparse_nm(w, rows, cols, k24, SparseBase::kF16);
  ASSERT_TRUE(e.has_value());
  const std::size_t row_bytes = *dtype_row_bytes(e->dtype, cols), mask_at = row_bytes - 9;
  struct Flip { std::size_t byte; std::uint8_t value; const char* what; };
  for (const Flip& f : {Flip{row_bytes + mask_at, 0xff, "row 1 group 0"}, Flip{2 * row_bytes + mask_at + 3, 0x00, "row 2 group 6"},
                        Flip{row_bytes - 1, 0xf3, "past column 67"}}) {
    auto bytes = e->bytes;
    bytes[f.byte] = f.value;
    TensorView v = view_of(*e, rows, cols);
    v.data = bytes.data();
    const Status st = validate_sparse_nm(v);
    ASSERT_EQ(st.code(), ErrorCode::kInvalidArgument) << f.what;
    EXPECT_NE(st.message().find(f.what), std::string::npos) << st.message();
    decode_all(v);  // unspecified values, but in bounds (ASan / the fuzzer check this)
  }
}

}  // namespace
}  // namespace peregrine
