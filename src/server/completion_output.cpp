#include "peregrine/server/completion_output.h"

#include <algorithm>
#include <utility>

namespace peregrine {

std::string_view openai_finish_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    default:
      return "";
  }
}

CompletionOutput::Choice::Choice(const OpenAiRequest& request, ResponseMeta m, const Tokenizer& tokenizer,
                                 std::int32_t prev_token, OutputOptions options)
    : meta(std::move(m)), stream(tokenizer, prev_token, request.stop), prev(prev_token) {
  if (!request.tools.is_null() && request.tool_choice != ToolChoice::kNone) {
    std::vector<std::string> names;
    for (const auto& t : request.tools) names.push_back(t["function"]["name"].get<std::string>());
    tools.emplace(options.call_seed + static_cast<std::uint64_t>(meta.choice), std::move(names), options.tool_format);
  }
  if (meta.endpoint == ApiEndpoint::kChatCompletions && options.reasoning != ReasoningStart::kOff) {
    reasoning_parser.emplace(options.reasoning);
  }
}

CompletionOutput::CompletionOutput(const OpenAiRequest& request, ResponseMeta meta, const Tokenizer& tokenizer,
                                   std::int32_t prev_token, OutputOptions options)
    : tokenizer_(tokenizer),
      streaming_(request.stream),
      include_usage_(request.include_usage),
      want_logprobs_(request.top_logprobs >= 0) {
  choices_.reserve(static_cast<std::size_t>(std::max(1, request.n)));
  for (std::int32_t i = 0; i < std::max(1, request.n); ++i) {
    meta.choice = i;
    Choice& c = choices_.emplace_back(request, meta, tokenizer, prev_token, options);
    if (streaming_ && meta.endpoint == ApiEndpoint::kChatCompletions) queue_chunk(c, "", "", nullptr);
  }
}

// Text the TextStream released: its reasoning part (when parsed) to c.reasoning (streaming: a
// reasoning chunk), the rest on to release_content.
void CompletionOutput::release(Choice& c, std::string text, const nlohmann::json& logprobs) {
  if (!c.reasoning_parser) return release_content(c, std::move(text), logprobs);
  ReasoningParser::Split split = c.reasoning_parser->push(text);
  c.reasoning += split.reasoning;
  if (streaming_ && !split.reasoning.empty()) events_ += sse_event(reasoning_chunk_json(c.meta, split.reasoning, include_usage_));
  release_content(c, std::move(split.content), logprobs);
}

// Content: through the tool-call parser when there is one, then into the response (streaming: a
// content chunk, and a tool-call chunk per parsed call).
void CompletionOutput::release_content(Choice& c, std::string text, const nlohmann::json& logprobs) {
  if (c.tools) text = c.tools->push(text);
  emit(c, text, logprobs);
}

// Content text, and the tool calls parsed so far, into the response.
void CompletionOutput::emit(Choice& c, const std::string& text, const nlohmann::json& logprobs) {
  std::vector<ToolCall> calls;
  if (c.tools) calls = c.tools->take_calls();
  c.text += text;
  if (streaming_ && (!text.empty() || !logprobs.is_null())) queue_chunk(c, text, "", logprobs);
  if (streaming_ && !calls.empty()) events_ += sse_event(tool_call_chunk_json(c.meta, calls, c.calls.size(), include_usage_));
  c.calls.insert(c.calls.end(), calls.begin(), calls.end());
}

TokenLogprob CompletionOutput::decode_logprobs(const Choice& c, const TokenEvent& event) const {
  TokenLogprob t{tokenizer_.decode_token(c.prev, event.token), event.logprob, {}};
  for (const auto& [id, lp] : event.top_logprobs) t.top.emplace_back(tokenizer_.decode_token(c.prev, id), lp);
  return t;
}

bool CompletionOutput::add_token(const TokenEvent& event, std::size_t choice) {
  Choice& c = choices_.at(choice);
  nlohmann::json logprobs = nullptr;
  if (want_logprobs_) {
    TokenLogprob record = decode_logprobs(c, event);
    logprobs = logprobs_json(c.meta.endpoint, {&record, 1}, c.logprob_offset);
    c.logprob_offset += record.token.size();
    if (!streaming_) c.logprobs.push_back(std::move(record));
  }
  c.prev = event.token;
  if (!done_) release(c, c.stream.push(event.token), logprobs);
  return !c.stream.stopped();
}

void CompletionOutput::finish(const RequestResult& result, std::size_t choice) {
  Choice& c = choices_.at(choice);
  if (c.result || done_) return;
  c.result = result;
  ++n_finished_;
  if (!c.failure()) {
    release(c, c.stream.flush(), nullptr);
    if (c.reasoning_parser) {
      ReasoningParser::Split split = c.reasoning_parser->flush();
      c.reasoning += split.reasoning;
      if (streaming_ && !split.reasoning.empty()) events_ += sse_event(reasoning_chunk_json(c.meta, split.reasoning, include_usage_));
      release_content(c, std::move(split.content), nullptr);
    }
    if (c.tools) emit(c, c.tools->flush(), nullptr);
  }
  if (!streaming_) return;
  if (auto error = c.failure()) {
    events_ += sse_event(error->to_json());
  } else {
    nlohmann::json last = chunk_json(c.meta, "", c.first_chunk, c.finish_reason(), nullptr, include_usage_);
    if (!c.stream.matched_stop().empty()) last["choices"][0]["stop_reason"] = c.stream.matched_stop();
    events_ += sse_event(last);
    c.first_chunk = false;
    if (!finished()) return;
    if (include_usage_) events_ += sse_event(usage_chunk_json(choices_.front().meta, usage()));
  }
  events_ += kSseDone;
  done_ = true;
}

std::string CompletionOutput::take_events() { return std::exchange(events_, {}); }

// The usage of every choice: the prompt once, the completions summed.
RequestResult CompletionOutput::usage() const {
  RequestResult u = *choices_.front().result;
  u.completion_tokens = 0;
  for (const Choice& c : choices_) u.completion_tokens += c.result->completion_tokens;
  return u;
}

std::variant<nlohmann::json, ApiError> CompletionOutput::response() const {
  if (auto error = failure()) return *error;
  nlohmann::json body;
  for (const Choice& c : choices_) {
    const nlohmann::json logprobs = want_logprobs_ ? logprobs_json(c.meta.endpoint, c.logprobs, 0) : nlohmann::json(nullptr);
    nlohmann::json one = response_json(c.meta, c.text, c.finish_reason(), logprobs, *c.result, c.calls, c.reasoning);
    if (!c.stream.matched_stop().empty()) one["choices"][0]["stop_reason"] = c.stream.matched_stop();
    if (body.is_null()) {
      body = std::move(one);
    } else {
      body["choices"].push_back(std::move(one["choices"][0]));
    }
  }
  body["usage"] = usage_json(usage());
  return body;
}

void CompletionOutput::queue_chunk(Choice& c, const std::string& text, std::string_view finish_reason,
                                   const nlohmann::json& logprobs) {
  events_ += sse_event(chunk_json(c.meta, text, c.first_chunk, finish_reason, logprobs, include_usage_));
  c.first_chunk = false;
}

std::string_view CompletionOutput::Choice::finish_reason() const {
  return !calls.empty() && result->reason == FinishReason::kStop ? "tool_calls" : openai_finish_reason(result->reason);
}

std::optional<ApiError> CompletionOutput::failure() const {
  for (const Choice& c : choices_) {
    if (auto error = c.failure()) return error;
  }
  return std::nullopt;
}

std::optional<ApiError> CompletionOutput::Choice::failure() const {
  if (!result) return std::nullopt;
  switch (result->reason) {
    case FinishReason::kCancelled:
      return api_error(cancelled("the request was cancelled"));
    case FinishReason::kError:
      return api_error(result->error.is_ok() ? Status(ErrorCode::kInternal, "the request failed") : result->error);
    default:
      return std::nullopt;
  }
}

}  // namespace peregrine
