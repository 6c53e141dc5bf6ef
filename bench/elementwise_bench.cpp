// Micro-benchmark of the SIMD elementwise kernels (kernels/cpu/elementwise/elementwise.h) against their
// scalar reference twins at TinyLlama-1.1B's sizes (dim 2048, 32 query / 4 KV heads of 64,
// ffn 5632), one token's row. Single thread; variants alternate within each repetition.
//
//   build/bin/elementwise_bench [--reps N]
//
// RoPE rows: both q and k of one position, as the model rotates them: reference (angles per
// call), rope() twice (table per call), one rope_table shared by q and k (the model's path),
// and rope_rotate alone (what caching the table per position across layers would leave).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "peregrine/kernels/cpu/elementwise/elementwise.h"

namespace {

using peregrine::RopeStyle;

std::vector<float> random_vec(std::int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = normal(rng);
  return v;
}

// Microseconds per call: fn repeated for at least 20 ms.
double us_per_call(const std::function<void()>& fn) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  std::int64_t calls = 0;
  double elapsed = 0.0;
  do {
    for (int i = 0; i < 64; ++i) fn();
    calls += 64;
    elapsed = std::chrono::duration<double, std::micro>(clock::now() - start).count();
  } while (elapsed < 20000.0);
  return elapsed / static_cast<double>(calls);
}

struct Variant {
  const char* name;
  std::function<void()> fn;
};

// Times the variants alternately `reps` times and prints medians relative to the first.
void run(const char* what, const std::vector<Variant>& variants, int reps) {
  std::vector<std::vector<double>> t(variants.size());
  for (int r = 0; r < reps; ++r) {
    for (std::size_t i = 0; i < variants.size(); ++i) t[i].push_back(us_per_call(variants[i].fn));
  }
  std::vector<double> med;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  for (std::size_t i = 0; i < variants.size(); ++i) {
    std::printf("%-8s %-28s %9.3f us  speedup vs %s %6.1fx\n", what, variants[i].name, med[i], variants[0].name, med[0] / med[i]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
  }
  std::mt19937 rng(1);
  const std::int64_t dim = 2048, n_heads = 32, n_kv_heads = 4, hd = 64, ffn = 5632;

  const auto x = random_vec(dim, rng), w = random_vec(dim, rng);
  std::vector<float> out(static_cast<std::size_t>(dim));
  run("rmsnorm", {{"reference", [&] { peregrine::rmsnorm_reference(x.data(), w.data(), out.data(), dim, 1e-5f); }},
                  {"simd", [&] { peregrine::rmsnorm(x.data(), w.data(), out.data(), dim, 1e-5f); }}}, reps);

  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kNeox}) {
    auto q = random_vec(n_heads * hd, rng), k = random_vec(n_kv_heads * hd, rng);
    std::vector<float> c(static_cast<std::size_t>(hd)), s(c.size());
    std::int32_t pos = 0;  // advancing positions, as prefill rows do
    const float theta = 10000.0f;
    const char* what = style == RopeStyle::kInterleaved ? "rope-int" : "rope-neox";
    peregrine::rope_table(1000, hd, theta, style, c.data(), s.data());
    run(what, {{"reference q+k", [&] { peregrine::rope_reference(q.data(), n_heads, hd, pos, theta, style);
                                       peregrine::rope_reference(k.data(), n_kv_heads, hd, pos++ & 4095, theta, style); }},
               {"rope() q+k", [&] { peregrine::rope(q.data(), n_heads, hd, pos, theta, style);
                                    peregrine::rope(k.data(), n_kv_heads, hd, pos++ & 4095, theta, style); }},
               {"table once + rotate q+k", [&] { peregrine::rope_table(pos++ & 4095, hd, theta, style, c.data(), s.data());
                                                 peregrine::rope_rotate(q.data(), n_heads, hd, c.data(), s.data(), style);
                                                 peregrine::rope_rotate(k.data(), n_kv_heads, hd, c.data(), s.data(), style); }},
               {"rotate q+k (cached table)", [&] { peregrine::rope_rotate(q.data(), n_heads, hd, c.data(), s.data(), style);
                                                   peregrine::rope_rotate(k.data(), n_kv_heads, hd, c.data(), s.data(), style); }}},
        reps);
  }

  auto gate = random_vec(ffn, rng);
  const auto up = random_vec(ffn, rng);
  const auto gate0 = gate;
  run("swiglu", {{"reference", [&] { peregrine::swiglu_reference(gate.data(), up.data(), ffn); std::copy(gate0.begin(), gate0.end(), gate.begin()); }},
                 {"simd", [&] { peregrine::swiglu(gate.data(), up.data(), ffn); std::copy(gate0.begin(), gate0.end(), gate.begin()); }}}, reps);
  return 0;
}
