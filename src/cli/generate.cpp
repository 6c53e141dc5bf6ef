// peregrine generate: prompt → streamed continuation, with a stats line on stderr.
#include <cstdio>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "common.h"
#include "parallel_options.h"
#include "peregrine/engine/generator.h"
#include "peregrine/kv/kv_cache.h"
#include "peregrine/core/text_file.h"
#include "peregrine/sampling/json_schema_grammar.h"
#include "peregrine/tokenizer/chat_prompt.h"
#include "lora_options.h"
#include "spec_options.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

struct GenerateArgs {
  ModelOptions model;
  std::string prompt = "Once upon a time";
  std::string prompt_file;
  std::int32_t n_predict = 256;
  std::int32_t threads = 2;
  std::int64_t ctx = 0;
  std::string kv_type = "f32";
  bool no_echo = false;
  bool chat = false;          // --chat: the prompt is one user message through the chat template
  std::string system;         // --system: a system message before it
  std::string chat_template;  // --chat-template NAME|FILE
  std::string stats_json;
  SamplingParams sampling;
  SpecOptions spec;
  std::vector<std::string> loras;  // --lora PATH[:SCALE]
  std::string grammar;             // --grammar GBNF
  std::string grammar_file;        // --grammar-file PATH
  std::string json_schema;         // --json-schema JSON or @PATH
};

void print_stats(const GenerationStats& s, bool speculative) {
  std::fprintf(stderr,
               "stats: prompt_tokens=%lld generated_tokens=%lld ttft_ms=%.2f "
               "prefill_tps=%.1f decode_tps=%.1f stop=%s",
               static_cast<long long>(s.prompt_tokens), static_cast<long long>(s.generated_tokens),
               s.ttft_ms, s.prefill_tps, s.decode_tps, stop_reason_name(s.stop));
  if (speculative) {
    std::fprintf(stderr, " drafted=%lld accepted=%lld acceptance_rate=%.3f mean_accepted_per_step=%.2f",
                 static_cast<long long>(s.drafted), static_cast<long long>(s.accepted), s.acceptance_rate(),
                 s.mean_accepted_per_step());
  }
  std::fputs("\n", stderr);
}

Status write_stats_json(const std::string& path, const GenerationStats& s) {
  nlohmann::json j = {{"prompt_tokens", s.prompt_tokens}, {"generated_tokens", s.generated_tokens},
                      {"ttft_ms", s.ttft_ms},             {"prefill_tps", s.prefill_tps},
                      {"decode_tps", s.decode_tps},       {"stop", stop_reason_name(s.stop)},
                      {"drafted", s.drafted},             {"accepted", s.accepted},
                      {"acceptance_rate", s.acceptance_rate()},
                      {"mean_accepted_per_step", s.mean_accepted_per_step()}};
  std::ofstream out(path);
  if (!out) return io_error("cannot write stats to " + path);
  out << j.dump(2) << "\n";
  return out ? Status::ok() : io_error("cannot write stats to " + path);
}

/// The grammar of --grammar's text, --grammar-file's contents or --json-schema's schema (inline
/// JSON, or @PATH), parsed; null when none is given.
Expected<std::shared_ptr<const Grammar>> read_grammar(const GenerateArgs& a) {
  const int given = !a.grammar.empty() + !a.grammar_file.empty() + !a.json_schema.empty();
  if (given > 1) return invalid_argument("give one of --grammar, --grammar-file and --json-schema");
  if (given == 0) return std::shared_ptr<const Grammar>();
  if (!a.grammar.empty()) return Grammar::parse(a.grammar);
  if (!a.grammar_file.empty()) {
    auto contents = read_text_file(a.grammar_file);
    if (!contents) return contents.status();
    return Grammar::parse(*contents);
  }
  std::string text = a.json_schema;
  if (text.starts_with("@")) {
    auto contents = read_text_file(text.substr(1));
    if (!contents) return contents.status();
    text = std::move(*contents);
  }
  const auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
  if (schema.is_discarded()) return invalid_argument("--json-schema is not valid JSON");
  auto gbnf = json_schema_to_gbnf(schema);
  if (!gbnf) return invalid_argument("--json-schema: " + gbnf.status().message());
  return Grammar::parse(*gbnf);
}

Status validate(const GenerateArgs& a) {
  PEREGRINE_RETURN_IF_ERROR(validate_threads(a.threads));
  if (a.n_predict < 0) return invalid_argument("-n must be >= 0 (got " + std::to_string(a.n_predict) + ")");
  if (a.ctx < 0) return invalid_argument("--ctx must be >= 0");
  return a.sampling.validate();
}

/// The prompt's ids: its text encoded (BOS per the tokenizer), or with --chat the conversation
/// [--system, the prompt] through the chat template. Errors: an empty prompt, the template's.
Expected<std::vector<std::int32_t>> prompt_tokens(const GenerateArgs& a, const std::string& prompt, const LlamaModel& model,
                                                  const Tokenizer& tok) {
  std::vector<std::int32_t> ids;
  if (a.chat) {
    PEREGRINE_ASSIGN_OR_RETURN(const ChatTemplate chat_template, chat_template_for(a.chat_template, model.file()));
    std::vector<ChatMessage> messages;
    if (!a.system.empty()) messages.push_back({"system", a.system});
    messages.push_back({"user", prompt});
    PEREGRINE_ASSIGN_OR_RETURN(ids, chat_prompt_tokens(chat_template, messages, tok));
  } else {
    ids = tok.encode(prompt, tok.add_bos_default());
  }
  if (ids.empty()) return invalid_argument("the prompt is empty (no tokens)");
  return ids;
}

int run(const GenerateArgs& args) {
  if (Status st = validate(args); !st) return report(st);
  auto kv_type = parse_kv_type(args.kv_type);
  if (!kv_type) return report(kv_type.status());
  auto prompt_text = text_or_file(args.prompt, args.prompt_file);
  if (!prompt_text) return report(prompt_text.status());
  const std::string& prompt = *prompt_text;
  if (!args.stats_json.empty() && !std::ofstream(args.stats_json, std::ios::app)) {
    return report(io_error("cannot write stats to " + args.stats_json));
  }
  ThreadPool pool(args.threads);
  auto file = open_model(args.model, &pool);
  if (!file) return report(file.status());
  auto tokenizer = load_tokenizer(*file, args.model.tokenizer);
  if (!tokenizer) return report(tokenizer.status());
  auto model = create_model(std::move(*file), args.model);
  if (!model) return report(model.status());
  auto spec = spec_params(args.spec);
  if (!spec) return report(spec.status());
  if (args.model.tp * args.model.pp > 1 && spec->adaptive) {
    return report(unsupported("--draft-adaptive times the drafts on each rank, which would diverge under --tp / --pp"));
  }
  if (args.model.device == "cuda" && spec->method != SpecMethod::kNone) {
    return report(unsupported("speculative decoding does not run on -d cuda yet"));
  }
  const Tokenizer& tok = **tokenizer;
  auto prompt_ids = prompt_tokens(args, prompt, *model, tok);
  if (!prompt_ids) return report(prompt_ids.status());
  const std::vector<std::int32_t>& ids = *prompt_ids;
  GenerateOptions opt;
  opt.max_new_tokens = args.n_predict;
  opt.ctx_len = args.ctx;
  opt.kv_type = *kv_type;
  opt.eos_id = tok.eos_id();
  if (args.chat) opt.stop_ids = end_of_turn_tokens(tok);
  opt.sampling = args.sampling;
  opt.spec = *spec;
  const std::int64_t ctx = args.ctx > 0 ? args.ctx : std::min<std::int64_t>(model->config().max_seq_len,
                                                                             static_cast<std::int64_t>(ids.size()) + args.n_predict);
  auto drafter = make_drafter(args.spec, *model, args.model, ctx, 1, pool);
  if (!drafter) return report(drafter.status());
  std::unique_ptr<LoraPool> lora;
  if (!args.loras.empty()) {
    std::vector<LoraSpec> specs;
    for (const std::string& text : args.loras) {
      auto spec_or = parse_lora_spec(text);
      if (!spec_or) return report(spec_or.status());
      specs.push_back(*spec_or);
    }
    auto entries = load_lora_entries(specs, model->file(), args.model);
    if (!entries) return report(entries.status());
    lora = resident_lora_pool(std::move(*entries), model->file());
    opt.lora = lora.get();
  }
  opt.drafter = drafter->drafter.get();
  auto grammar = read_grammar(args);
  if (!grammar) return report(grammar.status());
  if (*grammar) opt.grammar = TokenGrammar::of(*grammar, TokenTrie::of(tok));
  bool echoed = false;
  std::int32_t prev = ids.back();
  auto on_token = [&](std::int32_t id) {
    if (!echoed && !args.no_echo && !args.chat) std::fputs(prompt.c_str(), stdout);
    echoed = true;
    const std::string piece = tok.decode_token(prev, id);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    prev = id;
  };
  auto stats = generate(*model, ids, opt, pool, on_token);
  if (!stats) return report(stats.status());
  if (!echoed && !args.no_echo && !args.chat) std::fputs(prompt.c_str(), stdout);
  std::fputs("\n", stdout);
  std::fflush(stdout);
  print_stats(*stats, spec->method != SpecMethod::kNone);
  if (!args.stats_json.empty()) {
    if (Status st = write_stats_json(args.stats_json, *stats); !st) return report(st);
  }
  return 0;
}

}  // namespace

Verb add_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt");
  add_model_options(*cmd, args->model);
  add_mmap_option(*cmd, args->model);
  add_dtype_option(*cmd, args->model);
  add_device_option(*cmd, args->model);
  add_parallel_options(*cmd, args->model);
  auto* p = cmd->add_option("-p,--prompt", args->prompt, "Prompt text")->capture_default_str();
  auto* f = cmd->add_option("-f,--file", args->prompt_file, "Read the prompt from a file");
  p->excludes(f);
  cmd->add_option("-n,--n-predict", args->n_predict, "Number of tokens to generate")->capture_default_str();
  add_sampling_options(*cmd, args->sampling);
  cmd->add_option("-t,--threads", args->threads, "Threads")->capture_default_str();
  cmd->add_option("-c,--ctx", args->ctx, "Context length in tokens (0 = the model's)")->capture_default_str();
  cmd->add_option("--kv-type", args->kv_type, "KV cache element type: f32, f16, q8_0, i8, f8_e4m3 or f8_e5m2")->capture_default_str();
  cmd->add_flag("--no-echo", args->no_echo, "Print only the continuation, not the prompt");
  cmd->add_flag("--chat", args->chat,
                "Send the prompt as one user message through the model's chat template; print the reply (no echo), "
                "ending at the template's end-of-turn token");
  cmd->add_option("--system", args->system, "--chat: a system message before the prompt");
  cmd->add_option("--chat-template", args->chat_template,
                  "--chat: a Jinja template file or a built-in name (chatml, llama-2, llama-3) instead of the model's own");
  cmd->add_option("--stats-json", args->stats_json, "Also write the stats as JSON to this path");
  cmd->add_option("--grammar", args->grammar, "A GBNF grammar (llama.cpp's format) the output must follow");
  cmd->add_option("--grammar-file", args->grammar_file, "A file holding a GBNF grammar the output must follow");
  cmd->add_option("--json-schema", args->json_schema, "A JSON schema (inline, or @FILE) the output must follow");
  cmd->add_option("--lora", args->loras,
                  "LoRA adapter PATH[:SCALE] applied unmerged (a PEFT folder or a llama.cpp LoRA .gguf; SCALE multiplies "
                  "alpha/r, default 1); repeatable: the adapters add up");
  add_spec_options(*cmd, args->spec);
  return {cmd, [args] { return run(*args); }};
}

}  // namespace peregrine::cli
