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
                                   std::int32_t prev_token)
    : meta_(std::move(meta)),
      tokenizer_(tokenizer),
      stream_(tokenizer, prev_token, request.stop),
      streaming_(request.stream),
      include_usage_(request.include_usage),
      want_logprobs_(request.top_logprobs >= 0),
      prev_(prev_token) {
  if (streaming_ && meta_.endpoint == ApiEndpoint::kChatCompletions) queue_chunk("", "", nullptr);
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
  const std::string text = stream_.push(event.token);
  text_ += text;
  if (streaming_ && (!text.empty() || want_logprobs_)) queue_chunk(text, "", logprobs);
  return !stream_.stopped();
}

void CompletionOutput::finish(const RequestResult& result) {
  result_ = result;
  const std::string rest = stream_.flush();
  text_ += rest;
  if (!streaming_) return;
  if (auto error = failure()) {
    events_ += sse_event(error->to_json());
  } else {
    if (!rest.empty()) queue_chunk(rest, "", nullptr);
    queue_chunk("", openai_finish_reason(result.reason), nullptr);
    if (include_usage_) events_ += sse_event(usage_chunk_json(meta_, result));
  }
  events_ += kSseDone;
}

std::string CompletionOutput::take_events() { return std::exchange(events_, {}); }

std::variant<nlohmann::json, ApiError> CompletionOutput::response() const {
  if (auto error = failure()) return *error;
  const nlohmann::json logprobs = want_logprobs_ ? logprobs_json(meta_.endpoint, logprobs_, 0) : nlohmann::json(nullptr);
  return response_json(meta_, text_, openai_finish_reason(result_->reason), logprobs, *result_);
}

void CompletionOutput::queue_chunk(const std::string& text, std::string_view finish_reason,
                                   const nlohmann::json& logprobs) {
  events_ += sse_event(chunk_json(meta_, text, first_chunk_, finish_reason, logprobs, include_usage_));
  first_chunk_ = false;
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
