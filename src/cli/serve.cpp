// peregrine serve: the OpenAI-compatible HTTP server over the serving engine.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <regex>
#include <string_view>
#include <memory>
#include <optional>
#include <thread>

#include "common.h"
#include "parallel_options.h"
#include "peregrine/dist/forward_mirror.h"
#include "peregrine/dist/mpi_prefill.h"
#include "peregrine/dist/mpi_world.h"
#include "peregrine/engine/engine.h"
#include "peregrine/server/http_server.h"
#include "peregrine/tokenizer/chat_template.h"
#include "lora_options.h"
#include "spec_options.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

struct ServeArgs {
  ModelOptions model;
  std::string reasoning_format = "auto";  // --reasoning-format
  std::string pooling = "last";           // --pooling
  std::string host = "127.0.0.1";
  int port = 8080;
  std::int32_t parallel = 16;
  std::string api_key;
  std::int32_t threads = 2;
  std::int64_t ctx = 0;
  std::string kv_memory;
  std::int64_t ctx_total = 0;
  std::string kv_type = "f32";
  std::int32_t block_size = 16;
  std::int64_t max_batch_tokens = 256;
  std::int64_t prefill_budget = 8;  // bench/serving_bench.sh: 8 clients, tinyllama Q4_0 (README)
  std::int64_t step_budget = 18;    // bench/serving_bench.sh: 8 clients, tinyllama F16 (README)
  std::int32_t max_queue = 64;
  bool no_prefix_cache = false;
  bool swa_full = false;
  std::string chat_template;
  std::string alias;
  double drain_timeout = 30;
  SpecOptions spec;  // the default speculation of requests; its drafter serves them
  std::vector<std::string> loras;  // --lora NAME=PATH[:SCALE]
  std::int32_t max_loras = 0;       // adapters resident at once (0: all)
  std::string role = "both";        // --role: both, or one instance of a disaggregated pair
  float temperature = 1.0f;         // --temp: requests' default
  std::optional<std::uint64_t> seed;        // --seed: requests' default
  std::optional<std::int32_t> n_predict;    // --n-predict: requests' default max_tokens
};

/// "123", "64K", "256M", "1G", "2T" (optionally followed by "B" or "iB": "256MiB"); binary
/// multiples.
Expected<std::int64_t> parse_bytes(const std::string& text) {
  static const std::regex kBytes(R"((\d{1,15})([KMGT]?)(i?B)?)");
  std::smatch m;
  if (!std::regex_match(text, m, kBytes)) {
    return invalid_argument("--kv-memory '" + text + "' is not a byte count (e.g. 268435456, 256M, 1G)");
  }
  const std::int64_t value = std::stoll(m[1].str());
  const int shift = m[2].length() == 0 ? 0 : 10 * (1 + static_cast<int>(std::string_view("KMGT").find(m[2].str()[0])));
  if (value > (std::numeric_limits<std::int64_t>::max() >> shift)) return invalid_argument("--kv-memory '" + text + "' is too large");
  return value << shift;
}

/// KV pool size in blocks: --ctx-total, --kv-memory, else parallel × ctx, at most `byte_cap`
/// bytes when that is > 0 (-d cuda: the GPU memory left after the weights).
Expected<std::int32_t> pool_blocks(const ServeArgs& a, const ModelConfig& config, DType kv_dtype, std::int64_t ctx,
                                   std::int64_t byte_cap) {
  std::int64_t blocks = 0;
  if (a.ctx_total > 0) {
    blocks = blocks_for_tokens(a.ctx_total, a.block_size);
  } else if (!a.kv_memory.empty()) {
    PEREGRINE_ASSIGN_OR_RETURN(const std::int64_t bytes, parse_bytes(a.kv_memory));
    blocks = bytes / kv_block_bytes(config.kv_shape(), a.block_size, kv_dtype);
    if (blocks < 1) return invalid_argument("--kv-memory " + a.kv_memory + " is smaller than one KV block");
  } else {
    blocks = a.parallel * blocks_for_tokens(ctx, a.block_size);
    if (byte_cap > 0) blocks = std::min(blocks, byte_cap / kv_block_bytes(config.kv_shape(), a.block_size, kv_dtype));
    if (blocks < 1) return resource_exhausted("the GPU has no memory left for a KV block after the weights");
  }
  if (blocks > std::numeric_limits<std::int32_t>::max()) return invalid_argument("the KV pool would have too many blocks");
  return static_cast<std::int32_t>(blocks);
}

Status validate(const ServeArgs& a) {
  PEREGRINE_RETURN_IF_ERROR(validate_threads(a.threads));
  if (a.port < 0 || a.port > 65535) return invalid_argument("--port must be in [0, 65535]");
  if (a.block_size < 1) return invalid_argument("--block-size must be >= 1");
  if (a.ctx < 0 || a.ctx_total < 0) return invalid_argument("--ctx and --ctx-total must be >= 0");
  if (a.drain_timeout < 0) return invalid_argument("--drain-timeout must be >= 0");
  return Status::ok();
}

/// The id clients name the model by: --alias, else the model file's (or folder's) stem.
std::string model_id(const ServeArgs& a) {
  if (!a.alias.empty()) return a.alias;
  std::filesystem::path p(a.model.model.empty() ? default_model_path() : a.model.model);
  if (p.filename().empty()) p = p.parent_path();
  return p.stem().string();
}

// SIGTERM / SIGINT write one byte here; a watcher thread does the shutdown.
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int) {
  const int saved = errno;
  const char byte = 1;
  [[maybe_unused]] const auto n = ::write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

Status install_signal_handlers() {
  if (::pipe(g_signal_pipe) != 0) return io_error("cannot create the signal pipe");
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not a dead server
  return Status::ok();
}

/// -d cuda: the bytes the KV pool may take on the GPU, 90% of the memory free after the weights
/// less 1 GiB for activations and cuBLAS workspaces (0: no cap, on the CPU).
Expected<std::int64_t> kv_byte_cap(const ServeArgs& a) {
  if (a.model.device != "cuda") return 0;
  PEREGRINE_ASSIGN_OR_RETURN(const std::int64_t free, cuda_free_memory_bytes());
  return std::max<std::int64_t>(free / 10 * 9 - (std::int64_t{1} << 30), 1);
}

// A rank > 0 of `serve --tp / --pp`: runs every forward rank 0's engine broadcasts, until it
// stops (SIGTERM / SIGINT, which mpirun passes to every rank, are rank 0's to act on).
int serve_as_worker(const LlamaModel& model, const EngineOptions& options, ThreadPool& pool, LoraPool* lora) {
  ::signal(SIGTERM, SIG_IGN);
  ::signal(SIGINT, SIG_IGN);
  auto cache = KvCache::create(model.config().kv_shape(), options.kv);
  if (!cache) return report(cache.status());
  if (Status st = run_forward_worker(model, *cache, pool, lora); !st) return report(st);
  return 0;
}

// The prefill rank of `serve --role`: computes the prompts the decode rank sends and ships their
// K/V back, until the decode rank stops (SIGTERM / SIGINT are the decode rank's to act on).
int serve_prefill(const LlamaModel& model, const EngineOptions& options, ThreadPool& pool, int decode_rank) {
  ::signal(SIGTERM, SIG_IGN);
  ::signal(SIGINT, SIG_IGN);
  KvCacheOptions kv = options.kv;  // one prompt at a time: the context's blocks
  kv.n_blocks = static_cast<std::int32_t>(blocks_for_tokens(options.ctx_len > 0 ? options.ctx_len : model.config().max_seq_len, kv.block_size));
  auto cache = KvCache::create(model.config().kv_shape(), kv);
  if (!cache) return report(cache.status());
  if (Status st = check_peer_kv_layout(*cache, decode_rank); !st) return report(st);
  PrefillInstance instance(model, std::move(*cache), pool, options.max_batch_tokens);
  if (Status st = run_prefill_worker(instance, decode_rank); !st) return report(st);
  return 0;
}

// The decode rank's check that the prefill rank's KV cache rows are its own (a one-block cache
// of its layout: the engine makes the real one).
Status check_prefill_layout(const LlamaModel& model, const EngineOptions& options, int prefill_rank) {
  KvCacheOptions kv = options.kv;
  kv.n_blocks = 1;
  PEREGRINE_ASSIGN_OR_RETURN(KvCache probe, KvCache::create(model.config().kv_shape(), kv));
  return check_peer_kv_layout(probe, prefill_rank);
}

Expected<EngineOptions> engine_options(const ServeArgs& a, const ModelConfig& config) {
  EngineOptions o;
  PEREGRINE_ASSIGN_OR_RETURN(o.kv.dtype, parse_kv_type(a.kv_type));
  o.kv.block_size = a.block_size;
  o.ctx_len = a.ctx;
  const std::int64_t ctx = a.ctx > 0 ? a.ctx : config.max_seq_len;
  PEREGRINE_ASSIGN_OR_RETURN(const std::int64_t cap, kv_byte_cap(a));
  PEREGRINE_ASSIGN_OR_RETURN(o.kv.n_blocks, pool_blocks(a, config, o.kv.dtype, ctx, cap));
  o.max_batch_tokens = a.max_batch_tokens;
  o.prefill_budget = a.prefill_budget;
  o.step_budget = a.step_budget;
  o.max_running = a.parallel;
  o.max_waiting = a.max_queue;
  o.prefix_caching = !a.no_prefix_cache;
  o.swa_full = a.swa_full;
  return o;
}

int run(const ServeArgs& args) {
  if (Status st = validate(args); !st) return report(st);
  const bool disaggregated = args.role != "both";
  if (disaggregated && (args.model.tp * args.model.pp > 1 || args.model.device == "cuda" || !args.loras.empty() ||
                        args.spec.method != "none")) {
    return report(unsupported("serve --role runs on the CPU without --tp / --pp, speculative decoding or LoRA adapters yet"));
  }
  int peer = -1;  // the other instance's MPI rank
  if (disaggregated) {
    auto other = start_disaggregated_run(args.role);
    if (!other) return report(other.status());
    peer = *other;
  }
  ThreadPool pool(args.threads);
  auto loaded = load_chat_model(args.model, args.chat_template, pool);
  if (!loaded) return report(loaded.status());
  std::unique_ptr<LlamaModel>& model = loaded->model;
  auto options = engine_options(args, model->config());
  if (!options) return report(options.status());
  auto spec = spec_params(args.spec);
  if (!spec) return report(spec.status());
  std::unique_ptr<LoraPool> lora;
  std::vector<std::string> lora_names;
  if (!args.loras.empty()) {
    std::vector<LoraSpec> specs;
    for (const std::string& text : args.loras) {
      auto spec_or = parse_lora_spec(text, true);
      if (!spec_or) return report(spec_or.status());
      if (spec_or->name == model_id(args) || std::find(lora_names.begin(), lora_names.end(), spec_or->name) != lora_names.end()) {
        return report(invalid_argument("--lora: the name '" + spec_or->name + "' is taken"));
      }
      lora_names.push_back(spec_or->name);
      specs.push_back(*spec_or);
    }
    auto pool_or = serve_lora_pool(specs, model->file(), args.max_loras, args.model);
    if (!pool_or) return report(pool_or.status());
    lora = std::move(*pool_or);
    options->lora = lora.get();
  }
  MpiForwardMirror mirror;  // across ranks: rank 0's engine schedules, the others mirror its forwards
  if (args.model.tp * args.model.pp > 1) {
    if (spec->method != SpecMethod::kNone) return report(unsupported("serve --tp / --pp runs no speculative decoding yet"));
    options->kv.n_blocks = static_cast<std::int32_t>(broadcast_from_first_rank(options->kv.n_blocks));
    options->kv.window_groups = false;  // every rank's block tables alike, whatever its stage's layers
    if ((*mpi_world())->rank() > 0) return serve_as_worker(*model, *options, pool, lora.get());
    options->mirror = &mirror;
  }
  MpiRemotePrefill remote(peer, model->config().n_layers);  // --role decode: the prefill rank computes the prompts' K/V
  if (disaggregated) {
    if (args.role == "prefill") return serve_prefill(*model, *options, pool, peer);
    if (Status st = check_prefill_layout(*model, *options, peer); !st) return report(st);
    options->remote_prefill = &remote;
  }
  if (args.model.device == "cuda" && (spec->method != SpecMethod::kNone || !args.loras.empty())) {
    return report(unsupported("serve -d cuda runs neither speculative decoding nor LoRA adapters yet"));
  }
  const std::int64_t ctx = args.ctx > 0 ? args.ctx : model->config().max_seq_len;
  auto drafter = make_drafter(args.spec, *model, args.model, ctx, args.parallel, pool);
  if (!drafter) return report(drafter.status());
  options->drafter = drafter->drafter.get();
  auto engine = Engine::create(*model, *options, pool);
  if (!engine) return report(engine.status());
  if (args.model.device == "cuda") {
    const std::int64_t bytes = options->kv.n_blocks * kv_block_bytes(model->config().kv_shape(), options->kv.block_size, options->kv.dtype);
    std::fprintf(stderr, "peregrine: KV pool of %d blocks of %d positions, %.2f GiB of GPU memory\n", options->kv.n_blocks,
                 options->kv.block_size, static_cast<double>(bytes) / (1 << 30));
  }
  (*engine)->start();

  ServerOptions so;
  so.host = args.host;
  so.port = args.port;
  so.api_key = args.api_key;
  so.model_id = model_id(args);
  so.parse_reasoning = args.reasoning_format == "auto";
  so.pooling = *parse_pooling(args.pooling);  // CLI11 checked the name
  so.drain_timeout_s = args.drain_timeout;
  so.spec = *spec;
  so.temperature = args.temperature;
  so.seed = args.seed;
  so.max_tokens = args.n_predict;
  so.lora_names = lora_names;
  HttpServer server(**engine, *loaded->tokenizer, std::move(loaded->chat_template), so);
  auto port = server.bind();
  if (!port) return report(port.status());
  if (Status st = install_signal_handlers(); !st) return report(st);
  std::thread watcher([&server] {
    char byte = 0;
    while (::read(g_signal_pipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    server.shutdown();
  });
  std::fprintf(stderr, "peregrine: listening on http://%s:%d (model %s)\n", so.host.c_str(), *port, so.model_id.c_str());
  std::fflush(stderr);
  const Status served = server.serve();
  on_stop_signal(0);  // wakes the watcher if serve() ended on its own
  watcher.join();
  if (!served) return report(served);
  std::fputs("peregrine: server stopped\n", stderr);
  return 0;
}

}  // namespace

Verb add_serve(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (continuous batching, paged KV cache)");
  add_model_options(*cmd, args->model);
  add_mmap_option(*cmd, args->model);
  add_device_option(*cmd, args->model);
  add_parallel_options(*cmd, args->model);
  add_dtype_option(*cmd, args->model);
  cmd->add_option("--host", args->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", args->port, "Port (0 = any free port, printed when listening)")->capture_default_str();
  cmd->add_option("--parallel", args->parallel, "Requests running at once")->capture_default_str();
  cmd->add_option("--max-queue", args->max_queue, "Queued requests beyond which the server answers 429")->capture_default_str();
  cmd->add_option("--api-key", args->api_key, "Require 'Authorization: Bearer KEY' (all routes but /health)");
  cmd->add_option("-t,--threads", args->threads, "Compute threads")->capture_default_str();
  cmd->add_option("--ctx", args->ctx, "Context per request in tokens (0 = the model's)")->capture_default_str();
  auto* mem = cmd->add_option("--kv-memory", args->kv_memory, "KV pool size in bytes (suffixes K, M, G: 512M)");
  auto* total = cmd->add_option("--ctx-total", args->ctx_total, "KV pool size in tokens over all requests");
  mem->excludes(total);
  cmd->add_option("--kv-type", args->kv_type, "KV cache dtype: f32, f16, q8_0, i8, f8_e4m3 or f8_e5m2")->capture_default_str();
  cmd->add_option("--block-size", args->block_size, "Tokens per KV block")->capture_default_str();
  cmd->add_option("--max-batch-tokens", args->max_batch_tokens, "Token budget of one engine step")->capture_default_str();
  cmd->add_option("--prefill-budget", args->prefill_budget,
                  "Prompt tokens a step that also decodes may carry (stall-free batching, Sarathi-Serve): lower keeps "
                  "inter-token latency near a decode step's, higher lowers time to first token; 0 = up to "
                  "--max-batch-tokens")
      ->capture_default_str();
  cmd->add_option("--step-budget", args->step_budget,
                  "With --prefill-budget: tokens a step that also decodes may hold in all, decodes included (Sarathi-Serve's "
                  "token budget); its prompt tokens are max(prefill budget, step budget - decodes), so with few decodes "
                  "waiting prompts go faster at about the same step time; 0 = the prefill budget alone")
      ->capture_default_str();
  cmd->add_flag("--no-prefix-cache", args->no_prefix_cache, "Disable prefix caching");
  cmd->add_flag("--swa-full", args->swa_full,
                "Keep the KV blocks that left a sliding window (by default sliding-window layers free them)");
  cmd->add_option("--chat-template", args->chat_template,
                  "Chat template: a Jinja file or a built-in name (chatml, llama-2, llama-3); default the model's");
  cmd->add_option("--alias", args->alias, "Model id clients use (default: the model file's name)");
  cmd->add_option("--temp", args->temperature, "Sampling temperature of requests that give none (the API's default: 1)")
      ->check(CLI::Range(0.0, 2.0))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Sampling seed of requests that give none (default: a random one per request)");
  cmd->add_option("-n,--n-predict", args->n_predict,
                  "max_tokens of requests that give none (default: the context left for chat, 16 for completions as OpenAI's API)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--reasoning-format", args->reasoning_format,
                  "auto: a chat reply's <think> block becomes reasoning_content; none: it stays in the content")
      ->check(CLI::IsMember({"auto", "none"}))
      ->capture_default_str();
  cmd->add_option("--pooling", args->pooling,
                  "How /v1/embeddings pools the final hidden states (after the final norm) of an input: last (the "
                  "last token's, as decoder embedding models such as Qwen3-Embedding and e5-mistral are trained), "
                  "mean, or cls (the first token's); the vector is scaled to unit L2 norm")
      ->check(CLI::IsMember({"last", "mean", "cls"}))
      ->capture_default_str();
  cmd->add_option("--lora", args->loras,
                  "LoRA adapter NAME=PATH[:SCALE] (a PEFT folder or a llama.cpp LoRA .gguf), applied unmerged to the "
                  "requests whose \"model\" is NAME; repeatable (one batch mixes adapters and the base)");
  cmd->add_option("--max-loras", args->max_loras,
                  "LoRA adapters in memory at once (0: all): the others load on demand when a request names one, "
                  "evicting the least recently used adapter no running request uses")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--drain-timeout", args->drain_timeout,
                  "Seconds SIGTERM lets requests in flight finish before cancelling them")->capture_default_str();
  cmd->add_option("--role", args->role,
                  "Disaggregated serving (DistServe / Splitwise): 'decode' serves HTTP and decodes, 'prefill' computes "
                  "the prompts' KV cache and ships it to the decode instance, layer by layer; run the pair as `mpirun -np 1 "
                  "peregrine serve --role decode ... : -np 1 peregrine serve --role prefill ...` (same model and --kv-type)")
      ->check(CLI::IsMember({"both", "prefill", "decode"}))
      ->capture_default_str();
  add_spec_options(*cmd, args->spec);
  return {cmd, [args] { return run(*args); }};
}

}  // namespace peregrine::cli
