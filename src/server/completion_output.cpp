#include "peregrine/server/completion_output.h"

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

CompletionOutput::CompletionOutput(const OpenAiRequest& request, ResponseMeta meta, const Tokenizer& tokenizer,
                                   std::int32_t prev_token, OutputOptions options)
    : meta_(std::move(meta)),
      tokenizer_(tokenizer),
      stream_(tokenizer, prev_token, request.stop),
      streaming_(request.stream),
      include_usage_(request.include_usage),
      want_logprobs_(request.top_logprobs >= 0),
      prev_(prev_token) {
  if (streaming_ && meta_.endpoint == ApiEndpoint::kChatCompletions) queue_chunk("", "", nullptr);
  if (!request.tools.is_null() && request.tool_choice != ToolChoice::kNone) {
    std::vector<std::string> names;
    for (const auto& t : request.tools) names.push_back(t["function"]["name"].get<std::string>());
    tools_.emplace(options.call_seed, std::move(names));
  }
  if (meta_.endpoint == ApiEndpoint::kChatCompletions && options.reasoning != ReasoningStart::kOff) {
    reasoning_parser_.emplace(options.reasoning);
  }
}

// Text the TextStream released: its reasoning part (when parsed) to reasoning_ (streaming: a
// reasoning chunk), the rest on to release_content.
void CompletionOutput::release(std::string text, const nlohmann::json& logprobs) {
  if (!reasoning_parser_) return release_content(std::move(text), logprobs);
  ReasoningParser::Split split = reasoning_parser_->push(text);
  reasoning_ += split.reasoning;
  if (streaming_ && !split.reasoning.empty()) events_ += sse_event(reasoning_chunk_json(meta_, split.reasoning, include_usage_));
  release_content(std::move(split.content), logprobs);
}

// Content: through the tool-call parser when there is one, then into the response (streaming: a
// content chunk, and a tool-call chunk per parsed call).
void CompletionOutput::release_content(std::string text, const nlohmann::json& logprobs) {
  if (tools_) text = tools_->push(text);
  emit(text, logprobs);
}

// Content text, and the tool calls parsed so far, into the response.
void CompletionOutput::emit(const std::string& text, const nlohmann::json& logprobs) {
  std::vector<ToolCall> calls;
  if (tools_) calls = tools_->take_calls();
  text_ += text;
  if (streaming_ && (!text.empty() || !logprobs.is_null())) queue_chunk(text, "", logprobs);
  if (streaming_ && !calls.empty()) events_ += sse_event(tool_call_chunk_json(meta_, calls, calls_.size(), include_usage_));
  calls_.insert(calls_.end(), calls.begin(), calls.end());
}

TokenLogprob CompletionOutput::decode_logprobs(const TokenEvent& event) const {
  TokenLogprob t{tokenizer_.decode_token(prev_, event.token), event.logprob, {}};
  for (const auto& [id, lp] : event.top_logprobs) t.top.emplace_back(tokenizer_.decode_token(prev_, id), lp);
  return t;
}

bool CompletionOutput::add_token(const TokenEvent& event) {
  nlohmann::json logprobs = nullptr;
  if (want_logprobs_) {
    TokenLogprob record = decode_logprobs(event);
    logprobs = logprobs_json(meta_.endpoint, {&record, 1}, logprob_offset_);
    logprob_offset_ += record.token.size();
    if (!streaming_) logprobs_.push_back(std::move(record));
  }
  prev_ = event.token;
  release(stream_.push(event.token), logprobs);
  return !stream_.stopped();
}

void CompletionOutput::finish(const RequestResult& result) {
  result_ = result;
  if (!failure()) {
    release(stream_.flush(), nullptr);
    if (reasoning_parser_) {
      ReasoningParser::Split split = reasoning_parser_->flush();
      reasoning_ += split.reasoning;
      if (streaming_ && !split.reasoning.empty()) events_ += sse_event(reasoning_chunk_json(meta_, split.reasoning, include_usage_));
      release_content(std::move(split.content), nullptr);
    }
    if (tools_) emit(tools_->flush(), nullptr);
  }
  if (!streaming_) return;
  if (auto error = failure()) {
    events_ += sse_event(error->to_json());
  } else {
    queue_chunk("", finish_reason(), nullptr);
    if (include_usage_) events_ += sse_event(usage_chunk_json(meta_, result));
  }
  events_ += kSseDone;
}

std::string CompletionOutput::take_events() { return std::exchange(events_, {}); }

std::variant<nlohmann::json, ApiError> CompletionOutput::response() const {
  if (auto error = failure()) return *error;
  const nlohmann::json logprobs = want_logprobs_ ? logprobs_json(meta_.endpoint, logprobs_, 0) : nlohmann::json(nullptr);
  return response_json(meta_, text_, finish_reason(), logprobs, *result_, calls_, reasoning_);
}

void CompletionOutput::queue_chunk(const std::string& text, std::string_view finish_reason,
                                   const nlohmann::json& logprobs) {
  events_ += sse_event(chunk_json(meta_, text, first_chunk_, finish_reason, logprobs, include_usage_));
  first_chunk_ = false;
}

std::string_view CompletionOutput::finish_reason() const {
  return !calls_.empty() && result_->reason == FinishReason::kStop ? "tool_calls" : openai_finish_reason(result_->reason);
}

std::optional<ApiError> CompletionOutput::failure() const {
  switch (result_->reason) {
    case FinishReason::kCancelled:
      return api_error(cancelled("the request was cancelled"));
    case FinishReason::kError:
      return api_error(result_->error.is_ok() ? Status(ErrorCode::kInternal, "the request failed") : result_->error);
    default:
      return std::nullopt;
  }
}

}  // namespace peregrine
