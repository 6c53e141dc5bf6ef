// The OpenAI-compatible HTTP front end of the serving engine (cpp-httplib, one thread per
// connection from a fixed pool).
//
// Routes: POST /v1/completions, POST /v1/chat/completions (JSON, or Server-Sent Events with
// "stream": true), GET /v1/models, GET /health, GET /metrics (Prometheus text). Every error is
// an OpenAI error object (api_error.h): 400 bad request fields, 401 missing / wrong bearer
// token (all routes but /health when an API key is set), 404 unknown route or model, 413 body
// too large, 429 engine queue full, 503 shutting down. A streaming client that disconnects has
// its request cancelled (its KV blocks return to the pool).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/engine/engine.h"
#include "peregrine/tokenizer/chat_template.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                           // 0: any free port (bind() returns it)
  std::string api_key;                       // "": no authentication
  std::string model_id;                      // the id /v1/models lists and requests may name
  std::size_t max_body_bytes = 8u << 20;     // larger bodies get 413
  std::int32_t http_threads = 0;             // connection threads; 0: engine running + waiting + 4
  double drain_timeout_s = 30;               // shutdown(): then requests in flight are failed
  SpecParams spec;                           // speculation of requests that do not choose
  float temperature = 1.0f;                  // --temp: of requests that do not choose
  std::optional<std::uint64_t> seed;         // --seed: of requests that do not choose (none: a random one each)
  std::optional<std::int32_t> max_tokens;    // --n-predict: of requests that do not choose
  bool parse_reasoning = true;               // --reasoning-format auto (false: none): <think> → reasoning_content
  Pooling pooling = Pooling::kLast;          // --pooling: how /v1/embeddings pools the final hidden states
  /// LoRA adapter ids: a request whose "model" is lora_names[k] runs with the engine's LoRA
  /// adapter k (EngineOptions::lora), one naming model_id (or none) the base; /v1/models lists them all.
  std::vector<std::string> lora_names;
};

class HttpServer {
 public:
  /// A server over a started `engine` (the engine, tokenizer must outlive the server).
  HttpServer(Engine& engine, const Tokenizer& tokenizer, ChatTemplate chat_template, ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Binds the listening socket on options.host:options.port; returns the port (the one the
  /// OS picked for port 0). Errors: kIoError (address in use, bad host).
  Expected<int> bind();
  /// Serves on the bound socket until shutdown(); blocks. Errors: kIoError.
  Status serve();
  /// Graceful stop, callable from any thread: API requests arriving from now on get 503; the
  /// engine finishes the requests in flight (Engine::shutdown with drain, failing those still
  /// running after options.drain_timeout_s: their streams end in an error event); their
  /// responses are written out; then serve() returns. Blocks until then.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace peregrine
