// A Spec-Bench-style measurement (Xia et al. 2024, seed 000's leaderboard): each speculative
// method against plain decoding of the same target, on the same prompts, in the same run;
// mean accepted tokens per target forward, tokens/s and speedup, and a check that every
// method's greedy output equals plain decoding's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/spec/drafter.h"
#include "peregrine/spec/spec_params.h"

namespace peregrine {

/// A named set of prompts (token ids).
struct SpecBenchTask {
  std::string name;
  std::vector<std::vector<std::int32_t>> prompts;
};

/// One column of the comparison: a label, its SpecParams and the drafter it needs (null for
/// plain decoding and prompt lookup).
struct SpecBenchMethod {
  std::string label;
  SpecParams spec;
  Drafter* drafter = nullptr;
};

/// One (task, method) cell, summed over the task's prompts and the repetitions.
struct SpecBenchRow {
  std::string task, method;
  std::int64_t runs = 0;       // generate() calls (prompts × repetitions)
  std::int64_t generated = 0;  // tokens
  std::int64_t forwards = 0;   // target forwards after the prefill (decode / verification steps)
  std::int64_t drafted = 0, accepted = 0;
  std::int64_t steps = 0;      // verification steps (forwards that carried a draft)
  double seconds = 0;           // wall time of the generate() calls (prefill included)
  double baseline_seconds = 0;  // plain decoding's time on the same prompts, same run
  double decode_seconds = 0;    // of `seconds`, after each run's first token (drafter prefill included)
  double baseline_decode_seconds = 0;
  bool identical = true;        // greedy: every output equals plain decoding's (sampled runs
                                //   differ by their draws; their losslessness is tested apart)
  /// Mean accepted tokens τ: tokens emitted per target forward after the prefill (each run's
  /// first token comes from its prefill); 1 for plain decoding.
  double mean_accepted() const;
  double tokens_per_second() const;
  double speedup() const;  // baseline_seconds / seconds
  double decode_speedup() const;  // baseline_decode_seconds / decode_seconds
  double acceptance_rate() const;  // accepted / drafted
};

/// Generation of `n_gen` tokens (no EOS stop) for every prompt of every task, with plain
/// decoding and with each method, interleaved prompt by prompt (baseline, then each method) so
/// the machine's noise spreads evenly; `reps` passes. `temperature` 0 is greedy; above 0 every
/// run samples from softmax(logits / temperature) over the whole vocabulary (no top-k / top-p /
/// min-p), seeded per prompt alike for every method (speculative sampling keeps the target's
/// distribution, Leviathan et al. 2023). Rows: for each task, plain decoding first, then the
/// methods in order. Errors: kInvalidArgument (n_gen < 1, reps < 1, no prompts, temperature
/// < 0) and those of generate().
Expected<std::vector<SpecBenchRow>> run_spec_bench(const LlamaModel& model, const std::vector<SpecBenchTask>& tasks,
                                                   const std::vector<SpecBenchMethod>& methods, std::int32_t n_gen,
                                                   std::int32_t reps, ThreadPool& pool, float temperature = 0.0f);

}  // namespace peregrine
