// 2:4 sparse decode GEMVs against their dense twins at tinyllama-1.1b's shapes, in the same
// process, alternated within every repetition; both read packed copies in 2 MiB pages as
// LlamaModel::place_weights places them, cycling through enough copies to defeat the L3 (DRAM
// bandwidth, as in decode):
//   --kind f16: 2:4 F16 (kernels/cpu/sparse/sparse_nm_packed.h) vs dense packed F16 (half_packed.h);
//   --kind q4:  2:4 Q4_0 (sparse_nm_q8_packed.h) vs dense packed Q4_0 (quant_packed.h);
//   --kind q8:  2:4 Q8_0 (sparse_nm_q8_packed.h) vs dense row-major Q8_0 (gemm_quant.h).
//
// Usage: build/bin/sparse_nm_bench [--kind f16|q4|q8] [--reps N] [--threads N] [--min-mib M]
//   (default: f16, 15 repetitions, 2 threads, at least 256 MiB of dense copies per shape)
// Prints per shape and token count: each kernel's best time per matrix, its GB/s of bytes read
// (the stored / packed bytes of each) and dense / sparse time; then matmul on the 2:4 matrix's
// stored layout, unpacked (kept values + a 1-bit mask per column, which an unstructured sparse
// format would store the same way): f16 decodes it through the expand-load panels
// (sparse_nm_expand.h), q4 / q8 through sparse_nm_q8.h's vpcompressb GEMV (≤ 8 tokens).
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
#include "peregrine/kernels/cpu/matmul/half_packed.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/kernels/cpu/matmul/quant_packed.h"
#include "peregrine/kernels/cpu/sparse/sparse_nm_packed.h"
#include "peregrine/kernels/cpu/sparse/sparse_nm_q8_packed.h"
#include "peregrine/quant/fp16.h"
#include "peregrine/quant/quantize_rtn.h"
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

// Seconds per matrix of one pass of `gemv(view)` over every copy.
template <class Gemv>
double pass_seconds(const PackedCopies& p, Gemv gemv) {
  const auto t0 = std::chrono::steady_clock::now();
  for (const TensorView& v : p.views) gemv(v);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / static_cast<double>(p.views.size());
}

// Copies w's stored bytes as they are (for the row-major Q8_0 GEMV): data points at the copy.
Status copy_stored(const TensorView& w, std::span<std::uint8_t> dst) {
  std::memcpy(dst.data(), w.data, w.nbytes);
  return Status::ok();
}

// The kind's dense and 2:4 matrices of shape s (from the same f32 values), as packed copies.
struct Pair {
  std::vector<std::uint8_t> dense_bytes;
  SparseEncoded sparse_bytes;
  PackedCopies dense, sparse, unpacked;
};

// Copies of w's stored layout that matmul reads as they are (data, not packed).
PackedCopies stored_copies(const TensorView& w, int copies) {
  PackedCopies p = pack_copies(w, w.nbytes, copies, copy_stored);
  for (TensorView& v : p.views) {
    v.data = v.packed;
    v.packed = nullptr;
  }
  return p;
}
Pair make_pair(const std::string& kind, Shape s, double min_mib, std::mt19937& rng) {
  const auto n = static_cast<std::size_t>(s.out * s.in);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(n);
  for (float& v : w) v = normal(rng);
  const DType dense_type = kind == "q4" ? DType::kQ4_0 : kind == "q8" ? DType::kQ8_0 : DType::kF16;
  Pair p;
  p.dense_bytes.resize(*dtype_row_bytes(dense_type, n));
  quantize_rtn(dense_type, w, p.dense_bytes.data());
  const TensorView dense{std::string("dense"), dense_type, {s.out, s.in}, p.dense_bytes.data(), p.dense_bytes.size()};
  prune_nm_by_magnitude(w, 2, 4);
  const SparseBase base = kind == "q4" ? SparseBase::kQ4 : kind == "q8" ? SparseBase::kQ8 : SparseBase::kF16;
  auto encoded = encode_sparse_nm(w, s.out, s.in, {2, 4}, base);
  if (!encoded) {
    std::fprintf(stderr, "sparse_nm_bench: %s\n", encoded.status().message().c_str());
    std::exit(1);
  }
  p.sparse_bytes = std::move(*encoded);
  const TensorView sparse{std::string("sparse"), p.sparse_bytes.dtype, {s.out, s.in}, p.sparse_bytes.bytes.data(), p.sparse_bytes.bytes.size()};
  const int copies = std::max(2, static_cast<int>(min_mib * 1048576.0 / static_cast<double>(dense.nbytes)));
  if (kind == "f16") {
    p.dense = pack_copies(dense, dense.nbytes, copies, pack_half);
    p.sparse = pack_copies(sparse, sparse_packed_bytes(sparse), copies, pack_sparse_nm);
  } else {
    p.dense = kind == "q4" ? pack_copies(dense, dense.nbytes, copies, pack_quant) : stored_copies(dense, copies);
    p.sparse = pack_copies(sparse, sparse_q8_packed_bytes(sparse), copies, pack_sparse_q8);
  }
  p.unpacked = stored_copies(sparse, copies);
  return p;
}

void bench_shape(const std::string& kind, Shape s, int reps, double min_mib, ThreadPool& pool, std::mt19937& rng) {
  const Pair p = make_pair(kind, s, min_mib, rng);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::int64_t n_tokens : {1, 8}) {
    std::vector<float> x(static_cast<std::size_t>(n_tokens * s.in)), y(static_cast<std::size_t>(n_tokens * s.out));
    for (float& v : x) v = normal(rng);
    QuantizedActivations xq;
    quantize_activations(x, n_tokens, s.in, xq, pool, 0, kActivationBlockQ8_0);
    const auto dense = [&](const TensorView& v) {
      const MatmulProduct product{&v, x, y};
      if (kind == "f16") {
        gemv_half_packed({&product, 1}, n_tokens, pool, kMinParallelMacs);
      } else if (kind == "q4") {
        const PackedProduct packed{DType::kQ4_0, static_cast<const std::uint8_t*>(v.packed), s.out, &xq, y};
        gemv_quant_packed({&packed, 1}, pool, kMinParallelMacs);
      } else {
        matmul(v, x, n_tokens, y, pool);
      }
    };
    const auto sparse = [&](const TensorView& v) {
      if (kind == "f16") {
        const MatmulProduct product{&v, x, y};
        gemv_sparse_packed({&product, 1}, n_tokens, pool, kMinParallelMacs);
      } else {
        const SparseQ8Product product{&v, &xq, y};
        gemv_sparse_q8_packed({&product, 1}, pool, kMinParallelMacs);
      }
    };
    const auto unpacked = [&](const TensorView& v) { matmul(v, x, n_tokens, y, pool); };
    double best_dense = 1e30, best_sparse = 1e30, best_unpacked = 1e30;
    for (int r = 0; r < reps; ++r) {  // alternated: background load hits all alike
      best_dense = std::min(best_dense, pass_seconds(p.dense, dense));
      best_sparse = std::min(best_sparse, pass_seconds(p.sparse, sparse));
      best_unpacked = std::min(best_unpacked, pass_seconds(p.unpacked, unpacked));
    }
    std::printf("%5lld x %-5lld %6lld %10.1f %8.1f %10.1f %8.1f %8.2fx %12.1f %8.2fx\n", static_cast<long long>(s.out),
                static_cast<long long>(s.in), static_cast<long long>(n_tokens), best_dense * 1e6,
                static_cast<double>(p.dense.bytes_each) / best_dense / 1e9, best_sparse * 1e6,
                static_cast<double>(p.sparse.bytes_each) / best_sparse / 1e9, best_dense / best_sparse,
                best_unpacked * 1e6, best_dense / best_unpacked);
  }
}

}  // namespace
}  // namespace peregrine

int main(int argc, char** argv) {
  int reps = 15, threads = 2;
  double min_mib = 256.0;
  std::string kind = "f16";
  for (int a = 1; a + 1 < argc; a += 2) {
    const std::string flag = argv[a];
    if (flag == "--reps") reps = std::stoi(argv[a + 1]);
    else if (flag == "--threads") threads = std::stoi(argv[a + 1]);
    else if (flag == "--min-mib") min_mib = std::stod(argv[a + 1]);
    else if (flag == "--kind") kind = argv[a + 1];
  }
  if (kind != "f16" && kind != "q4" && kind != "q8") {
    std::fprintf(stderr, "sparse_nm_bench: --kind is f16, q4 or q8, not %s\n", kind.c_str());
    return 1;
  }
  const bool simd = kind == "f16" ? peregrine::sparse_packed_gemv_available() && peregrine::half_packed_gemv_available()
                                  : peregrine::sparse_q8_packed_gemv_available() && peregrine::quant_packed_gemv_available();
  if (!simd) {
    std::fprintf(stderr, "sparse_nm_bench: the packed GEMVs need AVX-512 (VNNI, VBMI for q4 / q8)\n");
    return 1;
  }
  peregrine::ThreadPool pool(threads);
  std::mt19937 rng(7);
  std::printf("2:4 %s vs dense %s GEMV, %d threads, best of %d (time per matrix)\n", kind.c_str(), kind.c_str(), threads, reps);
  std::printf("%-13s %6s %10s %8s %10s %8s %9s %12s %9s\n", "out x in", "tokens", "dense us", "GB/s", "2:4 us", "GB/s",
              "dense/2:4", "unpacked us", "dense/unp");
  for (const auto s : peregrine::kTinyllama) peregrine::bench_shape(kind, s, reps, min_mib, pool, rng);
  return 0;
}
