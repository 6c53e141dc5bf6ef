// llama.cpp's K-quant / IQ4 GGUFs (shared/models/kquant-test) truncated or with random bytes
// flipped: each load (GGUF parse, llama config and tensor checks, LlamaModel::create) either
// succeeds — and then every row of every tensor decodes — or fails with one clean error line,
// never a crash. (The forward is not run: the kernels of these types are tested in kernels/.)
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "peregrine/formats/model_file.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/quant/dequantize.h"
#include "formats/test_files.h"

namespace peregrine {
namespace {

std::string kquant(const std::string& type) {
  return test::shared_dir() + "/models/kquant-test/tiny-llama-256." + type + ".gguf";
}

/// One error value: a code and one non-empty line.
void expect_clean(const Status& st, const std::string& context) {
  EXPECT_FALSE(st.is_ok()) << context;
  EXPECT_FALSE(st.message().empty()) << context;
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << context << ": " << st.message();
}

/// Loads `path` as the engine does; on success decodes every row of every tensor (flipped
/// scale or code bytes are values, whatever they decode to). Returns the load's status.
Status load_and_decode(const std::string& path) {
  auto file = load_model_file(path);
  if (!file) return file.status();
  std::vector<float> row;
  for (const auto& [name, t] : file->tensors) {
    row.resize(static_cast<std::size_t>(t.row_length()));
    for (std::int64_t r = 0; r < t.n_rows(); ++r) dequantize_row(t, r, row);
  }
  auto model = LlamaModel::create(std::move(*file));
  return model ? Status::ok() : model.status();
}

class KQuantDamage : public ::testing::TestWithParam<std::string> {
 protected:
  test::TempDir dir_;
};

TEST_P(KQuantDamage, TruncatedFileIsOneCleanError) {
  const test::Bytes full = test::read_bytes(kquant(GetParam()));
  ASSERT_GT(full.size(), 700000u);
  ASSERT_TRUE(load_and_decode(kquant(GetParam())).is_ok());
  const std::string path = dir_.file("cut.gguf");
  // Inside the header, the token list, the tensor infos and the tensor data (the last tensor's
  // final byte included).
  for (std::size_t cut : {std::size_t{3}, std::size_t{23}, std::size_t{500}, std::size_t{4000}, std::size_t{9000},
                          std::size_t{12000}, std::size_t{20000}, full.size() / 2, full.size() - 1}) {
    test::write_bytes(path, test::Bytes(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut)));
    const Status st = load_and_decode(path);
    expect_clean(st, "cut at " + std::to_string(cut));
    EXPECT_EQ(st.code(), ErrorCode::kCorruptFile) << cut << ": " << st.message();
  }
}

TEST_P(KQuantDamage, RandomByteFlipsLoadOrFailCleanly) {
  const test::Bytes original = test::read_bytes(kquant(GetParam()));
  const std::string path = dir_.file("flipped.gguf");
  std::seed_seq seed(GetParam().begin(), GetParam().end());  // other damage per file
  std::mt19937 rng(seed);
  int failures = 0, loads = 0;
  for (int trial = 0; trial < 120; ++trial) {
    test::Bytes b = original;
    // Two thirds in the first 16 KiB (metadata and tensor infos), the rest anywhere.
    const std::size_t at = trial % 3 != 2 ? rng() % 16384 : rng() % b.size();
    const int n_flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < n_flips; ++f) b[(at + static_cast<std::size_t>(f) * 7) % b.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
    test::write_bytes(path, b);
    const Status st = load_and_decode(path);
    if (st.is_ok()) {
      ++loads;
      continue;
    }
    ++failures;
    expect_clean(st, "trial " + std::to_string(trial) + " at " + std::to_string(at));
  }
  std::printf("[ damage   ] %s: %d of 120 damaged files loaded, %d failed cleanly\n", GetParam().c_str(), loads, failures);
  EXPECT_GT(failures, 0);
  EXPECT_GT(loads, 0);
}

INSTANTIATE_TEST_SUITE_P(Files, KQuantDamage, ::testing::Values("Q4_K_M", "IQ4_XS", "Q2_K", "Q3_K_S", "Q5_1"));

}  // namespace
}  // namespace peregrine
