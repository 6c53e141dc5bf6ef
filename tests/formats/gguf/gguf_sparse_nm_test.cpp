// N:M sparse tensors in GGUF (type ids 1000..1007, core/dtype.h): stories260K's matrices pruned
// 2:4 by magnitude, encoded in every kept dtype, written by save_gguf_model and read back with
// the same bytes and decoded values, and the same logits through the sparse kernels as through
// the decoded f32 weights; damaged position masks give one clean kInvalidArgument.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <set>

#include "formats/model_compare.h"
#include "peregrine/formats/gguf/gguf.h"
#include "peregrine/formats/model_writer.h"
#include "peregrine/kernels/cpu/sparse/sparse_nm_q8.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/sparse_nm.h"
#include "sparse_nm_fixtures.h"
#include "formats/test_files.h"
#include "test_models.h"

namespace peregrine {
namespace {

std::string tok512() { return test::shared_dir() + "/models/stories260K/tok512.bin"; }

// stories260K with every layer matrix pruned 2:4 by magnitude and stored N:M sparse, the kept
// dtype cycling F16, BF16, Q8_0, Q4_0 over the matrices (Q8_0 / Q4_0 fall back to F16 where a
// row's 86 kept values are not whole blocks: ffn_down).
ModelFile sparse_stories() {
  auto loaded = load_model_file(test::stories260k_path());
  EXPECT_TRUE(loaded) << loaded.status().message();
  if (!loaded) return {};
  ModelFile m = std::move(*loaded);
  const SparseBase bases[] = {SparseBase::kF16, SparseBase::kBF16, SparseBase::kQ8, SparseBase::kQ4};
  std::size_t next = 0;
  for (auto& [name, t] : m.tensors) {
    if (t.shape.size() != 2 || !name.starts_with("blk.")) continue;
    std::vector<float> w(static_cast<std::size_t>(t.numel()));
    const auto cols = static_cast<std::size_t>(t.row_length());
    for (std::int64_t r = 0; r < t.n_rows(); ++r) dequantize_row(t, r, std::span<float>(w).subspan(static_cast<std::size_t>(r) * cols, cols));
    prune_nm_by_magnitude(w, 2, 4);
    auto e = encode_sparse_nm(w, t.n_rows(), t.row_length(), {2, 4}, bases[next++ % 4]);
    if (!e) e = encode_sparse_nm(w, t.n_rows(), t.row_length(), {2, 4}, SparseBase::kF16);
    EXPECT_TRUE(e) << name << ": " << e.status().message();
    if (!e) return {};
    auto bytes = std::make_shared<std::vector<std::uint8_t>>(std::move(e->bytes));
    t.dtype = e->dtype;
    t.data = bytes->data();
    t.nbytes = bytes->size();
    m.storage.push_back(bytes);
  }
  return m;
}

TEST(GgufSparseNm, PrunedStoriesRoundTripsThroughSaveGgufModel) {
  const ModelFile m = sparse_stories();
  ASSERT_FALSE(m.tensors.empty());
  test::TempDir dir;
  const std::string path = dir.file("stories260K-s24.gguf");
  const Status saved = save_gguf_model(m, path, tok512());
  ASSERT_TRUE(saved.is_ok()) << saved.message();
  auto g = load_model_file(path);
  ASSERT_TRUE(g) << g.status().message();
  test::expect_same_tensors(m, *g);
  std::set<DType> sparse;
  int n_sparse = 0;
  for (const auto& t : g->gguf->tensors()) {
    if (!sparse_nm_format(t.dtype)) continue;
    ++n_sparse;
    sparse.insert(t.dtype);
    EXPECT_GE(*ggml_type_of(t.dtype), 1000u);
  }
  EXPECT_EQ(n_sparse, 5 * 7);  // 5 layers × 7 matrices
  EXPECT_EQ(sparse, (std::set<DType>{DType::kF16_S24, DType::kBF16_S24, DType::kQ8_0_S24, DType::kQ4_0_S24}));
  const auto a = test::prefill_logits(m, true), b = test::prefill_logits(*g, true);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  // Through the kernels each sparse matrix takes in huge pages (2:4 ones packed where the CPU has
  // AVX-512), 12 rows: the same bits from the file as from memory.
  EXPECT_EQ(test::prefill_logits(*g, false, 12), test::prefill_logits(m, false, 12));
  // Read in place (unpacked) against the decoded f32 model: summation order only. 12 rows, past
  // kSparseQ8Tokens: the Q8_0 / Q4_0 sparse matrices then multiply f32 activations too, in decoded
  // panels (at decode sizes, and packed, they take 8-bit activation blocks, whose formulas
  // tests/kernels/sparse/sparse_nm_test.cpp and sparse_nm_q8_packed_test.cpp check).
  static_assert(12 > kSparseQ8Tokens);
  EXPECT_LT(test::max_abs_diff(test::prefill_logits(*g, false, 12, WeightPlacement::kInPlace), test::prefill_logits(m, true, 12)),
            1e-3f);
}

TEST(GgufSparseNm, DamagedMasksGiveOneCleanError) {
  test::TempDir dir;
  const std::string path = dir.file("s24.gguf");
  ASSERT_TRUE(save_gguf_model(sparse_stories(), path, tok512()).is_ok());
  const test::Bytes good = test::read_bytes(path);
  auto parsed = GgufFile::parse(good, "s24.gguf");
  ASSERT_TRUE(parsed) << parsed.status().message();
  const TensorView* q = nullptr;
  for (const auto& t : parsed->tensors()) {
    if (t.name == "blk.2.ffn_up.weight") q = &t;
  }
  ASSERT_NE(q, nullptr);
  ASSERT_TRUE(sparse_nm_format(q->dtype));
  // Row 3's first mask byte (two groups of 4 columns) marking 3 + 2 columns.
  const std::size_t row_bytes = *q->row_bytes();
  const std::size_t mask_byte = static_cast<std::size_t>(static_cast<const std::uint8_t*>(q->data) - good.data()) +
                                4 * row_bytes - static_cast<std::size_t>(q->row_length()) / 8;
  test::Bytes bad = good;
  bad[mask_byte] = 0x37;
  const auto err = GgufFile::parse(bad, "bad.gguf");
  ASSERT_FALSE(err);
  EXPECT_EQ(err.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(err.status().message().find("blk.2.ffn_up.weight' (" + std::string(dtype_name(q->dtype)) + ") row 3 group 0"),
            std::string::npos)
      << err.status().message();
  // Random byte flips anywhere: a file whose every row decodes, or one clean error.
  std::mt19937_64 rng(19);
  for (int trial = 0; trial < 60; ++trial) {
    test::Bytes flipped = good;
    const std::size_t at = rng() % flipped.size();
    flipped[at] = static_cast<std::uint8_t>(rng());
    const auto f = GgufFile::parse(flipped, "flipped.gguf");
    if (!f) continue;
    for (const auto& t : f->tensors()) {
      std::vector<float> row(static_cast<std::size_t>(t.row_length()));
      for (std::int64_t r = 0; r < t.n_rows(); ++r) dequantize_row(t, r, row);
    }
  }
}

}  // namespace
}  // namespace peregrine
