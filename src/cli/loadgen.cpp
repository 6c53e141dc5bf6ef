// peregrine loadgen: drives an OpenAI-compatible server with concurrent completion requests
// and reports throughput and latency percentiles.
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "common.h"
#include "peregrine/tools/load_generator.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

struct LoadgenArgs {
  ModelOptions model;  // its tokenizer sizes the prompts
  LoadOptions load;
  std::int32_t prompt_len = 128;
  std::int32_t shared_prefix = 0;
  std::string text_file;  // default: ../shared/data/tinystories
  std::uint64_t seed = 0;
  bool json = false;
};

void print_report(const LoadReport& r, bool stream) {
  std::printf("requests: %d (%d succeeded), concurrency %d, wall %.2f s\n", r.requests, r.succeeded, r.concurrency,
              r.wall_s);
  std::printf("throughput: %.2f req/s, %.1f output tok/s (%lld prompt, %lld output tokens)\n", r.req_per_s,
              r.output_tps, static_cast<long long>(r.prompt_tokens), static_cast<long long>(r.output_tokens));
  auto row = [](const char* name, const Percentiles& p) {
    std::printf("%-8s p50 %9.2f  p90 %9.2f  p99 %9.2f\n", name, p.p50, p.p90, p.p99);
  };
  if (stream) {
    std::printf("streamed: %lld text chunks, %.1f per s (failed streams included)\n",
                static_cast<long long>(r.streamed_chunks), r.streamed_cps);
    row("TTFT ms", r.ttft_ms);
    row("ITL ms", r.itl_ms);
  }
  row("E2E ms", r.e2e_ms);
  std::string errors;
  for (const auto& [kind, n] : r.errors) errors += " " + kind + "=" + std::to_string(n);
  std::printf("errors:%s\n", errors.empty() ? " none" : errors.c_str());
}

int run(LoadgenArgs& args) {
  ::signal(SIGPIPE, SIG_IGN);
  const std::string text_path =
      args.text_file.empty() ? shared_data_dir() + "/data/tinystories/tinystories_valid_excerpt.txt" : args.text_file;
  auto text = text_or_file("", text_path);
  if (!text) return report(text.status());
  auto file = open_model(args.model);
  if (!file) return report(file.status());
  auto tokenizer = load_tokenizer(*file, args.model.tokenizer);
  if (!tokenizer) return report(tokenizer.status());
  auto prompts = build_prompts(*text, **tokenizer, args.load.requests, args.prompt_len, args.shared_prefix, args.seed);
  if (!prompts) return report(prompts.status());
  auto result = run_load(args.load, *prompts);
  if (!result) return report(result.status());
  if (args.json) {
    std::printf("%s\n", result->to_json().dump(2).c_str());
  } else {
    print_report(*result, args.load.stream);
  }
  return 0;
}

}  // namespace

Verb add_loadgen(CLI::App& app) {
  auto args = std::make_shared<LoadgenArgs>();
  CLI::App* cmd = app.add_subcommand("loadgen", "Load-test an OpenAI-compatible server (/v1/completions)");
  add_model_options(*cmd, args->model);
  cmd->add_option("--url", args->load.url, "Server base URL")->capture_default_str();
  cmd->add_option("-c,--concurrency", args->load.concurrency, "Concurrent clients")->capture_default_str();
  cmd->add_option("-n,--requests", args->load.requests, "Total requests")->capture_default_str();
  cmd->add_option("--prompt-len", args->prompt_len, "Prompt length in tokens (of -m's tokenizer)")->capture_default_str();
  cmd->add_option("--max-tokens", args->load.max_tokens, "Tokens to generate per request (ignore_eos)")->capture_default_str();
  cmd->add_option("--shared-prefix", args->shared_prefix, "Leading prompt tokens identical across requests")->capture_default_str();
  cmd->add_flag("--stream", args->load.stream, "Stream (SSE): needed for TTFT and ITL");
  cmd->add_option("--api-key", args->load.api_key, "Bearer token");
  cmd->add_option("--models", args->load.models,
                  "Model names the requests cycle through (comma-separated: the base's, serve --lora adapters'); "
                  "default: none sent, the server's single model")
      ->delimiter(',');
  cmd->add_option("--text", args->text_file, "Text the prompts are cut from (default: the shared TinyStories excerpt)");
  cmd->add_option("--seed", args->seed, "Seed of the prompts' text offsets")->capture_default_str();
  cmd->add_flag("--json", args->json, "Print the report as JSON");
  return {cmd, [args] { return run(*args); }};
}

}  // namespace peregrine::cli
