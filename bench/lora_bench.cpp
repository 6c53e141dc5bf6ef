// Micro-benchmark of LoraSet::apply (model/lora_set.h), the unmerged LoRA products of a serving
// step: S slots, each holding one adapter of rank R on all 7 projections of every layer of
// TinyLlama-1.1B (dim 2048, KV dim 256, ffn 5632, 22 layers), and a batch of S·M rows, M per
// slot (decode: M = 1). One "step" applies every layer's 7 products once in 4 calls (Q/K/V,
// output, gate/up, down), as a forward does.
// Prints ms per step, the adapter bytes a step reads and their GB/s (every adapter is read once
// per step: the arithmetic is M·2 FLOPs per stored value, so this is memory-bound).
//
//   build/bin/lora_bench [--slots S] [--rows M] [--rank R] [--threads T] [--dtype f16|bf16|f32]
//                        [--steps N] [--reps K]

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "peregrine/core/thread_pool.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/model/lora_set.h"

namespace {

using namespace peregrine;

struct Shape {
  const char* name;
  std::int64_t in, out;
  int call;  // weights of one call share their input, as in a forward (Q/K/V, gate/up)
};
constexpr Shape kShapes[] = {{"attn_q", 2048, 2048, 0},   {"attn_k", 2048, 256, 0}, {"attn_v", 2048, 256, 0},
                             {"attn_output", 2048, 2048, 1}, {"ffn_gate", 2048, 5632, 2}, {"ffn_up", 2048, 5632, 2},
                             {"ffn_down", 5632, 2048, 3}};
constexpr int kCalls = 4;
constexpr std::int64_t kLayers = 22;

std::shared_ptr<const LoraAdapter> random_adapter(std::int64_t rank, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.02f);
  auto a = std::make_shared<LoraAdapter>();
  a->rank = rank;
  a->alpha = static_cast<float>(rank);
  for (std::int64_t l = 0; l < kLayers; ++l) {
    for (const Shape& s : kShapes) {
      LoraPair p{rank, s.in, s.out, std::vector<float>(static_cast<std::size_t>(rank * s.in)),
                 std::vector<float>(static_cast<std::size_t>(s.out * rank))};
      for (float& v : p.a) v = normal(rng);
      for (float& v : p.b) v = normal(rng);
      a->tensors[layer_tensor_name(l, s.name)] = std::move(p);
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t slots = 8, rows = 1, rank = 16, steps = 10;
  int threads = 2, reps = 5;
  std::string dtype = "f16";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--slots") slots = std::max(1L, std::atol(v));
    else if (flag == "--rows") rows = std::max(1L, std::atol(v));
    else if (flag == "--rank") rank = std::max(1L, std::atol(v));
    else if (flag == "--threads") threads = std::max(1, std::atoi(v));
    else if (flag == "--steps") steps = std::max(1L, std::atol(v));
    else if (flag == "--reps") reps = std::max(1, std::atoi(v));
    else if (flag == "--dtype") dtype = v;
    else { std::fprintf(stderr, "unknown flag %s (see the header of bench/lora_bench.cpp)\n", argv[i]); return 2; }
  }
  const DType products = dtype == "f32" ? DType::kF32 : dtype == "bf16" ? DType::kBF16 : DType::kF16;
  std::mt19937 rng(1);
  LoraSet set(products);
  for (std::int64_t k = 0; k < slots; ++k) {
    if (!set.add_slot({{random_adapter(rank, rng), 1.0f}}).has_value()) return 1;
  }
  const std::int64_t n = slots * rows;
  std::vector<std::int32_t> row_slots;
  for (std::int64_t k = 0; k < slots; ++k) row_slots.insert(row_slots.end(), static_cast<std::size_t>(rows), static_cast<std::int32_t>(k));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n * 5632));
  std::vector<std::vector<float>> y(std::size(kShapes), std::vector<float>(static_cast<std::size_t>(n * 5632)));
  for (float& v : x) v = normal(rng);
  ThreadPool pool(threads);
  ThreadPool::WarmScope warm(pool);
  auto step = [&] {
    for (std::int64_t l = 0; l < kLayers; ++l) {
      for (int call = 0; call < kCalls; ++call) {
        std::vector<LoraTarget> targets;
        std::int64_t in = 0;
        for (std::size_t i = 0; i < std::size(kShapes); ++i) {
          if (kShapes[i].call != call) continue;
          targets.push_back({layer_tensor_name(l, kShapes[i].name), std::span<float>(y[i]).first(static_cast<std::size_t>(n * kShapes[i].out))});
          in = kShapes[i].in;
        }
        set.apply(targets, std::span<const float>(x).first(static_cast<std::size_t>(n * in)), n, row_slots, pool);
      }
    }
  };
  double params = 0.0;
  for (const Shape& s : kShapes) params += static_cast<double>(rank * (s.in + s.out));
  const double bytes = params * kLayers * static_cast<double>(slots) * (products == DType::kF32 ? 4.0 : 2.0);
  step();  // warm-up: per-thread buffers
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < steps; ++i) step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / static_cast<double>(steps));
  }
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  std::printf("slots %ld, rows per slot %ld, rank %ld, %s, %d threads: %.3f ms per step (min %.3f, max %.3f), %.1f MB read, %.1f GB/s\n",
              static_cast<long>(slots), static_cast<long>(rows), static_cast<long>(rank), dtype.c_str(), threads, med, ms.front(),
              ms.back(), bytes / 1e6, bytes / (med * 1e6));
  return 0;
}
