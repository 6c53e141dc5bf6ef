// peregrine <verb> [options]: the command-line front end.
#include <cstdio>
#include <vector>

#include "verbs.h"

int main(int argc, char** argv) {
  CLI::App app{"Peregrine: LLM inference engine (Llama-family models on the CPU)", "peregrine"};
  app.require_subcommand(1);
  std::vector<peregrine::cli::Verb> verbs = {
      peregrine::cli::add_generate(app),
      peregrine::cli::add_tokenize(app),
      peregrine::cli::add_inspect(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) std::fprintf(stderr, "peregrine: error: %s\n", e.what());
    return e.get_exit_code() != 0 ? 2 : app.exit(e);
  }
  for (auto& v : verbs) {
    if (v.command->parsed()) return v.run();
  }
  return 2;
}
