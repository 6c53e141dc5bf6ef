#include "peregrine/engine/spec_bench.h"

#include <chrono>

#include "peregrine/engine/generator.h"

namespace peregrine {
namespace {

struct Run {
  std::vector<std::int32_t> tokens;
  GenerationStats stats;
  double seconds = 0;
};

Expected<Run> run_once(const LlamaModel& model, const std::vector<std::int32_t>& prompt, const SpecBenchMethod& m,
                       std::int32_t n_gen, float temperature, std::uint64_t seed, ThreadPool& pool) {
  GenerateOptions o;
  o.max_new_tokens = n_gen;
  o.sampling.temperature = temperature;
  o.sampling.top_k = 0;
  o.sampling.top_p = 1.0f;
  o.sampling.min_p = 0.0f;
  o.sampling.seed = seed;
  o.spec = m.spec;
  o.drafter = m.drafter;
  Run run;
  const auto t0 = std::chrono::steady_clock::now();
  auto stats = generate(model, prompt, o, pool, [&](std::int32_t id) { run.tokens.push_back(id); });
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!stats) return stats.status();
  run.stats = *stats;
  return run;
}

// Seconds from a run's first token to its last (generate()'s decode phase).
double decode_seconds(const GenerationStats& s) {
  return s.decode_tps > 0 ? static_cast<double>(s.generated_tokens - 1) / s.decode_tps : 0.0;
}

void add(SpecBenchRow& row, const Run& run, const Run& baseline) {
  const GenerationStats& s = run.stats;
  row.generated += s.generated_tokens;
  row.forwards += s.generated_tokens - 1 - s.accepted;  // each forward emits 1 + its accepted drafts
  row.drafted += s.drafted;
  row.accepted += s.accepted;
  row.steps += s.spec_steps;
  row.seconds += run.seconds;
  row.baseline_seconds += baseline.seconds;
  row.decode_seconds += decode_seconds(s);
  row.baseline_decode_seconds += decode_seconds(baseline.stats);
  row.identical = row.identical && run.tokens == baseline.tokens;
}

}  // namespace

double SpecBenchRow::mean_accepted() const {
  return forwards > 0 ? static_cast<double>(generated - runs) / static_cast<double>(forwards) : 0.0;
}

double SpecBenchRow::tokens_per_second() const { return seconds > 0 ? static_cast<double>(generated) / seconds : 0.0; }

double SpecBenchRow::speedup() const { return seconds > 0 ? baseline_seconds / seconds : 0.0; }

double SpecBenchRow::decode_speedup() const {
  return decode_seconds > 0 ? baseline_decode_seconds / decode_seconds : 0.0;
}

double SpecBenchRow::acceptance_rate() const {
  return drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
}

Expected<std::vector<SpecBenchRow>> run_spec_bench(const LlamaModel& model, const std::vector<SpecBenchTask>& tasks,
                                                   const std::vector<SpecBenchMethod>& methods, std::int32_t n_gen,
                                                   std::int32_t reps, ThreadPool& pool, float temperature) {
  if (n_gen < 1) return invalid_argument("spec bench: the number of generated tokens must be >= 1");
  if (!(temperature >= 0.0f)) return invalid_argument("spec bench: the temperature must be >= 0");
  if (reps < 1) return invalid_argument("spec bench: repetitions must be >= 1");
  std::vector<SpecBenchMethod> all = {{"none", SpecParams{}, nullptr}};
  all.insert(all.end(), methods.begin(), methods.end());
  std::vector<SpecBenchRow> rows;
  for (const SpecBenchTask& task : tasks) {
    if (task.prompts.empty()) return invalid_argument("spec bench: task '" + task.name + "' has no prompts");
    const std::size_t first = rows.size();
    for (const SpecBenchMethod& m : all) rows.push_back(SpecBenchRow{task.name, m.label});
    for (std::int32_t r = 0; r < reps; ++r) {
      for (std::size_t p = 0; p < task.prompts.size(); ++p) {
        const auto& prompt = task.prompts[p];
        const std::uint64_t seed = 1000 * static_cast<std::uint64_t>(r) + p;
        PEREGRINE_ASSIGN_OR_RETURN(Run baseline, run_once(model, prompt, all[0], n_gen, temperature, seed, pool));
        add(rows[first], baseline, baseline);
        ++rows[first].runs;
        for (std::size_t i = 1; i < all.size(); ++i) {
          PEREGRINE_ASSIGN_OR_RETURN(Run run, run_once(model, prompt, all[i], n_gen, temperature, seed, pool));
          add(rows[first + i], run, baseline);
          ++rows[first + i].runs;
        }
      }
    }
  }
  return rows;
}

}  // namespace peregrine
