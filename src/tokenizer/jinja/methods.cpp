#include "tokenizer/jinja/methods.h"

#include <algorithm>

#include "tokenizer/jinja/operations.h"
#include "tokenizer/jinja/py_string.h"

namespace peregrine::jinja {
namespace {

Expected<Value> strip_method(const std::string& s, std::string_view name, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args(name, args, {{"chars", Value(None{})}}));
  PEREGRINE_ASSIGN_OR_RETURN(const auto chars, optional_string_arg(a[0], "strip chars"));
  return Value(py_strip(s, chars, name != "rstrip", name != "lstrip"));
}

Expected<Value> split_method(const std::string& s, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("split", args, {{"sep", Value(None{})}, {"maxsplit", Value(-1)}}));
  PEREGRINE_ASSIGN_OR_RETURN(const auto sep, optional_string_arg(a[0], "split sep"));
  PEREGRINE_ASSIGN_OR_RETURN(const std::int64_t maxsplit, int_arg(a[1], "split maxsplit"));
  if (sep && sep->empty()) return invalid_argument("empty separator");
  std::vector<Value> out;
  for (auto& part : py_split(s, sep, maxsplit)) out.emplace_back(std::move(part));
  return make_list(std::move(out));
}

// startswith / endswith with one prefix or a tuple (list) of them.
Expected<Value> affix_method(const std::string& s, std::string_view name, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args(name, args, {{"prefix", std::nullopt}}));
  const std::vector<Value> candidates = a[0].is_list() ? a[0].list().items : std::vector<Value>{a[0]};
  for (const Value& c : candidates) {
    PEREGRINE_ASSIGN_OR_RETURN(const std::string affix, string_arg(c, std::string(name) + " argument"));
    if (name == "startswith" ? s.starts_with(affix) : s.ends_with(affix)) return Value(true);
  }
  return Value(false);
}

Expected<Value> join_method(const std::string& sep, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("join", args, {{"iterable", std::nullopt}}));
  PEREGRINE_ASSIGN_OR_RETURN(const auto items, iterate(a[0]));
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    PEREGRINE_ASSIGN_OR_RETURN(const std::string item, string_arg(items[i], "join item"));
    if (i) out += sep;
    out += item;
    if (out.size() > kMaxBuiltSize) return invalid_argument("join result too large");
  }
  return Value(std::move(out));
}

// str.find (code point index of the first match, or -1) and str.count (non-overlapping matches).
Expected<Value> search_method(const std::string& s, std::string_view name, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args(name, args, {{"sub", std::nullopt}}));
  PEREGRINE_ASSIGN_OR_RETURN(const std::string sub, string_arg(a[0], std::string(name) + " argument"));
  if (name == "find") {
    const std::size_t hit = s.find(sub);
    return Value(hit == std::string::npos ? std::int64_t{-1} : py_len(std::string_view(s).substr(0, hit)));
  }
  if (sub.empty()) return Value(py_len(s) + 1);
  std::int64_t n = 0;
  for (std::size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
  return Value(n);
}

// str.format: {} (the next positional argument), {N} and {name} fields, each printed with str();
// {{ and }} are braces. Format specs and conversions (!r, :>10) are not supported.
Expected<Value> format_method(const std::string& s, const CallArgs& args) {
  std::string out;
  std::size_t next = 0;
  bool automatic = false, manual = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if ((s[i] == '{' || s[i] == '}') && i + 1 < s.size() && s[i + 1] == s[i]) {
      out += s[i++];
      continue;
    }
    if (s[i] == '}') return invalid_argument("str.format: single '}' encountered in format string");
    if (s[i] != '{') {
      out += s[i];
      continue;
    }
    const std::size_t close = s.find('}', i);
    if (close == std::string::npos) return invalid_argument("str.format: single '{' encountered in format string");
    const std::string field = s.substr(i + 1, close - i - 1);
    i = close;
    const Value* v = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      (field.empty() ? automatic : manual) = true;
      if (automatic && manual) return invalid_argument("str.format: cannot switch between automatic and manual field numbering");
      if (field.size() > 6) return invalid_argument("str.format: field index too large");
      const std::size_t k = field.empty() ? next++ : std::stoul(field);
      if (k < args.positional.size()) v = &args.positional[k];
    } else {
      for (const auto& [key, value] : args.keyword) {
        if (key == field) v = &value;
      }
    }
    if (v == nullptr) return invalid_argument("str.format: no argument for '{" + field + "}' (format specs are not supported)");
    out += to_str(*v);
    if (out.size() > kMaxBuiltSize) return invalid_argument("format result too large");
  }
  return Value(std::move(out));
}

Expected<Value> string_method(const std::string& s, std::string_view name, const CallArgs& args) {
  if (name == "format") return format_method(s, args);
  if (name == "strip" || name == "lstrip" || name == "rstrip") return strip_method(s, name, args);
  if (name == "split") return split_method(s, args);
  if (name == "startswith" || name == "endswith") return affix_method(s, name, args);
  if (name == "join") return join_method(s, args);
  if (name == "find" || name == "count") return search_method(s, name, args);
  if (name == "replace") {
    PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("replace", args, {{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value(-1)}}));
    PEREGRINE_ASSIGN_OR_RETURN(const std::string old, string_arg(a[0], "replace old"));
    PEREGRINE_ASSIGN_OR_RETURN(const std::string repl, string_arg(a[1], "replace new"));
    PEREGRINE_ASSIGN_OR_RETURN(const std::int64_t count, int_arg(a[2], "replace count"));
    if (!repl.empty() && py_len(s) + 1 > static_cast<std::int64_t>(kMaxBuiltSize / repl.size())) {
      return invalid_argument("replace result too large");
    }
    return Value(py_replace(s, old, repl, count));
  }
  std::string (*transform)(std::string_view) = name == "upper"        ? py_upper
                                                : name == "lower"      ? py_lower
                                                : name == "title"      ? py_title
                                                : name == "capitalize" ? py_capitalize
                                                                       : nullptr;
  if (!transform) return invalid_argument(std::string("'str object' has no method '").append(name) + "'");
  PEREGRINE_RETURN_IF_ERROR(expect_no_args(name, args));
  return Value(transform(s));
}

Expected<Value> dict_method(const DictData& d, std::string_view name, const CallArgs& args) {
  if (name == "get") {
    PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("get", args, {{"key", std::nullopt}, {"default", Value(None{})}}));
    const Value* found = a[0].is_string() ? d.find(a[0].string()) : nullptr;
    return found ? *found : a[1];
  }
  if (name != "items" && name != "keys" && name != "values") {
    return invalid_argument(std::string("'dict object' has no method '").append(name) + "'");
  }
  PEREGRINE_RETURN_IF_ERROR(expect_no_args(name, args));
  std::vector<Value> out;
  for (const auto& [k, v] : d.items) {
    out.push_back(name == "items" ? make_list({Value(k), v}) : name == "keys" ? Value(k) : v);
  }
  return make_list(std::move(out));
}

}  // namespace

Expected<Value> call_method(const Value& object, std::string_view name, const CallArgs& args) {
  if (object.is_undefined()) return invalid_argument(object.undefined().what);
  if (object.is_string()) return string_method(object.string(), name, args);
  if (object.is_dict()) return dict_method(object.dict(), name, args);
  return invalid_argument(std::string("'") + object.type_name() + std::string(" object' has no method '").append(name) + "'");
}

}  // namespace peregrine::jinja
