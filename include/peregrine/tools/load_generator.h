// A load generator for OpenAI-compatible servers (what `peregrine loadgen` runs): C client
// threads send N /v1/completions requests (greedy, fixed max_tokens, ignore_eos so every
// request produces the same length), timing each one: time to first token and inter-token
// latency from the streamed chunks' arrival times, end-to-end latency, output tokens from the
// usage the server reports.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "peregrine/core/status.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {

struct LoadOptions {
  std::string url = "http://127.0.0.1:8080";  // scheme://host:port of the server
  std::int32_t concurrency = 1;                // client threads, each with one connection
  std::int32_t requests = 1;                   // total requests
  std::int32_t max_tokens = 128;
  bool stream = false;                         // SSE: needed for TTFT / ITL
  std::string api_key;                         // sent as a bearer token when set
  /// The "model" of request i is models[i % models.size()] (a server's base or adapter names,
  /// e.g. `serve --lora NAME=PATH`'s); empty: no "model" field, the server's single model.
  std::vector<std::string> models;
};

/// p50 / p90 / p99 of a sample (linear interpolation between order statistics), milliseconds.
struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0;
};

/// The q-quantile (0 <= q <= 1) of `samples` by linear interpolation between order statistics
/// (numpy's default); 0 for an empty sample.
double quantile(std::vector<double> samples, double q);

struct LoadReport {
  std::int32_t requests = 0;
  std::int32_t concurrency = 0;
  std::int32_t succeeded = 0;
  /// Failed requests by kind: "http_<status>", "connection_<httplib error>", "stream_error"
  /// (an error event inside a stream), "bad_response" (a body that is not the expected JSON).
  std::map<std::string, std::int32_t> errors;
  double wall_s = 0;
  double req_per_s = 0;   // succeeded requests per second of wall time
  double output_tps = 0;  // completion tokens per second of wall time
  std::int64_t prompt_tokens = 0;  // summed usage of the succeeded requests
  std::int64_t output_tokens = 0;
  /// Streaming only: chunks with text of every request, the failed streams' included (a server
  /// that ends streams with an error partway did that work too), and per second of wall time.
  /// One chunk per token for Peregrine and llama-server, except where a token's bytes wait for
  /// the rest of a UTF-8 character.
  std::int64_t streamed_chunks = 0;
  double streamed_cps = 0;
  Percentiles ttft_ms;  // streaming only: submission → first chunk with text
  Percentiles itl_ms;   // streaming only: gaps between chunks with text
  Percentiles e2e_ms;

  /// Stable keys: requests, concurrency, succeeded, errors {kind: count}, wall_s, req_per_s,
  /// output_tps, prompt_tokens, output_tokens, streamed_chunks, streamed_cps,
  /// ttft_ms / itl_ms / e2e_ms {p50, p90, p99}.
  nlohmann::json to_json() const;
};

/// Runs the load: request i sends prompts[i % prompts.size()] as /v1/completions with
/// temperature 0, the options' max_tokens and ignore_eos (with stream_options.include_usage
/// when streaming), and model models[i % models.size()] when models are given. Errors: kInvalidArgument (a URL other than http(s)://HOST[:PORT], concurrency or
/// requests < 1, no prompts, an empty model name). Failed requests are counted in the report, not errors.
Expected<LoadReport> run_load(const LoadOptions& options, std::span<const std::string> prompts);

/// `n` prompts of about `prompt_len` tokens (as `tokenizer` counts them, BOS included) cut
/// from the words of `text`: each starts with the same words worth `shared_prefix` tokens (the
/// text's beginning), followed by a run of words from a different place in the text (offsets
/// drawn without repetition by `seed`, wrapping around the end). Errors: kInvalidArgument
/// (text without words, prompt_len < 1, shared_prefix outside [0, prompt_len]).
Expected<std::vector<std::string>> build_prompts(std::string_view text, const Tokenizer& tokenizer, std::int32_t n,
                                                 std::int32_t prompt_len, std::int32_t shared_prefix,
                                                 std::uint64_t seed);

}  // namespace peregrine
