// peregrine chat: an interactive conversation with the model through its own chat template.
// Each user line is a turn: the whole conversation is rendered and submitted to one engine whose
// prefix cache keeps the earlier turns' K/V (blocks of 16 positions), so a turn prefills only
// what is new since the last full block; the reply streams to stdout and ends at the template's
// end-of-turn token. Reads stdin (a terminal or a pipe); /reset starts over, /exit (or end of
// input) quits; Ctrl-C ends the reply being generated, not the program.
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "common.h"
#include "peregrine/engine/engine.h"
#include "peregrine/kv/kv_cache.h"
#include "peregrine/tokenizer/chat_prompt.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_sigint(int) { g_interrupted = 1; }

struct ChatArgs {
  ModelOptions model;
  std::string system;
  std::string chat_template;
  std::int32_t n_predict = 1024;  // per reply
  std::int64_t ctx = 0;           // 0: min(4096, the model's)
  std::string kv_type = "f32";
  std::int32_t threads = 2;
  SamplingParams sampling;
};

/// What one reply cost: prompt tokens, how many came from the KV cache, generated tokens.
struct TurnStats {
  std::int64_t prompt_tokens = 0, cached_tokens = 0, generated = 0;
  double ttft_ms = 0, e2e_ms = 0;
  FinishReason reason = FinishReason::kStop;
  Status error;
};

class ChatSession {
 public:
  ChatSession(const Tokenizer& tok, ChatTemplate chat_template, Engine& engine, const ChatArgs& args, std::int64_t ctx)
      : tok_(tok), template_(std::move(chat_template)), engine_(engine), args_(args), ctx_(ctx),
        stops_(end_of_turn_tokens(tok)) {
    reset();
  }

  void reset() {
    messages_.clear();
    if (!args_.system.empty()) messages_.push_back({"system", args_.system});
  }

  /// One turn: `line` as the user's message, the reply streamed to stdout. Returns false when
  /// the turn could not run (the message says why; the conversation is left as it was).
  bool turn(const std::string& line) {
    messages_.push_back({"user", line});
    auto ids = chat_prompt_tokens(template_, messages_, tok_);
    if (!ids || static_cast<std::int64_t>(ids->size()) + 1 > ctx_) {
      messages_.pop_back();
      if (!ids) {
        report(ids.status());
      } else {
        std::fprintf(stderr, "[context full: the conversation would be %zu tokens, the context holds %lld: /reset to start over]\n",
                     ids->size(), static_cast<long long>(ctx_));
      }
      return false;
    }
    std::string reply;
    const TurnStats s = generate_reply(*ids, reply);
    std::fputs("\n", stdout);
    std::fflush(stdout);
    if (s.reason == FinishReason::kError) {
      messages_.pop_back();
      report(s.error);
      return false;
    }
    messages_.push_back({"assistant", reply});
    print_stats(s);
    return true;
  }

 private:
  TurnStats generate_reply(const std::vector<std::int32_t>& ids, std::string& reply) {
    RequestOptions r;
    r.prompt = ids;
    r.max_tokens = static_cast<std::int32_t>(std::min<std::int64_t>(args_.n_predict, ctx_ - static_cast<std::int64_t>(ids.size())));
    r.sampling = args_.sampling;
    r.eos_id = tok_.eos_id();
    TurnStats s;
    std::int32_t prev = ids.back();
    g_interrupted = 0;
    RequestCallbacks cb{[&](const TokenEvent& e) {
                          if (g_interrupted || std::ranges::find(stops_, e.token) != stops_.end()) return false;
                          const std::string piece = tok_.decode_token(prev, e.token);
                          prev = e.token;
                          reply += piece;
                          std::fwrite(piece.data(), 1, piece.size(), stdout);
                          std::fflush(stdout);
                          return true;
                        },
                        [&](const RequestResult& res) {
                          s.prompt_tokens = res.prompt_tokens;
                          s.cached_tokens = res.cached_prompt_tokens;
                          s.generated = res.completion_tokens;
                          s.ttft_ms = res.ttft_ms;
                          s.e2e_ms = res.e2e_ms;
                          s.reason = res.reason;
                          s.error = res.error;
                        }};
    if (auto id = engine_.submit(std::move(r), std::move(cb)); !id) {
      s.reason = FinishReason::kError;
      s.error = id.status();
      return s;
    }
    while (engine_.step()) {}
    return s;
  }

  void print_stats(const TurnStats& s) const {
    const double decode_s = (s.e2e_ms - s.ttft_ms) / 1000.0;
    std::fprintf(stderr, "[prompt %lld tokens: %lld from the KV cache, %lld prefilled; reply %lld tokens, %.1f tok/s%s]\n",
                 static_cast<long long>(s.prompt_tokens), static_cast<long long>(s.cached_tokens),
                 static_cast<long long>(s.prompt_tokens - s.cached_tokens), static_cast<long long>(s.generated),
                 s.generated > 1 && decode_s > 0 ? static_cast<double>(s.generated - 1) / decode_s : 0.0,
                 g_interrupted                                                               ? "; interrupted"
                 : s.reason == FinishReason::kLength && s.generated < args_.n_predict ? "; context full: /reset to start over"
                                                                                      : "");
  }

  const Tokenizer& tok_;
  ChatTemplate template_;
  Engine& engine_;
  const ChatArgs& args_;
  std::int64_t ctx_;
  std::vector<std::int32_t> stops_;
  std::vector<ChatMessage> messages_;
};

Status validate(const ChatArgs& a) {
  PEREGRINE_RETURN_IF_ERROR(validate_threads(a.threads));
  if (a.n_predict < 1) return invalid_argument("-n must be >= 1 (got " + std::to_string(a.n_predict) + ")");
  if (a.ctx < 0) return invalid_argument("--ctx must be >= 0");
  return a.sampling.validate();
}

/// The engine of a chat: one sequence of ctx positions, the prefix cache on (it keeps the
/// earlier turns), prompts prefilled in one step.
Expected<std::unique_ptr<Engine>> chat_engine(const LlamaModel& model, std::int64_t ctx, DType kv_type, ThreadPool& pool) {
  EngineOptions e;
  e.kv = {static_cast<std::int32_t>(blocks_for_tokens(ctx + 1, kDefaultKvBlockSize)), kDefaultKvBlockSize, kv_type};
  e.max_batch_tokens = ctx;
  e.max_running = 1;
  e.max_waiting = 1;
  e.ctx_len = ctx;
  e.prefix_caching = true;
  return Engine::create(model, e, pool);
}

int run(const ChatArgs& args) {
  if (Status st = validate(args); !st) return report(st);
  auto kv_type = parse_kv_type(args.kv_type);
  if (!kv_type) return report(kv_type.status());
  ThreadPool pool(args.threads);
  auto loaded = load_chat_model(args.model, args.chat_template, pool);
  if (!loaded) return report(loaded.status());
  const LlamaModel& model = *loaded->model;
  const std::int64_t ctx = args.ctx > 0 ? args.ctx : std::min<std::int64_t>(4096, model.config().max_seq_len);
  if (ctx > model.config().max_seq_len) {
    return report(invalid_argument("--ctx " + std::to_string(ctx) + " is longer than the model's context of " +
                                   std::to_string(model.config().max_seq_len)));
  }
  auto engine = chat_engine(model, ctx, *kv_type, pool);
  if (!engine) return report(engine.status());
  ChatSession session(*loaded->tokenizer, std::move(loaded->chat_template), **engine, args, ctx);

  struct sigaction sa {};
  sa.sa_handler = on_sigint;  // no SA_RESTART: Ctrl-C at the prompt ends the read
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  const bool terminal = isatty(STDIN_FILENO) != 0;
  if (terminal) std::fputs("peregrine chat: /reset starts over, /exit or Ctrl-D quits, Ctrl-C stops a reply\n", stderr);
  std::string line;
  while (true) {
    if (terminal) std::fputs("> ", stderr);
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit") break;
    if (line == "/reset") {
      session.reset();
      std::fputs("[conversation reset]\n", stderr);
      continue;
    }
    if (line.empty()) continue;
    session.turn(line);
  }
  return 0;
}

}  // namespace

Verb add_chat(CLI::App& app) {
  auto args = std::make_shared<ChatArgs>();
  CLI::App* cmd = app.add_subcommand("chat", "Chat with a model through its chat template (stdin: a terminal or a pipe)");
  add_model_options(*cmd, args->model);
  add_mmap_option(*cmd, args->model);
  add_dtype_option(*cmd, args->model);
  cmd->add_option("--system", args->system, "A system message opening the conversation");
  cmd->add_option("--chat-template", args->chat_template,
                  "A Jinja template file or a built-in name (chatml, llama-2, llama-3) instead of the model's own");
  cmd->add_option("-n,--n-predict", args->n_predict, "At most this many tokens per reply")->capture_default_str();
  cmd->add_option("-c,--ctx", args->ctx, "Context length in tokens for the whole conversation (0 = min(4096, the model's))")
      ->capture_default_str();
  cmd->add_option("--kv-type", args->kv_type, "KV cache element type: f32, f16, q8_0, i8, f8_e4m3 or f8_e5m2")->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "Threads")->capture_default_str();
  add_sampling_options(*cmd, args->sampling);
  return {cmd, [args] { return run(*args); }};
}

}  // namespace peregrine::cli
