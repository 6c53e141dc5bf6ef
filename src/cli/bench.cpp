// peregrine bench: llama-bench-style pp/tg throughput with the machine's roofline beside it.
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "bench_profile.h"
#include "bench_spec.h"
#include "common.h"
#include "parallel_options.h"
#include "peregrine/backend/cuda_forward.h"
#include "peregrine/tools/engine_bench.h"
#include "peregrine/kernels/cpu/matmul/gemm_bf16_dot.h"
#include "peregrine/kernels/cpu/isa.h"
#include "peregrine/tools/roofline.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

struct BenchArgs {
  ModelOptions model;
  BenchParams params;
  std::int32_t threads = 2;
  bool json = false;
  bool roofline_only = false;
  std::string isa;  // --isa: cap the kernel level ("avx2", ...)
  SpecBenchArgs spec;  // --spec: the speculative-decoding comparison instead of pp/tg
};

/// One row of the table: a test's throughput and what it achieved against the roofline.
struct Row {
  std::string test;
  MeanSd tps;
  double gbps = 0.0, gflops = 0.0;
};

/// The format holding most of the matrix bytes ("q4_0" for a Q4_0 GGUF with F32 norms,
/// "int4 g128" for a GPTQ folder).
std::string dominant_dtype(const ModelFile& f) {
  std::map<std::string, double> bytes;
  for (const auto& [name, t] : f.tensors) {
    if (t.shape.size() == 2) bytes[t.format_string()] += static_cast<double>(t.nbytes);
  }
  std::string best = "f32";
  for (const auto& [d, b] : bytes) {
    if (b > bytes[best]) best = d;
  }
  return best;
}

/// GB/s: the weight bytes the forwards read (measured), per second.
std::vector<Row> table_rows(const BenchArgs& a, const BenchResult& r) {
  std::vector<Row> rows;
  if (!r.pp_tps.empty()) {
    const MeanSd m = mean_sd(r.pp_tps);
    const double forwards_per_s = m.mean / static_cast<double>(a.params.n_prompt);
    rows.push_back({"pp" + std::to_string(a.params.n_prompt), m, r.pp_weight_bytes * forwards_per_s / 1e9,
                    r.pp_flops * forwards_per_s / 1e9});
  }
  if (!r.tg_tps.empty()) {
    const MeanSd m = mean_sd(r.tg_tps);
    const auto batch = static_cast<double>(a.params.batch);
    const double steps_per_s = m.mean / batch;  // each decode forward makes `batch` tokens
    const std::string label = "tg" + std::to_string(a.params.n_gen) + (a.params.batch > 1 ? "b" + std::to_string(a.params.batch) : "");
    rows.push_back({label, m, r.tg_weight_bytes * steps_per_s / 1e9,
                    r.tg_flops / static_cast<double>(a.params.n_gen) * steps_per_s / 1e9});
  }
  return rows;
}

/// Expert load over the bench's forwards: per layer the fewest and most tokens an expert got,
/// against the mean (top-k / n_experts of the tokens), and the experts never chosen.
void print_expert_load(const ModelConfig& c, const BenchResult& r) {
  if (r.expert_tokens.empty()) return;
  std::uint64_t min = UINT64_MAX, max = 0, total = 0, idle = 0;
  for (std::uint64_t t : r.expert_tokens) {
    min = std::min(min, t);
    max = std::max(max, t);
    total += t;
    idle += t == 0;
  }
  const double mean = static_cast<double>(total) / static_cast<double>(r.expert_tokens.size());
  std::printf("expert load: %lld experts x %lld layers, top-%lld; tokens per expert %llu..%llu (mean %.1f, busiest %.2fx "
              "the mean), %llu never chosen\n",
              static_cast<long long>(c.n_experts), static_cast<long long>(c.n_layers), static_cast<long long>(c.n_experts_used),
              static_cast<unsigned long long>(min), static_cast<unsigned long long>(max), mean, static_cast<double>(max) / mean,
              static_cast<unsigned long long>(idle));
}

/// The GPU's memory roofline for `bench -d cuda`: its device-to-device copy bandwidth (bytes
/// read + written per second, measured now); no FMA peak (% fma prints n/a).
Expected<Roofline> cuda_roofline() {
  PEREGRINE_ASSIGN_OR_RETURN(const double gbps, cuda_copy_bandwidth_gbs());
  return Roofline{{gbps, gbps, gbps}, 0.0, "CUDA device-to-device copy"};
}

void print_roofline(const Roofline& roof, int threads) {
  if (roof.fma_gflops == 0.0) {
    std::printf("roofline (%s): %.1f GB/s\n", roof.simd_target, roof.read.best);
    return;
  }
  std::printf("roofline (%d threads, %s): read %.1f GB/s (median of its samples %.1f, the fastest method's median %.1f), "
              "fp32 FMA %.1f GFLOP/s\n",
              threads, roof.simd_target, roof.read.best, roof.read.median, roof.read.sustained, roof.fma_gflops);
}

/// Why the fp32 FMA peak does not bound the matmuls of `dtype` (dominant_dtype), or "" when it
/// does: every ggml block format (against 8-bit activation blocks) and kInt with int8
/// activations run as int8 dot products; BF16's prefill GEMM, on a CPU with AVX512_BF16, as
/// BF16 pair dot products (gemm_bf16_dot: two multiply-adds per f32 lane per instruction).
std::string past_fma_peak(const std::string& dtype) {
  const auto t = dtype_from_name(dtype);
  if ((t && is_ggml_block_dtype(*t)) || dtype.ends_with(" a8")) return "int8 dot products";
  if (t == DType::kBF16 && gemm_bf16_dot_available()) return "BF16 pair dot products (VDPBF16PS)";
  return "";
}

void print_table(const std::string& name, const std::string& dtype, const BenchArgs& a,
                 const Roofline& roof, const BenchResult& result, const std::vector<Row>& rows) {
  std::printf("model: %s (%s, %.3f GB of weights read per decoded token, %.3f per pp%lld forward)\n", name.c_str(),
              dtype.c_str(), result.tg_weight_bytes / 1e9, result.pp_weight_bytes / 1e9, static_cast<long long>(a.params.n_prompt));
  print_roofline(roof, a.threads);
  const std::string past_fma = past_fma_peak(dtype);
  std::printf("| %-7s | %18s | %8s | %6s | %8s | %6s |\n", "test", "t/s", "GB/s", "% bw", "GFLOP/s", "% fma");
  std::printf("|---------|--------------------|----------|--------|----------|--------|\n");
  for (const Row& r : rows) {
    char fma[16] = "n/a";
    if (past_fma.empty() && roof.fma_gflops > 0.0) std::snprintf(fma, sizeof fma, "%5.1f%%", 100.0 * r.gflops / roof.fma_gflops);
    std::printf("| %-7s | %9.2f ± %6.2f | %8.2f | %5.1f%% | %8.2f | %6s |\n", r.test.c_str(), r.tps.mean, r.tps.sd,
                r.gbps, 100.0 * r.gbps / roof.read.best, r.gflops, fma);
  }
  if (!past_fma.empty()) {
    std::printf("%% fma: n/a, %s matmuls are %s, which the fp32 FMA peak does not bound\n", dtype.c_str(), past_fma.c_str());
  }
}

void print_json(const std::string& name, const std::string& dtype, const BenchArgs& a, const Roofline& roof,
                const BenchResult& r, const std::vector<Row>& rows) {
  nlohmann::json j = {{"model", name},       {"dtype", dtype},         {"threads", a.threads},
                      {"n_prompt", a.params.n_prompt}, {"n_gen", a.params.n_gen}, {"reps", a.params.reps}, {"batch", a.params.batch},
                      {"pp_tps", nullptr},   {"pp_sd", nullptr},       {"tg_tps", nullptr},
                      {"tg_sd", nullptr},    {"gbps", nullptr},        {"gflops", nullptr},
                      {"read_gbps", roof.read.best}, {"read_median_gbps", roof.read.median}, {"read_sustained_gbps", roof.read.sustained}, {"fma_gflops", roof.fma_gflops}, {"simd", roof.simd_target},
                      {"pp_weight_bytes", r.pp_weight_bytes}, {"tg_weight_bytes", r.tg_weight_bytes},
                      {"expert_tokens", r.expert_tokens}};
  if (a.params.profile) {
    j["pp_profile"] = profile_json(profile_rows(r.pp_profile, a.params.reps));
    j["tg_profile"] = profile_json(profile_rows(r.tg_profile, static_cast<double>(a.params.reps) * a.params.n_gen));
  }
  std::size_t i = 0;
  if (!r.pp_tps.empty()) {
    j["pp_tps"] = rows[i].tps.mean;
    j["pp_sd"] = rows[i].tps.sd;
    j["gflops"] = rows[i++].gflops;
  }
  if (!r.tg_tps.empty()) {
    j["tg_tps"] = rows[i].tps.mean;
    j["tg_sd"] = rows[i].tps.sd;
    j["gbps"] = rows[i].gbps;
  }
  std::printf("%s\n", j.dump(2).c_str());
}

void print_profiles(const BenchArgs& a, const BenchResult& r) {
  const std::string reps = " x " + std::to_string(a.params.reps) + " reps";
  if (!r.pp_tps.empty()) {
    print_profile("\nprefill profile (pp" + std::to_string(a.params.n_prompt) + reps + ", ms per forward):",
                  profile_rows(r.pp_profile, a.params.reps));
  }
  if (!r.tg_tps.empty()) {
    print_profile("\ndecode profile (tg" + std::to_string(a.params.n_gen) + reps + ", ms per token):",
                  profile_rows(r.tg_profile, static_cast<double>(a.params.reps) * a.params.n_gen));
  }
}

// Caps the kernels at --isa's level (before the model loads: packing at load follows the level).
Status apply_isa(const std::string& name) {
  if (name.empty()) return Status::ok();
  auto level = parse_isa_level(name);
  if (!level) return level.status();
  return limit_isa(*level);
}

int run(const BenchArgs& args) {
  if (Status st = validate_threads(args.threads); !st) return report(st);
  if (Status st = apply_isa(args.isa); !st) return report(st);
  if (args.spec.spec.method != "none") {
    if (args.model.tp * args.model.pp > 1) {
      return report(unsupported("bench --spec runs in one process (its adaptive drafts are timed on each rank, which would diverge)"));
    }
    SpecBenchArgs spec = args.spec;
    spec.n_gen = static_cast<std::int32_t>(args.params.n_gen);
    return run_spec_bench_cli(args.model, spec, args.threads);
  }
  ThreadPool pool(args.threads);
  if (args.roofline_only && args.model.model.empty()) {
    print_roofline(measure_roofline(pool), args.threads);
    return 0;
  }
  auto file = open_model(args.model, &pool);
  if (!file) return report(file.status());
  const std::string name = std::filesystem::path(file->path).filename().string();
  const std::string dtype = dominant_dtype(*file);
  auto model = create_model(std::move(*file), args.model);
  if (!model) return report(model.status());
  auto roof = args.model.device == "cuda" ? cuda_roofline() : Expected<Roofline>(measure_roofline(pool));
  if (!roof) return report(roof.status());
  auto result = run_bench(*model, args.params, pool);
  if (!result) return report(result.status());
  const std::vector<Row> rows = table_rows(args, *result);
  if (args.json) {
    print_json(name, dtype, args, *roof, *result, rows);
  } else {
    print_table(name, dtype, args, *roof, *result, rows);
    print_expert_load(model->config(), *result);
    if (args.params.profile) print_profiles(args, *result);
  }
  return 0;
}

}  // namespace

Verb add_bench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure prefill (pp) and decode (tg) throughput, llama-bench style, against this machine's roofline");
  add_model_options(*cmd, args->model);
  add_mmap_option(*cmd, args->model);
  add_dtype_option(*cmd, args->model);
  add_device_option(*cmd, args->model);
  add_parallel_options(*cmd, args->model);
  cmd->add_option("--batch", args->params.batch, "Sequences decoding together in the tg test (one row each per forward)")
      ->capture_default_str();
  cmd->add_option("-p,--n-prompt", args->params.n_prompt, "Prompt tokens of the pp test (0 = skip)")->capture_default_str();
  cmd->add_option("-n,--n-gen", args->params.n_gen, "Generated tokens of the tg test (0 = skip)")->capture_default_str();
  cmd->add_option("-r,--repetitions", args->params.reps, "Timed repetitions of each test")->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "Threads")->capture_default_str();
  cmd->add_option("--seed", args->params.seed, "Seed of the random prompt tokens")->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object instead of the table");
  cmd->add_flag("--profile", args->params.profile,
                "Also time each op kind of the forwards (matmuls by role, attention, norms, RoPE, ...) and print where "
                "a forward's time goes, with each matmul's weight GB/s");
  add_spec_bench_options(*cmd, args->spec);
  cmd->add_option("--spec-reps", args->spec.reps, "With --spec: passes over the prompts")->capture_default_str();
  cmd->add_option("--isa", args->isa,
                  "Cap the CPU kernels at this level (x86-64: scalar, sse4, avx2, avx2vnni, avx512, avx512vnni; "
                  "aarch64: scalar, neon; or native): time a narrower CPU's kernels on this machine (also "
                  "PEREGRINE_ISA in the environment of any command)");
  cmd->add_flag("--roofline", args->roofline_only,
                "Only measure this machine's read bandwidth and FMA peak (unless -m is also given)");
  return {cmd, [args] { return run(*args); }};
}

}  // namespace peregrine::cli
