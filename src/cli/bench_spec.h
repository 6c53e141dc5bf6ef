// peregrine bench --spec: the Spec-Bench-style table of speculative methods against plain
// decoding, with the costs that explain it (verify-k cost, draft cost ratio c, and Leviathan et
// al.'s predicted speedup next to the measured one).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "common.h"
#include "spec_options.h"

namespace peregrine::cli {

struct SpecBenchArgs {
  SpecOptions spec;                     // spec.method: a comma list (pld,draft,layerskip,quant)
  std::string variants = "chain";       // comma list of chain, adaptive, tree
  std::string tasks = "story,repeat";   // comma list of story, repeat, code
  std::int32_t prompts = 4;             // prompts per task
  std::int32_t n_gen = 128;             // tokens per generation
  std::int32_t reps = 1;                // passes over the prompts
  std::string text;                     // TinyStories text (default: shared data)
  std::string code_dir;                 // .py files of the code task (default: the Python standard library)
  float temperature = 0.0f;             // 0: greedy; > 0: sampling at this temperature
};

/// Adds --spec (the method list), --spec-variants, --spec-tasks, --spec-prompts, --spec-text, --spec-code,
/// --spec-temp and the --draft-* options to `cmd`.
void add_spec_bench_options(CLI::App& cmd, SpecBenchArgs& a);

/// Runs the comparison on the model of `model` with `threads` threads and prints the tables.
/// Returns the exit code (errors are reported on stderr).
int run_spec_bench_cli(const ModelOptions& model, const SpecBenchArgs& a, std::int32_t threads);

}  // namespace peregrine::cli
