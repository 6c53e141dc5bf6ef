#include "peregrine/server/openai_request.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <list>
#include <mutex>

#include "peregrine/core/json_util.h"
#include "peregrine/sampling/json_schema_grammar.h"
#include "peregrine/server/tool_calls.h"

namespace peregrine {
namespace {

using Json = nlohmann::json;
using Error = std::optional<ApiError>;

constexpr std::size_t kMaxStopStrings = 4;
constexpr std::int64_t kMaxCompletionLogprobs = 5;
constexpr std::int64_t kMaxChatTopLogprobs = 20;
constexpr std::int32_t kDefaultCompletionMaxTokens = 16;
constexpr double kMaxLogitBias = 100;      // OpenAI's range, [-100, 100]
constexpr double kMaxRepeatPenalty = 1e6;  // a finite upper bound for the llama.cpp extension

ApiError wrong_type(std::string_view param, const std::string& expected, const Json& got) {
  return invalid_param(param, "must be " + expected + " (got " + json_util::type_name(got) + ")");
}

/// The field `key` of `obj`, or nullptr when absent or null (clients send null for "unset").
const Json* field(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

Error read_bool(const Json& obj, const char* key, bool& out) {
  const Json* v = field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return wrong_type(key, "a boolean", *v);
  out = v->get<bool>();
  return std::nullopt;
}

Error read_string(const Json& obj, const char* key, std::string& out) {
  const Json* v = field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return wrong_type(key, "a string", *v);
  out = v->get<std::string>();
  return std::nullopt;
}

/// An integer field in [lo, hi]; `out` is untouched when absent.
Error read_int(const Json& obj, const char* key, std::int64_t lo, std::int64_t hi, std::optional<std::int64_t>& out) {
  const Json* v = field(obj, key);
  if (v == nullptr) return std::nullopt;
  const auto i = json_util::as_i64(*v);
  if (!i) return wrong_type(key, "an integer", *v);
  if (*i < lo || *i > hi) {
    return invalid_param(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                        "] (got " + std::to_string(*i) + ")");
  }
  out = *i;
  return std::nullopt;
}

/// A number field in [lo, hi] (lo excluded when `lo_open`); `out` is untouched when absent.
Error read_number(const Json& obj, const char* key, double lo, double hi, bool lo_open, float& out) {
  const Json* v = field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return wrong_type(key, "a number", *v);
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo)) {
    char range[64];
    std::snprintf(range, sizeof range, "%s%g, %g]", lo_open ? "(" : "[", lo, hi);
    return invalid_param(key, "must be in " + std::string(range) + " (got " + v->dump() + ")");
  }
  out = static_cast<float>(x);
  return std::nullopt;
}

Error read_stop(const Json& obj, std::vector<std::string>& out) {
  const Json* v = field(obj, "stop");
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) {
    if (!v->get_ref<const std::string&>().empty()) out.push_back(v->get<std::string>());
    return std::nullopt;
  }
  if (!v->is_array()) return wrong_type("stop", "a string or an array of strings", *v);
  if (v->size() > kMaxStopStrings) return invalid_param("stop", "takes at most 4 strings");
  for (const Json& s : *v) {
    if (!s.is_string()) return wrong_type("stop", "a string or an array of strings", s);
    if (!s.get_ref<const std::string&>().empty()) out.push_back(s.get<std::string>());
  }
  return std::nullopt;
}

Error read_prompt(const Json& obj, OpenAiRequest& r) {
  const Json* v = field(obj, "prompt");
  if (v == nullptr) return invalid_param("prompt", "is required");
  if (v->is_string()) {
    r.prompt_text = v->get<std::string>();
    return std::nullopt;
  }
  const char* expected = "a string or an array of token ids (one prompt)";
  if (!v->is_array()) return wrong_type("prompt", expected, *v);
  if (v->empty()) return invalid_param("prompt", "is an empty array");
  if (v->size() == 1 && (*v)[0].is_string()) {  // ["text"]: a batch of one prompt
    r.prompt_text = (*v)[0].get<std::string>();
    return std::nullopt;
  }
  r.prompt_is_tokens = true;
  for (const Json& t : *v) {
    const auto id = json_util::as_i64(t);
    if (!id || *id < 0 || *id > std::numeric_limits<std::int32_t>::max()) return wrong_type("prompt", expected, t);
    r.prompt_tokens.push_back(static_cast<std::int32_t>(*id));
  }
  return std::nullopt;
}

/// A message's content: a string, or an array of {"type": "text", "text": ...} parts.
Error read_content(const Json& msg, const std::string& param, std::string& out) {
  const Json* v = field(msg, "content");
  if (v == nullptr) return invalid_param(param, "is required");
  if (v->is_string()) {
    out = v->get<std::string>();
    return std::nullopt;
  }
  if (!v->is_array()) return wrong_type(param, "a string or an array of text parts", *v);
  for (const Json& part : *v) {
    const Json* text = part.is_object() ? field(part, "text") : nullptr;
    const Json* type = part.is_object() ? field(part, "type") : nullptr;
    if (text == nullptr || !text->is_string() || type == nullptr || *type != "text") {
      return invalid_param(param, "parts must be {\"type\": \"text\", \"text\": string}");
    }
    out += text->get<std::string>();
  }
  return std::nullopt;
}

/// An assistant message's tool_calls ([{"id", "type": "function", "function": {"name",
/// "arguments": string}}]) and a tool message's tool_call_id.
Error read_tool_fields(const Json& m, const std::string& at, ChatMessage& msg) {
  if (msg.role == "tool") {
    const Json* id = field(m, "tool_call_id");
    if (id == nullptr || !id->is_string()) return invalid_param(at + ".tool_call_id", "must be the string id of the call it answers");
    msg.tool_call_id = id->get<std::string>();
  }
  const Json* calls = field(m, "tool_calls");
  if (calls == nullptr) return std::nullopt;
  if (msg.role != "assistant") return invalid_param(at + ".tool_calls", "is only allowed on assistant messages");
  if (!calls->is_array()) return wrong_type(at + ".tool_calls", "an array", *calls);
  for (std::size_t i = 0; i < calls->size(); ++i) {
    const Json& c = (*calls)[i];
    const std::string p = at + ".tool_calls[" + std::to_string(i) + "]";
    const Json* fn = c.is_object() ? field(c, "function") : nullptr;
    const Json* name = fn != nullptr && fn->is_object() ? field(*fn, "name") : nullptr;
    const Json* args = fn != nullptr && fn->is_object() ? field(*fn, "arguments") : nullptr;
    if (name == nullptr || !name->is_string() || args == nullptr || !args->is_string()) {
      return invalid_param(p, "must be {\"id\", \"type\": \"function\", \"function\": {\"name\": string, \"arguments\": string}}");
    }
  }
  msg.tool_calls = nlohmann::ordered_json::parse(calls->dump());
  return std::nullopt;
}

Error read_messages(const Json& obj, std::vector<ChatMessage>& out) {
  const Json* v = field(obj, "messages");
  if (v == nullptr) return invalid_param("messages", "is required");
  if (!v->is_array()) return wrong_type("messages", "an array", *v);
  if (v->empty()) return invalid_param("messages", "must not be empty");
  for (std::size_t i = 0; i < v->size(); ++i) {
    const Json& m = (*v)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return wrong_type(at, "an object", m);
    ChatMessage msg;
    const Json* role = field(m, "role");
    if (role == nullptr || !role->is_string()) return invalid_param(at + ".role", "must be a string");
    msg.role = role->get<std::string>();
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool") {
      return invalid_param(at + ".role", "is not a known role: '" + json_util::printable(msg.role) +
                                   "' (expected system, user, assistant or tool)");
    }
    if (auto e = read_tool_fields(m, at, msg)) return e;
    if (const Json* r = field(m, "reasoning_content"); r != nullptr && !r->is_null() && msg.role == "assistant") {
      if (!r->is_string()) return wrong_type(at + ".reasoning_content", "a string", *r);
      msg.reasoning_content = r->get<std::string>();
    }
    const bool calls_only = msg.role == "assistant" && !msg.tool_calls.is_null() && field(m, "content") == nullptr;
    if (!calls_only) {
      if (auto e = read_content(m, at + ".content", msg.content)) return e;
    }
    out.push_back(std::move(msg));
  }
  return std::nullopt;
}

/// Completions: logprobs is an integer 0..5. Chat: logprobs is a boolean, top_logprobs 0..20.
Error read_logprobs(const Json& obj, ApiEndpoint endpoint, std::int32_t& out) {
  std::optional<std::int64_t> n;
  if (endpoint == ApiEndpoint::kCompletions) {
    if (auto e = read_int(obj, "logprobs", 0, kMaxCompletionLogprobs, n)) return e;
    if (n) out = static_cast<std::int32_t>(*n);
    return std::nullopt;
  }
  bool wanted = false;
  if (auto e = read_bool(obj, "logprobs", wanted)) return e;
  if (auto e = read_int(obj, "top_logprobs", 0, kMaxChatTopLogprobs, n)) return e;
  if (n && !wanted) return invalid_param("top_logprobs", "requires 'logprobs': true");
  if (wanted) out = static_cast<std::int32_t>(n.value_or(0));
  return std::nullopt;
}

Error read_max_tokens(const Json& obj, ApiEndpoint endpoint, const RequestLimits& limits, OpenAiRequest& r) {
  std::optional<std::int64_t> n;
  if (auto e = read_int(obj, "max_tokens", 1, limits.context_len, n)) return e;
  if (endpoint == ApiEndpoint::kChatCompletions) {
    if (auto e = read_int(obj, "max_completion_tokens", 1, limits.context_len, n)) return e;
  }
  if (!n && limits.max_tokens) n = *limits.max_tokens;
  if (!n && endpoint == ApiEndpoint::kCompletions) n = kDefaultCompletionMaxTokens;
  if (n) r.max_tokens = static_cast<std::int32_t>(*n);
  return std::nullopt;
}

Error read_sampling(const Json& obj, const RequestLimits& limits, SamplingParams& s) {
  s.temperature = limits.temperature;
  s.top_p = 1.0f;
  s.top_k = 0;
  s.min_p = 0.0f;
  s.repeat_penalty = 1.0f;
  if (auto e = read_number(obj, "temperature", 0, 2, false, s.temperature)) return e;
  if (auto e = read_number(obj, "top_p", 0, 1, true, s.top_p)) return e;
  if (auto e = read_number(obj, "min_p", 0, 1, false, s.min_p)) return e;
  if (auto e = read_number(obj, "presence_penalty", -2, 2, false, s.presence_penalty)) return e;
  if (auto e = read_number(obj, "frequency_penalty", -2, 2, false, s.frequency_penalty)) return e;
  if (auto e = read_number(obj, "repeat_penalty", 0, kMaxRepeatPenalty, true, s.repeat_penalty)) return e;
  std::optional<std::int64_t> top_k, last_n, seed;
  if (auto e = read_int(obj, "top_k", 0, std::numeric_limits<std::int32_t>::max(), top_k)) return e;
  if (top_k) s.top_k = static_cast<std::int32_t>(*top_k);
  if (auto e = read_int(obj, "repeat_last_n", -1, std::numeric_limits<std::int32_t>::max(), last_n)) return e;
  if (last_n) s.repeat_last_n = static_cast<std::int32_t>(*last_n);
  if (const Json* v = field(obj, "seed")) {  // any integer: negative seeds wrap to u64
    const auto i = json_util::as_i64(*v);
    const auto u = json_util::as_u64(*v);
    if (!i && !u) return wrong_type("seed", "an integer", *v);
    s.seed = u ? *u : static_cast<std::uint64_t>(*i);
  } else {
    s.seed = limits.seed;
  }
  return std::nullopt;
}

/// One logit_bias entry: a token id in [0, vocab_size) and a bias in [-100, 100].
Error read_bias_entry(const Json& id, const Json& bias, std::int64_t vocab_size, SamplingParams& s) {
  std::optional<std::int64_t> token = json_util::as_i64(id);
  if (id.is_string()) {
    const std::string& text = id.get_ref<const std::string&>();
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && end == text.data() + text.size()) token = v;
  }
  if (!token) return invalid_param("logit_bias", "keys must be token ids (got " + json_util::printable(id.dump()) + ")");
  if (*token < 0 || *token >= vocab_size) {
    return invalid_param("logit_bias", "token id " + std::to_string(*token) + " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
  }
  if (!bias.is_number() || !std::isfinite(bias.get<double>()) || std::fabs(bias.get<double>()) > kMaxLogitBias) {
    return invalid_param("logit_bias", "values must be numbers in [-100, 100] (got " + json_util::printable(bias.dump()) + ")");
  }
  s.logit_bias.emplace_back(static_cast<std::int32_t>(*token), bias.get<float>());
  return std::nullopt;
}

/// logit_bias: OpenAI's object {"token id": bias}, or llama.cpp's array of [token id, bias] pairs.
Error read_logit_bias(const Json& obj, std::int64_t vocab_size, SamplingParams& s) {
  const Json* v = field(obj, "logit_bias");
  if (v == nullptr) return std::nullopt;
  if (v->is_object()) {
    for (const auto& [key, bias] : v->items()) {
      if (auto e = read_bias_entry(Json(key), bias, vocab_size, s)) return e;
    }
    return std::nullopt;
  }
  if (!v->is_array()) return wrong_type("logit_bias", "an object of token id: bias", *v);
  for (const Json& pair : *v) {
    if (!pair.is_array() || pair.size() != 2) return invalid_param("logit_bias", "array entries must be [token id, bias] pairs");
    if (auto e = read_bias_entry(pair[0], pair[1], vocab_size, s)) return e;
  }
  return std::nullopt;
}

/// "n": choices to generate, each with its own sampler (seed + index), the prompt's K/V shared.
Error read_choices(const Json& obj, std::int32_t& out) {
  std::optional<std::int64_t> n;
  if (auto e = read_int(obj, "n", 1, kMaxChoices, n)) return e;
  out = static_cast<std::int32_t>(n.value_or(1));
  return std::nullopt;
}

Error read_stream(const Json& obj, OpenAiRequest& r) {
  if (auto e = read_bool(obj, "stream", r.stream)) return e;
  const Json* opts = field(obj, "stream_options");
  if (opts == nullptr) return std::nullopt;
  if (!r.stream) return invalid_param("stream_options", "is only allowed with 'stream': true");
  if (!opts->is_object()) return wrong_type("stream_options", "an object", *opts);
  if (const Json* usage = field(*opts, "include_usage")) {
    if (!usage->is_boolean()) return wrong_type("stream_options.include_usage", "a boolean", *usage);
    r.include_usage = usage->get<bool>();
  }
  return std::nullopt;
}

// The parsed grammar of GBNF `text`: the same Grammar for the same text among the last
// kGrammars (clients repeat their schemas; the server shares work per Grammar).
Expected<std::shared_ptr<const Grammar>> parse_grammar(const std::string& text) {
  static constexpr std::size_t kGrammars = 32;
  static std::mutex mu;
  static std::list<std::pair<std::string, std::shared_ptr<const Grammar>>> recent;  // most recent first
  std::lock_guard lock(mu);
  const auto it = std::find_if(recent.begin(), recent.end(), [&](const auto& e) { return e.first == text; });
  if (it != recent.end()) {
    recent.splice(recent.begin(), recent, it);
    return recent.front().second;
  }
  auto g = Grammar::parse(text);
  if (!g) return g.status();
  recent.emplace_front(text, *g);
  if (recent.size() > kGrammars) recent.pop_back();
  return *g;
}

// response_format {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}}: the
// schema's grammar. `body` is the request text, read again keeping the schema's key order (the
// order properties are generated in).
// The grammar of the JSON schema at body.<key>... (`param`), read from `body` again to keep its
// key order.
Error schema_grammar(std::string_view body, std::initializer_list<const char*> keys, const std::string& param, OpenAiRequest& r) {
  auto schema = nlohmann::ordered_json::parse(body, nullptr, false);
  for (const char* key : keys) schema = schema.at(key);
  if (!schema.is_object() && !schema.is_boolean()) return invalid_param(param, "must be a JSON schema (an object)");
  const auto gbnf = json_schema_to_gbnf(schema);
  if (!gbnf) return invalid_param(param, "cannot be followed: " + gbnf.status().message());
  auto g = parse_grammar(*gbnf);
  if (!g) return invalid_param(param, "cannot be followed: " + g.status().message());
  r.grammar = *g;
  return std::nullopt;
}

Error read_json_schema(const Json& format, std::string_view body, OpenAiRequest& r) {
  const Json* spec = field(format, "json_schema");
  if (spec == nullptr || !spec->is_object()) return invalid_param("response_format.json_schema", "must be an object with a 'schema'");
  if (field(*spec, "schema") == nullptr) return invalid_param("response_format.json_schema.schema", "is missing");
  return schema_grammar(body, {"response_format", "json_schema", "schema"}, "response_format.json_schema.schema", r);
}

// llama.cpp's "grammar" (GBNF text) or "json_schema" (a schema), or OpenAI's "response_format"
// ("text", "json_object", "json_schema"), at most one of them.
Error read_grammar(const Json& obj, std::string_view body, OpenAiRequest& r) {
  std::string gbnf;
  if (auto e = read_string(obj, "grammar", gbnf)) return e;
  if (!gbnf.empty()) {
    auto g = parse_grammar(gbnf);
    if (!g) return api_error(g.status(), "grammar");
    r.grammar = *g;
  }
  if (field(obj, "json_schema") != nullptr) {
    if (r.grammar) return invalid_param("json_schema", "cannot be combined with 'grammar'");
    if (auto e = schema_grammar(body, {"json_schema"}, "json_schema", r)) return e;
  }
  const Json* format = field(obj, "response_format");
  if (format == nullptr) return std::nullopt;
  if (!format->is_object()) return wrong_type("response_format", "an object", *format);
  const Json* type = field(*format, "type");
  if (type == nullptr || !type->is_string()) return invalid_param("response_format.type", "must be \"text\", \"json_object\" or \"json_schema\"");
  const std::string t = type->get<std::string>();
  if (t == "text") return std::nullopt;
  if (t != "json_object" && t != "json_schema") {
    return invalid_param("response_format.type", "must be \"text\", \"json_object\" or \"json_schema\" (got \"" + t + "\")");
  }
  if (r.grammar) return invalid_param("response_format", "cannot be combined with 'grammar' or 'json_schema'");
  if (t == "json_schema") return read_json_schema(*format, body, r);
  // llama.cpp's extension: a json_object with a "schema" follows it.
  if (field(*format, "schema") != nullptr) return schema_grammar(body, {"response_format", "schema"}, "response_format.schema", r);
  r.grammar = *parse_grammar(std::string(json_object_gbnf()));
  return std::nullopt;
}

// OpenAI's tools ([{"type": "function", "function": {"name", "description"?, "parameters"?}}],
// read from `body` again to keep each schema's key order), tool_choice, parallel_tool_calls; a
// forced call (required, named) becomes the request's grammar.
Error read_tools(const Json& obj, std::string_view body, ToolCallFormat tool_format, OpenAiRequest& r) {
  if (auto e = read_bool(obj, "parallel_tool_calls", r.parallel_tool_calls)) return e;
  const Json* tools = field(obj, "tools");
  if (tools != nullptr) {
    if (!tools->is_array()) return wrong_type("tools", "an array", *tools);
    for (std::size_t i = 0; i < tools->size(); ++i) {
      const Json& t = (*tools)[i];
      const std::string at = "tools[" + std::to_string(i) + "]";
      const Json* fn = t.is_object() ? field(t, "function") : nullptr;
      const Json* name = fn != nullptr && fn->is_object() ? field(*fn, "name") : nullptr;
      const Json* type = t.is_object() ? field(t, "type") : nullptr;
      if (type == nullptr || *type != "function" || name == nullptr || !name->is_string() || name->get<std::string>().empty()) {
        return invalid_param(at, "must be {\"type\": \"function\", \"function\": {\"name\": string, ...}}");
      }
      const Json* params = field(*fn, "parameters");
      if (params != nullptr && !params->is_object()) return wrong_type(at + ".function.parameters", "an object", *params);
    }
    if (!tools->empty()) r.tools = nlohmann::ordered_json::parse(body).at("tools");
  }
  const Json* choice = field(obj, "tool_choice");
  if (choice == nullptr) return std::nullopt;
  if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c == "auto") return std::nullopt;
    if (c == "none") {
      r.tool_choice = ToolChoice::kNone;
      return std::nullopt;
    }
    if (c != "required") return invalid_param("tool_choice", "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    r.tool_choice = ToolChoice::kRequired;
  } else {
    const Json* fn = choice->is_object() ? field(*choice, "function") : nullptr;
    const Json* name = fn != nullptr && fn->is_object() ? field(*fn, "name") : nullptr;
    if (name == nullptr || !name->is_string()) return invalid_param("tool_choice", "must name a function: {\"type\": \"function\", \"function\": {\"name\": ...}}");
    r.tool_choice = ToolChoice::kNamed;
    r.tool_choice_name = name->get<std::string>();
    const bool declared = std::any_of(r.tools.begin(), r.tools.end(), [&](const auto& t) { return t["function"]["name"] == r.tool_choice_name; });
    if (!declared) return invalid_param("tool_choice", "names '" + json_util::printable(r.tool_choice_name) + "', which is not in 'tools'");
  }
  if (r.tools.is_null()) return invalid_param("tool_choice", "forces a call but 'tools' is empty");
  if (r.grammar) return invalid_param("tool_choice", "cannot force a call together with 'grammar' or 'response_format'");
  auto gbnf = tool_call_gbnf(r.tools, r.tool_choice_name, r.parallel_tool_calls, tool_format);
  if (!gbnf && gbnf.status().code() == ErrorCode::kUnsupported) return invalid_param("tool_choice", gbnf.status().message());
  if (!gbnf) return invalid_param("tools", "cannot be followed: " + gbnf.status().message());
  auto g = parse_grammar(*gbnf);
  if (!g) return invalid_param("tools", "cannot be followed: " + g.status().message());
  r.grammar = *g;
  return std::nullopt;
}

// "speculative": "pld" or {"method": "pld", "draft_max": 8, "branching": 1, "adaptive": true};
// fields left out keep the server's defaults.
Error read_speculative(const Json& obj, const SpecParams& defaults, SpecParams& spec) {
  spec = defaults;
  const Json* v = field(obj, "speculative");
  if (v == nullptr) return std::nullopt;
  std::string method;
  if (v->is_string()) {
    method = v->get<std::string>();
  } else if (v->is_object()) {
    // A nested field's error names it as "speculative.<field>".
    const auto nested = [](ApiError e) {
      const std::string quoted = "'" + e.param + "'";
      if (const std::size_t at = e.message.find(quoted); at != std::string::npos) {
        e.message.replace(at, quoted.size(), "'speculative." + e.param + "'");
      }
      e.param = "speculative." + e.param;
      return Error(std::move(e));
    };
    std::optional<std::int64_t> draft_max, branching;
    if (auto e = read_string(*v, "method", method)) return nested(*e);
    if (auto e = read_int(*v, "draft_max", 1, kMaxDraftNodes, draft_max)) return nested(*e);
    if (auto e = read_int(*v, "branching", 1, kMaxDraftNodes, branching)) return nested(*e);
    if (auto e = read_bool(*v, "adaptive", spec.adaptive)) return nested(*e);
    if (draft_max) spec.draft_max = static_cast<std::int32_t>(*draft_max);
    if (branching) spec.branching = static_cast<std::int32_t>(*branching);
  } else {
    return wrong_type("speculative", "a method name or an object", *v);
  }
  if (!method.empty()) {
    auto m = parse_spec_method(method);
    if (!m) return invalid_param("speculative", m.status().message());
    spec.method = *m;
  }
  if (Status st = spec.validate(); !st) return invalid_param("speculative", st.message());
  return std::nullopt;
}

// How the chat prompt ends: vLLM's add_generation_prompt / continue_final_message, else
// llama.cpp's prefill rule (a last assistant message with content and no calls is continued).
Error read_prompt_end(const Json& obj, OpenAiRequest& r) {
  bool generation = true, cont = false;
  if (auto e = read_bool(obj, "add_generation_prompt", generation)) return e;
  if (auto e = read_bool(obj, "continue_final_message", cont)) return e;
  const bool asked = field(obj, "add_generation_prompt") != nullptr;
  const ChatMessage& last = r.messages.back();
  const bool prefill = last.role == "assistant" && !last.content.empty() && last.tool_calls.is_null();
  if (cont && asked && generation) {
    return invalid_param("continue_final_message", "cannot be true together with 'add_generation_prompt': true");
  }
  if (cont && !prefill) return invalid_param("continue_final_message", "needs a last assistant message with content");
  if (cont || (prefill && !asked)) {
    r.prompt_end = PromptEnd::kContinueLastMessage;
  } else if (!generation) {
    r.prompt_end = PromptEnd::kAfterLastMessage;
  }
  return std::nullopt;
}

Error read_request(const Json& obj, std::string_view body, ApiEndpoint endpoint, const RequestLimits& limits, OpenAiRequest& r) {
  if (auto e = read_string(obj, "model", r.model)) return e;
  if (endpoint == ApiEndpoint::kCompletions) {
    if (auto e = read_prompt(obj, r)) return e;
  } else {
    if (auto e = read_messages(obj, r.messages)) return e;
    if (auto e = read_prompt_end(obj, r)) return e;
  }
  if (auto e = read_max_tokens(obj, endpoint, limits, r)) return e;
  if (auto e = read_sampling(obj, limits, r.sampling)) return e;
  if (auto e = read_logit_bias(obj, limits.vocab_size, r.sampling)) return e;
  if (auto e = read_logprobs(obj, endpoint, r.top_logprobs)) return e;
  if (auto e = read_stop(obj, r.stop)) return e;
  if (auto e = read_bool(obj, "ignore_eos", r.ignore_eos)) return e;
  if (auto e = read_stream(obj, r)) return e;
  if (auto e = read_speculative(obj, limits.spec, r.spec)) return e;
  if (auto e = read_grammar(obj, body, r)) return e;
  if (endpoint == ApiEndpoint::kChatCompletions) {
    if (auto e = read_tools(obj, body, limits.tool_format, r)) return e;
  }
  return read_choices(obj, r.n);
}

}  // namespace

std::variant<OpenAiRequest, ApiError> parse_openai_request(std::string_view body, ApiEndpoint endpoint,
                                                           const RequestLimits& limits) {
  auto parsed = json_util::parse(body, "request body");
  if (!parsed) return api_error(invalid_argument(parsed.status().message()));
  if (!parsed->is_object()) return api_error(invalid_argument("the request body must be a JSON object"));
  OpenAiRequest r;
  r.endpoint = endpoint;
  if (auto e = read_request(*parsed, body, endpoint, limits, r)) return *e;
  return r;
}

}  // namespace peregrine
