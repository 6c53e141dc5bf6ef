// The `peregrine` verbs. Each add_* registers a CLI11 subcommand and returns how to run it.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace peregrine::cli {

struct Verb {
  CLI::App* command = nullptr;
  std::function<int()> run;  // returns the process exit code
};

Verb add_generate(CLI::App& app);  // generate.cpp
Verb add_chat(CLI::App& app);      // chat.cpp
Verb add_tokenize(CLI::App& app);  // tokenize.cpp
Verb add_inspect(CLI::App& app);   // inspect.cpp
Verb add_eval(CLI::App& app);      // eval.cpp
Verb add_bench(CLI::App& app);     // bench.cpp
Verb add_synth(CLI::App& app);     // synth.cpp
Verb add_serve(CLI::App& app);     // serve.cpp
Verb add_loadgen(CLI::App& app);   // loadgen.cpp
Verb add_quantize(CLI::App& app);  // quantize.cpp
Verb add_prune(CLI::App& app);     // prune.cpp
Verb add_pareto(CLI::App& app);    // pareto.cpp
Verb add_distill(CLI::App& app);   // distill.cpp
Verb add_train_draft(CLI::App& app);  // train_draft.cpp
Verb add_lora(CLI::App& app);      // lora.cpp
Verb add_finetune(CLI::App& app);  // finetune.cpp

}  // namespace peregrine::cli
