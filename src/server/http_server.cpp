#include "peregrine/server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <ctime>
#include <list>
#include <mutex>
#include <random>
#include <set>
#include <string_view>
#include <variant>

#include "peregrine/core/json_util.h"
#include "peregrine/server/anthropic_messages.h"
#include "peregrine/server/anthropic_stream.h"
#include "peregrine/server/responses_api.h"
#include "peregrine/server/responses_stream.h"
#include "peregrine/server/api_error.h"
#include "peregrine/server/completion_output.h"
#include "peregrine/server/embeddings.h"
#include "peregrine/server/openai_prompt.h"
#include "peregrine/server/openai_request.h"
#include "peregrine/server/prometheus.h"
#include "peregrine/server/tokenize_endpoints.h"

namespace peregrine {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

/// How long a streaming response waits for new tokens before checking the connection again.
constexpr auto kStreamPoll = 100ms;
/// How long shutdown() waits for finished responses to be written out.
constexpr auto kFlushTimeout = 5s;

/// One request's state, shared by the engine's loop thread (callbacks) and the HTTP thread.
struct Exchange {
  Exchange(const OpenAiRequest& request, ResponseMeta meta, const Tokenizer& tokenizer, std::int32_t prev,
           OutputOptions options)
      : output(request, std::move(meta), tokenizer, prev, options) {}
  std::mutex mu;
  std::condition_variable cv;
  CompletionOutput output;
  std::vector<std::uint64_t> ids;  // the engine requests of its choices
  std::int64_t prompt_tokens = 0;
  bool streaming = false;
  nlohmann::ordered_json responses_request;  // a Responses API request (echoed in its response)
};

/// The API a response is written in: the same request runs as a chat request whichever it is.
enum class Api { kOpenAi, kAnthropic, kResponses };

/// One embeddings request's inputs, each an engine request, finishing on the loop thread.
struct EmbeddingExchange {
  explicit EmbeddingExchange(std::size_t n) : results(n) {}
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::optional<RequestResult>> results;
  std::size_t n_finished = 0;
  std::vector<std::uint64_t> ids;
};

void send_json(httplib::Response& res, const Json& body, int status = 200) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e, Api api = Api::kOpenAi) {
  send_json(res, api == Api::kAnthropic ? anthropic_error_json(e) : e.to_json(), e.http_status);
}

void send_result(httplib::Response& res, const std::variant<Json, ApiError>& result) {
  if (const ApiError* e = std::get_if<ApiError>(&result)) return send_error(res, *e);
  send_json(res, std::get<Json>(result));
}

// A finished chat.completion body in the API of its exchange.
Json in_api(const Json& chat, Api api, const Exchange& ex) {
  if (api == Api::kAnthropic) return anthropic_message_json(chat);
  if (api == Api::kResponses) return responses_object(chat, ex.responses_request);
  return chat;
}

// A stream's converter of OpenAI chat SSE bytes into the API's events (none for OpenAI's own).
std::function<std::string(std::string_view)> stream_converter(Api api, const Exchange& ex) {
  const ResponseMeta& meta = ex.output.meta();
  if (api == Api::kAnthropic) {
    auto s = std::make_shared<AnthropicStream>(anthropic_message_id(meta.id), meta.model, ex.prompt_tokens);
    return [s](std::string_view bytes) { return s->push(bytes); };
  }
  if (api == Api::kResponses) {
    auto s = std::make_shared<ResponsesStream>(meta.id, meta.model, meta.created, ex.responses_request);
    return [s](std::string_view bytes) { return s->push(bytes); };
  }
  return nullptr;
}

// Browsers may call the API from any page (as vLLM's and llama-server's default CORS policy
// allows; an --api-key still guards every route but /health): a request with an Origin gets it
// back as the allowed origin.
void allow_cross_origin(const httplib::Request& req, httplib::Response& res) {
  if (!req.has_header("Origin")) return;
  res.set_header("Access-Control-Allow-Origin", req.get_header_value("Origin"));
  res.set_header("Access-Control-Allow-Credentials", "true");
}

// A body the converters read: checked strictly first (duplicate keys, depth, UTF-8; a 400 naming
// the problem), then parsed again keeping its key order.
std::variant<nlohmann::ordered_json, ApiError> ordered_body(const std::string& body) {
  if (auto checked = json_util::parse(body, "request body"); !checked) return api_error(invalid_argument(checked.status().message()));
  return nlohmann::ordered_json::parse(body);
}

Api api_of(const httplib::Request& req) { return req.path.starts_with("/v1/messages") ? Api::kAnthropic : Api::kOpenAi; }

/// Compares a secret in time independent of where the first difference is (the length is
/// not secret).
bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

/// httplib 0.11 listens with a backlog of 5: a burst of clients connecting at once (32
/// streams) overflows it, and the kernel drops their handshakes (retried after a second, or
/// failed). The bound socket is a protected member, so a subclass can listen again with the
/// system's maximum backlog (listen(2) on a listening socket updates its backlog).
class Listener : public httplib::Server {
 public:
  bool raise_backlog() { return ::listen(svr_sock_, SOMAXCONN) == 0; }
};

const char* prompt_param(ApiEndpoint e) { return e == ApiEndpoint::kCompletions ? "prompt" : "messages"; }

}  // namespace

struct HttpServer::Impl {
  Impl(Engine& e, const Tokenizer& t, ChatTemplate c, ServerOptions o)
      : engine(e), tokenizer(t), chat_template(std::move(c)), options(std::move(o)),
        context_len(e.options().ctx_len > 0 ? e.options().ctx_len : e.model().config().max_seq_len),
        tool_format(tool_call_format(chat_template.source())),
        created(static_cast<std::int64_t>(std::time(nullptr))), rng(std::random_device{}()) {}

  void setup();
  bool authorized(const httplib::Request& req) const;
  void handle_completion(const httplib::Request& req, httplib::Response& res, ApiEndpoint endpoint);
  void handle_messages(const httplib::Request& req, httplib::Response& res, AnthropicEndpoint endpoint);
  void handle_responses(const httplib::Request& req, httplib::Response& res);
  std::variant<std::shared_ptr<Exchange>, ApiError> start(std::string_view body, ApiEndpoint endpoint);
  std::variant<OpenAiRequest, ApiError> parse(std::string_view body, ApiEndpoint endpoint);
  std::optional<std::int32_t> adapter_of(const std::string& model) const;
  void handle_embeddings(const httplib::Request& req, httplib::Response& res);
  std::variant<Json, ApiError> embed(const std::vector<std::vector<std::int32_t>>& inputs, const EmbeddingsRequest& request);
  void respond(const std::shared_ptr<Exchange>& ex, httplib::Response& res, Api api);
  void stream(httplib::Response& res, const std::shared_ptr<Exchange>& ex, Api api);
  void await(const std::shared_ptr<Exchange>& ex, httplib::Response& res, Api api);
  Json models() const;
  std::uint64_t random_u64();
  Status submit_choices(const OpenAiRequest& request, RequestOptions ro, const std::shared_ptr<Exchange>& ex);
  void cancel(const Exchange& ex);
  void open_exchange(std::uint64_t id);
  void close_exchange(std::uint64_t id);

  // The vocabulary's byte trie for grammar-constrained requests, built on the first one.
  const std::shared_ptr<const TokenTrie>& vocabulary() {
    std::call_once(vocabulary_built, [this] { vocabulary_trie = TokenTrie::of(tokenizer); });
    return vocabulary_trie;
  }

  // The TokenGrammar of `g` over the vocabulary: the same one (and its position masks) for
  // every request of the same grammar among the last kGrammars (the parser hands out one
  // Grammar per distinct text: openai_request.h).
  TokenGrammar token_grammar(const std::shared_ptr<const Grammar>& g) {
    static constexpr std::size_t kGrammars = 16;
    const auto& trie = vocabulary();
    std::lock_guard lock(mu);
    const auto it = std::find_if(grammars.begin(), grammars.end(), [&](const TokenGrammar& t) { return t.grammar == g; });
    if (it != grammars.end()) {
      grammars.splice(grammars.begin(), grammars, it);
    } else {
      grammars.push_front(TokenGrammar::of(g, trie));
      if (grammars.size() > kGrammars) grammars.pop_back();
    }
    return grammars.front();
  }

  Engine& engine;
  const Tokenizer& tokenizer;
  std::once_flag vocabulary_built;
  std::shared_ptr<const TokenTrie> vocabulary_trie;
  ChatTemplate chat_template;
  ServerOptions options;
  std::int64_t context_len;
  ToolCallFormat tool_format;  // how the chat template's tool calls read
  std::int64_t created;
  Listener http;
  std::atomic<bool> draining{false};

  std::mutex mu;  // guards rng, active, grammars, and signals active_cv
  std::list<TokenGrammar> grammars;  // most recently used first
  std::mt19937_64 rng;
  std::set<std::uint64_t> active;  // engine ids of requests whose response is not written yet
  std::condition_variable active_cv;
};

void HttpServer::Impl::setup() {
  const std::size_t threads = options.http_threads > 0
                                  ? static_cast<std::size_t>(options.http_threads)
                                  : static_cast<std::size_t>(engine.options().max_running + engine.options().max_waiting + 4);
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(options.max_body_bytes);
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    allow_cross_origin(req, res);
    if (req.method == "OPTIONS") {  // a browser's CORS preflight: answered without the key it asks to send
      res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "*");
      res.status = 200;
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.path == "/health" || authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, unauthorized_error(), api_of(req));
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.body.empty()) send_error(res, http_error(res.status), api_of(req));
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, api_error(Status(ErrorCode::kInternal, "internal server error")));
  });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining) return send_json(res, {{"status", "shutting_down"}}, 503);
    send_json(res, {{"status", "ok"}});
  });
  // /models, /chat/completions and /responses answer without the /v1 prefix too, as llama-server's
  // do (its /completions and /embeddings without /v1 are its own native API).
  http.Get("/(v1/)?models", [this](const httplib::Request&, httplib::Response& res) { send_json(res, models()); });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(prometheus_text(engine.metrics()), kPrometheusContentType);
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req, res, ApiEndpoint::kCompletions);
  });
  http.Post("/(v1/)?chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req, res, ApiEndpoint::kChatCompletions);
  });
  http.Post("/v1/messages", [this](const httplib::Request& req, httplib::Response& res) {
    handle_messages(req, res, AnthropicEndpoint::kMessages);
  });
  http.Post("/v1/messages/count_tokens", [this](const httplib::Request& req, httplib::Response& res) {
    handle_messages(req, res, AnthropicEndpoint::kCountTokens);
  });
  http.Post("/(v1/)?responses", [this](const httplib::Request& req, httplib::Response& res) { handle_responses(req, res); });
  http.Post("/v1/embeddings", [this](const httplib::Request& req, httplib::Response& res) { handle_embeddings(req, res); });
  http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    send_result(res, tokenize_response(req.body, tokenizer));
  });
  http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    send_result(res, detokenize_response(req.body, tokenizer));
  });
}

// OpenAI's 'Authorization: Bearer KEY', or Anthropic's 'x-api-key: KEY'.
bool HttpServer::Impl::authorized(const httplib::Request& req) const {
  if (options.api_key.empty()) return true;
  const std::string header = req.get_header_value("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (header.starts_with(kBearer) && same_secret(std::string_view(header).substr(kBearer.size()), options.api_key)) return true;
  return req.has_header("x-api-key") && same_secret(req.get_header_value("x-api-key"), options.api_key);
}

// The LoRA adapter a request's "model" names: -1 the base model (its id, none, or, when no
// adapters are loaded, any name: clients send their own defaults, as llama-server accepts);
// nullopt an unknown name while adapters are loaded (a typo must not fall back silently).
std::optional<std::int32_t> HttpServer::Impl::adapter_of(const std::string& model) const {
  if (model.empty() || model == options.model_id || options.lora_names.empty()) return -1;
  const auto it = std::find(options.lora_names.begin(), options.lora_names.end(), model);
  if (it == options.lora_names.end()) return std::nullopt;
  return static_cast<std::int32_t>(it - options.lora_names.begin());
}

Json HttpServer::Impl::models() const {
  Json data = Json::array({{{"id", options.model_id}, {"object", "model"}, {"created", created}, {"owned_by", "peregrine"}}});
  for (const std::string& name : options.lora_names) {  // vLLM lists LoRA modules with their base as parent
    data.push_back({{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "peregrine"}, {"parent", options.model_id}});
  }
  return {{"object", "list"}, {"data", data}};
}

std::uint64_t HttpServer::Impl::random_u64() {
  std::lock_guard lock(mu);
  return rng();
}

void HttpServer::Impl::open_exchange(std::uint64_t id) {
  std::lock_guard lock(mu);
  active.insert(id);
}

void HttpServer::Impl::close_exchange(std::uint64_t id) {
  std::lock_guard lock(mu);
  active.erase(id);
  active_cv.notify_all();
}

void HttpServer::Impl::handle_completion(const httplib::Request& req, httplib::Response& res, ApiEndpoint endpoint) {
  auto started = start(req.body, endpoint);
  if (const ApiError* e = std::get_if<ApiError>(&started)) return send_error(res, *e);
  respond(std::get<std::shared_ptr<Exchange>>(started), res, Api::kOpenAi);
}

// Anthropic's Messages API: the request rewritten as an OpenAI chat request and run as one
// (server/anthropic_messages.h); count_tokens renders and tokenizes its prompt only.
void HttpServer::Impl::handle_messages(const httplib::Request& req, httplib::Response& res, AnthropicEndpoint endpoint) {
  auto body = ordered_body(req.body);
  if (const ApiError* e = std::get_if<ApiError>(&body)) return send_error(res, *e, Api::kAnthropic);
  auto converted = anthropic_to_openai(std::get<nlohmann::ordered_json>(body), endpoint);
  if (const ApiError* e = std::get_if<ApiError>(&converted)) return send_error(res, *e, Api::kAnthropic);
  const std::string chat_body = std::get<nlohmann::ordered_json>(converted).dump();
  if (endpoint == AnthropicEndpoint::kCountTokens) {
    auto parsed = parse(chat_body, ApiEndpoint::kChatCompletions);
    if (const ApiError* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e, Api::kAnthropic);
    auto prompt = prompt_tokens(std::get<OpenAiRequest>(parsed), tokenizer, chat_template, tool_format);
    if (!prompt) return send_error(res, api_error(prompt.status(), "messages"), Api::kAnthropic);
    return send_json(res, {{"input_tokens", prompt->size()}});
  }
  auto started = start(chat_body, ApiEndpoint::kChatCompletions);
  if (const ApiError* e = std::get_if<ApiError>(&started)) return send_error(res, *e, Api::kAnthropic);
  respond(std::get<std::shared_ptr<Exchange>>(started), res, Api::kAnthropic);
}

// OpenAI's Responses API: the request rewritten as a chat request and run as one
// (server/responses_api.h).
void HttpServer::Impl::handle_responses(const httplib::Request& req, httplib::Response& res) {
  auto body = ordered_body(req.body);
  if (const ApiError* e = std::get_if<ApiError>(&body)) return send_error(res, *e);
  auto request = std::move(std::get<nlohmann::ordered_json>(body));
  auto converted = responses_to_chat(request);
  if (const ApiError* e = std::get_if<ApiError>(&converted)) return send_error(res, *e);
  auto started = start(std::get<nlohmann::ordered_json>(converted).dump(), ApiEndpoint::kChatCompletions);
  if (const ApiError* e = std::get_if<ApiError>(&started)) return send_error(res, *e);
  const auto& ex = std::get<std::shared_ptr<Exchange>>(started);
  ex->responses_request = std::move(request);
  respond(ex, res, Api::kResponses);
}

std::variant<OpenAiRequest, ApiError> HttpServer::Impl::parse(std::string_view body, ApiEndpoint endpoint) {
  RequestLimits limits;
  limits.context_len = context_len;
  limits.seed = options.seed.value_or(random_u64());
  limits.temperature = options.temperature;
  limits.max_tokens = options.max_tokens;
  limits.spec = options.spec;
  limits.vocab_size = engine.model().config().vocab_size;
  limits.tool_format = tool_format;
  return parse_openai_request(body, endpoint, limits);
}

// Parses, checks and submits one request; its exchange is open (close_exchange when written).
std::variant<std::shared_ptr<Exchange>, ApiError> HttpServer::Impl::start(std::string_view body, ApiEndpoint endpoint) {
  if (draining) return api_error(unavailable("the server is shutting down"));
  auto parsed = parse(body, endpoint);
  if (const ApiError* e = std::get_if<ApiError>(&parsed)) return *e;
  const OpenAiRequest& request = std::get<OpenAiRequest>(parsed);
  if (Status st = engine.check_spec(request.spec); !st) return api_error(st, "speculative");
  const std::optional<std::int32_t> lora_adapter = adapter_of(request.model);
  if (!lora_adapter) return model_not_found_error(request.model);
  auto prompt = prompt_tokens(request, tokenizer, chat_template, tool_format);
  if (!prompt) return api_error(prompt.status(), prompt_param(endpoint));

  char id[40];
  std::snprintf(id, sizeof id, "%s-%016llx", endpoint == ApiEndpoint::kCompletions ? "cmpl" : "chatcmpl",
                static_cast<unsigned long long>(random_u64()));
  ResponseMeta meta{endpoint, id, static_cast<std::int64_t>(std::time(nullptr)),
                    *lora_adapter >= 0 ? request.model : options.model_id};
  OutputOptions output_options{random_u64(), ReasoningStart::kOff, tool_format};
  if (options.parse_reasoning && endpoint == ApiEndpoint::kChatCompletions) {
    const std::size_t tail = std::min<std::size_t>(prompt->size(), 16);  // "<think>\n": one token, or up to 8
    output_options.reasoning = reasoning_start(tokenizer.decode(std::span(*prompt).last(tail)));
  }
  auto ex = std::make_shared<Exchange>(request, std::move(meta), tokenizer, prompt->back(), output_options);
  ex->prompt_tokens = static_cast<std::int64_t>(prompt->size());
  ex->streaming = request.stream;

  RequestOptions ro;
  const auto room = static_cast<std::int32_t>(std::max<std::int64_t>(1, context_len - static_cast<std::int64_t>(prompt->size())));
  ro.prompt = std::move(*prompt);
  ro.max_tokens = request.max_tokens.value_or(room);
  ro.sampling = request.sampling;
  ro.top_logprobs = request.top_logprobs;
  ro.eos_id = tokenizer.eos_id();
  ro.ignore_eos = request.ignore_eos;
  ro.spec = request.spec;
  ro.lora_adapter = *lora_adapter;
  if (request.grammar) ro.grammar = token_grammar(request.grammar);
  if (Status st = submit_choices(request, std::move(ro), ex); !st) {
    // The parser checked every other field: what the engine still rejects is the prompt
    // (too long for the context or the pool, token ids outside the vocabulary).
    const ErrorCode code = st.code();
    const bool prompt_fault = code == ErrorCode::kOutOfRange || code == ErrorCode::kInvalidArgument;
    return api_error(st, prompt_fault ? prompt_param(endpoint) : "");
  }
  open_exchange(ex->ids.front());
  return ex;
}

void HttpServer::Impl::respond(const std::shared_ptr<Exchange>& ex, httplib::Response& res, Api api) {
  if (ex->streaming) return stream(res, ex, api);
  await(ex, res, api);
}

// Submits the request's n choices at once (Engine::submit_choices: one prefill, choice i
// sampling with seed + i).
Status HttpServer::Impl::submit_choices(const OpenAiRequest& request, RequestOptions ro, const std::shared_ptr<Exchange>& ex) {
  std::vector<RequestCallbacks> choices(static_cast<std::size_t>(request.n));
  for (std::size_t choice = 0; choice < choices.size(); ++choice) {
    choices[choice].on_token = [ex, choice](const TokenEvent& event) {
      std::lock_guard lock(ex->mu);
      const bool go_on = ex->output.add_token(event, choice);
      ex->cv.notify_all();
      return go_on;
    };
    choices[choice].on_finish = [ex, choice](const RequestResult& result) {
      std::lock_guard lock(ex->mu);
      ex->output.finish(result, choice);
      ex->cv.notify_all();
    };
  }
  PEREGRINE_ASSIGN_OR_RETURN(ex->ids, engine.submit_choices(std::move(ro), std::move(choices)));
  return Status::ok();
}

void HttpServer::Impl::cancel(const Exchange& ex) {
  for (std::uint64_t id : ex.ids) engine.cancel(id);
}

void HttpServer::Impl::handle_embeddings(const httplib::Request& req, httplib::Response& res) {
  if (draining) return send_error(res, api_error(unavailable("the server is shutting down")));
  const ModelConfig& config = engine.model().config();
  auto parsed = parse_embeddings_request(req.body, config.dim, config.vocab_size);
  if (const ApiError* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
  const EmbeddingsRequest& request = std::get<EmbeddingsRequest>(parsed);
  if (adapter_of(request.model) != -1) return send_error(res, model_not_found_error(request.model));
  std::vector<std::vector<std::int32_t>> inputs = request.token_inputs;
  for (const std::string& text : request.texts) inputs.push_back(tokenizer.encode(text, tokenizer.add_bos_default()));
  send_result(res, embed(inputs, request));
}

// Runs every input as an embedding request (options.pooling) and waits for all; the first
// failure cancels the rest and is the answer.
std::variant<Json, ApiError> HttpServer::Impl::embed(const std::vector<std::vector<std::int32_t>>& inputs,
                                                     const EmbeddingsRequest& request) {
  auto ex = std::make_shared<EmbeddingExchange>(inputs.size());
  std::int64_t prompt_tokens = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    RequestOptions ro;
    ro.prompt = inputs[i];
    ro.max_tokens = 1;
    ro.pooling = options.pooling;
    prompt_tokens += static_cast<std::int64_t>(inputs[i].size());
    RequestCallbacks callbacks;
    callbacks.on_finish = [ex, i](const RequestResult& result) {
      std::lock_guard lock(ex->mu);
      ex->results[i] = result;
      ++ex->n_finished;
      ex->cv.notify_all();
    };
    auto submitted = engine.submit(std::move(ro), std::move(callbacks));
    if (!submitted) {
      for (std::uint64_t id : ex->ids) engine.cancel(id);
      const ErrorCode code = submitted.status().code();
      const bool input_fault = code == ErrorCode::kOutOfRange || code == ErrorCode::kInvalidArgument;
      return api_error(submitted.status(), input_fault ? "input" : "");
    }
    ex->ids.push_back(*submitted);
  }
  std::vector<std::vector<float>> vectors;
  {
    std::unique_lock lock(ex->mu);
    const auto failed = [&] {
      return std::any_of(ex->results.begin(), ex->results.end(),
                         [](const auto& r) { return r && r->reason != FinishReason::kStop; });
    };
    ex->cv.wait(lock, [&] { return ex->n_finished == ex->results.size() || failed(); });
    for (const auto& r : ex->results) {
      if (r && r->reason != FinishReason::kStop) {
        for (std::uint64_t id : ex->ids) engine.cancel(id);
        if (!r->error.is_ok()) return api_error(r->error);
        return api_error(r->reason == FinishReason::kCancelled ? cancelled("the request was cancelled")
                                                               : Status(ErrorCode::kInternal, "the KV cache could not hold the input"));
      }
      vectors.push_back(r->embedding);
    }
  }
  return embeddings_response_json(options.model_id, vectors, request.base64, prompt_tokens);
}

void HttpServer::Impl::await(const std::shared_ptr<Exchange>& ex, httplib::Response& res, Api api) {
  std::variant<Json, ApiError> body;
  {
    std::unique_lock lock(ex->mu);
    ex->cv.wait(lock, [&] { return ex->output.finished(); });
    body = ex->output.response();
  }
  cancel(*ex);  // the other choices of one that failed (a no-op for the finished)
  if (const ApiError* e = std::get_if<ApiError>(&body)) {
    send_error(res, *e, api);
  } else {
    send_json(res, in_api(std::get<Json>(body), api, *ex));
  }
  close_exchange(ex->ids.front());
}

void HttpServer::Impl::stream(httplib::Response& res, const std::shared_ptr<Exchange>& ex, Api api) {
  res.set_header("Cache-Control", "no-cache");
  const auto convert = stream_converter(api, *ex);
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, ex, convert](std::size_t, httplib::DataSink& sink) {
        std::string events;
        bool finished = false;
        {
          std::unique_lock lock(ex->mu);
          ex->cv.wait_for(lock, kStreamPoll, [&] { return ex->output.has_events() || ex->output.finished(); });
          events = ex->output.take_events();
          finished = ex->output.finished();
        }
        if (convert) events = convert(events);
        if (!sink.is_writable() || (!events.empty() && !sink.write(events.data(), events.size()))) {
          cancel(*ex);  // the client went away
          return false;
        }
        if (finished) {
          cancel(*ex);  // the other choices of one that failed (a no-op for the finished)
          sink.done();
        }
        return true;
      },
      [this, ex](bool success) {
        if (!success) cancel(*ex);
        close_exchange(ex->ids.front());
      });
}

HttpServer::HttpServer(Engine& engine, const Tokenizer& tokenizer, ChatTemplate chat_template, ServerOptions options)
    : impl_(std::make_unique<Impl>(engine, tokenizer, std::move(chat_template), std::move(options))) {
  impl_->setup();
}

HttpServer::~HttpServer() = default;

Expected<int> HttpServer::bind() {
  const auto& o = impl_->options;
  const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0 || !impl_->http.raise_backlog()) {
    return io_error("cannot listen on " + o.host + ":" + std::to_string(o.port) + " (address in use or invalid)");
  }
  return port;
}

Status HttpServer::serve() {
  if (!impl_->http.listen_after_bind() && !impl_->draining) return io_error("the HTTP server stopped unexpectedly");
  return Status::ok();
}

void HttpServer::shutdown() {
  Impl& s = *impl_;
  s.draining = true;
  s.engine.shutdown(/*drain=*/true, s.options.drain_timeout_s);
  {
    std::unique_lock lock(s.mu);
    s.active_cv.wait_for(lock, kFlushTimeout, [&s] { return s.active.empty(); });
  }
  s.http.stop();
}

}  // namespace peregrine
