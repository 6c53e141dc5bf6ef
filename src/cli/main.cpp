// peregrine <verb> [options]: the command-line front end.
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "verbs.h"

int main(int argc, char** argv) {
  CLI::App app{"Peregrine: LLM inference engine (Llama-family models on the CPU)", "peregrine"};
  app.require_subcommand(1);
  std::vector<peregrine::cli::Verb> verbs = {
      peregrine::cli::add_generate(app),
      peregrine::cli::add_chat(app),
      peregrine::cli::add_tokenize(app),
      peregrine::cli::add_inspect(app),
      peregrine::cli::add_eval(app),
      peregrine::cli::add_bench(app),
      peregrine::cli::add_synth(app),
      peregrine::cli::add_quantize(app),
      peregrine::cli::add_prune(app),
      peregrine::cli::add_pareto(app),
      peregrine::cli::add_distill(app),
      peregrine::cli::add_train_draft(app),
      peregrine::cli::add_lora(app),
      peregrine::cli::add_finetune(app),
      peregrine::cli::add_serve(app),
      peregrine::cli::add_loadgen(app),
  };
  std::string names;
  bool known = false;
  for (const auto& v : verbs) {
    names += (names.empty() ? "" : ", ") + v.command->get_name();
    known = known || (argc > 1 && v.command->get_name() == argv[1]);
  }
  if (argc == 1) {
    std::fputs(app.help().c_str(), stderr);
    return 2;
  }
  if (argv[1][0] != '-' && !known) {
    std::fprintf(stderr, "peregrine: error: unknown verb '%s' (expected one of: %s)\n", argv[1], names.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) std::fprintf(stderr, "peregrine: error: %s\n", e.what());
    return e.get_exit_code() != 0 ? 2 : app.exit(e);
  }
  // Library code reports errors as values; this only catches what the OS can refuse at any
  // point (memory, threads), so that even those end in one error line, not an abort.
  try {
    for (auto& v : verbs) {
      if (v.command->parsed()) return v.run();
    }
  } catch (const std::bad_alloc&) {
    std::fputs("peregrine: error: out of memory\n", stderr);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "peregrine: error: %s\n", e.what());
    return 1;
  }
  return 2;
}
