// 2:4 sparse F16 decode GEMV (kernels/cpu/sparse_nm_packed.h) against the dense packed F16 GEMV
// (kernels/cpu/half_packed.h) at tinyllama-1.1b's shapes, in the same process, alternated within
// every repetition; both read packed copies in 2 MiB pages as LlamaModel::place_weights places
// them, cycling through enough copies to defeat the L3 (DRAM bandwidth, as in decode).
//
// Usage: build/bin/sparse_nm_bench [--reps N] [--threads N] [--min-mib M]
//   (default: 15 repetitions, 2 threads, at least 256 MiB of dense copies per shape)
// Prints per shape and token count: each kernel's best time per matrix, its GB/s of bytes read
// (dense: 2 B per weight; sparse: the packed bytes, 1.125 B per weight) and dense / sparse time.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "peregrine/core/huge_page_buffer.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/kernels/cpu/half_packed.h"
#include "peregrine/kernels/cpu/sparse_nm_packed.h"
#include "peregrine/quant/fp16.h"
#include "peregrine/quant/sparse_nm.h"
#include "../tests/sparse_nm_fixtures.h"  // prune_nm_by_magnitude

namespace peregrine {
namespace {

struct Shape {
  std::int64_t out, in;
};
constexpr Shape kTinyllama[] = {{2048, 2048}, {256, 2048}, {5632, 2048}, {2048, 5632}};

// `copies` packed copies of one matrix back to back in huge pages, and a view of each.
struct PackedCopies {
  HugePageBuffer buffer;
  std::vector<TensorView> views;
  std::size_t bytes_each = 0;
};

template <class Pack>
PackedCopies pack_copies(const TensorView& w, std::size_t packed_bytes, int copies, Pack pack) {
  const std::size_t stride = (packed_bytes + 63) / 64 * 64;
  auto buffer = HugePageBuffer::allocate(stride * static_cast<std::size_t>(copies));
  if (!buffer) {
    std::fprintf(stderr, "sparse_nm_bench: %s\n", buffer.status().message().c_str());
    std::exit(1);
  }
  PackedCopies p{std::move(*buffer), {}, packed_bytes};
  for (int c = 0; c < copies; ++c) {
    const std::span<std::uint8_t> dst = p.buffer.bytes().subspan(stride * static_cast<std::size_t>(c), packed_bytes);
    const Status st = pack(w, dst);
    if (!st.is_ok()) {
      std::fprintf(stderr, "sparse_nm_bench: %s\n", st.message().c_str());
      std::exit(1);
    }
    TensorView v = w;
    v.packed = dst.data();
    p.views.push_back(v);
  }
  return p;
}

// Seconds per matrix of one pass of the GEMV over every copy.
template <class Gemv>
double pass_seconds(const PackedCopies& p, std::span<const float> x, std::span<float> y, std::int64_t n_tokens,
                    ThreadPool& pool, Gemv gemv) {
  const auto t0 = std::chrono::steady_clock::now();
  for (const TensorView& v : p.views) {
    const MatmulProduct product{&v, x, y};
    gemv({&product, 1}, n_tokens, pool, kMinParallelMacs);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / static_cast<double>(p.views.size());
}

void bench_shape(Shape s, int reps, double min_mib, ThreadPool& pool, std::mt19937& rng) {
  const auto n = static_cast<std::size_t>(s.out * s.in);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(n);
  for (float& v : w) v = normal(rng);
  std::vector<std::uint16_t> dense_bits(n);
  for (std::size_t i = 0; i < n; ++i) dense_bits[i] = f32_to_f16(w[i]);
  const TensorView dense{std::string("dense"), DType::kF16, {s.out, s.in}, dense_bits.data(), n * 2};
  prune_nm_by_magnitude(w, 2, 4);
  auto encoded = encode_sparse_nm(w, s.out, s.in, {2, 4}, SparseBase::kF16);
  if (!encoded) {
    std::fprintf(stderr, "sparse_nm_bench: %s\n", encoded.status().message().c_str());
    std::exit(1);
  }
  const TensorView sparse{std::string("sparse"), encoded->dtype, {s.out, s.in}, encoded->bytes.data(), encoded->bytes.size()};
  const int copies = std::max(2, static_cast<int>(min_mib * 1048576.0 / static_cast<double>(n * 2)));
  const PackedCopies d = pack_copies(dense, n * 2, copies, pack_half);
  const PackedCopies sp = pack_copies(sparse, sparse_packed_bytes(sparse), copies, pack_sparse_nm);
  for (std::int64_t n_tokens : {1, 8}) {
    std::vector<float> x(static_cast<std::size_t>(n_tokens * s.in)), y(static_cast<std::size_t>(n_tokens * s.out));
    for (float& v : x) v = normal(rng);
    double best_dense = 1e30, best_sparse = 1e30;
    for (int r = 0; r < reps; ++r) {  // alternated: background load hits both alike
      best_dense = std::min(best_dense, pass_seconds(d, x, y, n_tokens, pool, gemv_half_packed));
      best_sparse = std::min(best_sparse, pass_seconds(sp, x, y, n_tokens, pool, gemv_sparse_packed));
    }
    std::printf("%5lld x %-5lld %6lld %10.1f %8.1f %10.1f %8.1f %8.2fx\n", static_cast<long long>(s.out),
                static_cast<long long>(s.in), static_cast<long long>(n_tokens), best_dense * 1e6,
                static_cast<double>(d.bytes_each) / best_dense / 1e9, best_sparse * 1e6,
                static_cast<double>(sp.bytes_each) / best_sparse / 1e9, best_dense / best_sparse);
  }
}

}  // namespace
}  // namespace peregrine

int main(int argc, char** argv) {
  int reps = 15, threads = 2;
  double min_mib = 256.0;
  for (int a = 1; a + 1 < argc; a += 2) {
    const std::string flag = argv[a];
    if (flag == "--reps") reps = std::stoi(argv[a + 1]);
    else if (flag == "--threads") threads = std::stoi(argv[a + 1]);
    else if (flag == "--min-mib") min_mib = std::stod(argv[a + 1]);
  }
  if (!peregrine::sparse_packed_gemv_available() || !peregrine::half_packed_gemv_available()) {
    std::fprintf(stderr, "sparse_nm_bench: the packed GEMVs need AVX-512\n");
    return 1;
  }
  peregrine::ThreadPool pool(threads);
  std::mt19937 rng(7);
  std::printf("2:4 F16 vs dense F16 packed GEMV, %d threads, best of %d (time per matrix)\n", threads, reps);
  std::printf("%-13s %6s %10s %8s %10s %8s %9s\n", "out x in", "tokens", "dense us", "GB/s", "2:4 us", "GB/s", "dense/2:4");
  for (const auto s : peregrine::kTinyllama) peregrine::bench_shape(s, reps, min_mib, pool, rng);
  return 0;
}
