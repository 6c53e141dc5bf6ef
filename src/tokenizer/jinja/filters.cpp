#include "tokenizer/jinja/filters.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "tokenizer/jinja/operations.h"
#include "tokenizer/jinja/py_string.h"
#include "tokenizer/jinja/tests.h"
#include "tokenizer/jinja/to_json.h"

namespace peregrine::jinja {
namespace {

using FilterFn = Expected<Value> (*)(const Value& v, const CallArgs& args);

// Every element of `args` after the first `skip` positionals, as a call's arguments.
CallArgs rest_args(const CallArgs& args, std::size_t skip) {
  CallArgs out;
  out.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(std::min(skip, args.positional.size())),
                        args.positional.end());
  out.keyword = args.keyword;
  return out;
}

template <std::string (*Fn)(std::string_view)>
Expected<Value> string_filter(const Value& v, const CallArgs& args) {
  PEREGRINE_RETURN_IF_ERROR(expect_no_args("string filter", args));
  return Value(Fn(to_str(v)));
}

Expected<Value> filter_abs(const Value& v, const CallArgs& args) {
  PEREGRINE_RETURN_IF_ERROR(expect_no_args("abs", args));
  if (v.is_float()) return Value(std::fabs(v.floating()));
  if (!v.is_number()) return invalid_argument(std::string("bad operand type for abs(): '") + v.type_name() + "'");
  return v.as_int() < 0 ? negate(v, true) : Value(v.as_int());
}

Expected<Value> filter_attr(const Value& v, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("attr", args, {{"name", std::nullopt}}));
  PEREGRINE_ASSIGN_OR_RETURN(const std::string name, string_arg(a[0], "attr name"));
  return get_attr(v, name);
}

Expected<Value> filter_default(const Value& v, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("default", args, {{"default_value", Value("")}, {"boolean", Value(false)}}));
  const bool use_default = v.is_undefined() || (a[1].truthy() && !v.truthy());
  return use_default ? a[0] : v;
}

Expected<Value> filter_escape(const Value& v, const CallArgs& args) {
  PEREGRINE_RETURN_IF_ERROR(expect_no_args("escape", args));
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(std::move(out));
}

Expected<Value> first_or_last(const Value& v, const CallArgs& args, bool first) {
  PEREGRINE_RETURN_IF_ERROR(expect_no_args(first ? "first" : "last", args));
  PEREGRINE_ASSIGN_OR_RETURN(const auto items, iterate(v));
  if (items.empty()) return Value(Undefined{first ? "No first item, sequence was empty." : "No last item, sequence was empty."});
  return first ? items.front() : items.back();
}
Expected<Value> filter_first(const Value& v, const CallArgs& args) { return first_or_last(v, args, true); }
Expected<Value> filter_last(const Value& v, const CallArgs& args) { return first_or_last(v, args, false); }

// Python's float(s) of a string: surrounding whitespace allowed, the whole rest a number.
std::optional<double> parse_float(const std::string& text) {
  const std::string s = py_strip(text, std::nullopt, true, true);
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double f = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return f;
}

Expected<Value> filter_float(const Value& v, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("float", args, {{"default", Value(0.0)}}));
  if (v.is_number()) return Value(v.as_float());
  if (v.is_string()) {
    if (const auto f = parse_float(v.string())) return Value(*f);
  }
  return a[0];
}

// Python's int(s, base) of a string: whitespace, sign, digits with single underscores.
std::optional<std::int64_t> parse_int(const std::string& text, int base) {
  std::string s = py_strip(text, std::nullopt, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long i = std::strtoll(s.c_str(), &end, base);
  if (errno != 0 || end != s.c_str() + s.size()) return std::nullopt;
  return static_cast<std::int64_t>(i);
}

Expected<Value> filter_int(const Value& v, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("int", args, {{"default", Value(0)}, {"base", Value(10)}}));
  PEREGRINE_ASSIGN_OR_RETURN(const std::int64_t base, int_arg(a[1], "int base"));
  if (base < 2 || base > 36) return invalid_argument("int() base must be >= 2 and <= 36");
  if (v.is_bool() || v.is_int()) return Value(v.as_int());
  if (v.is_float() && std::isfinite(v.floating()) && std::fabs(v.floating()) < 9.2e18) return Value(static_cast<std::int64_t>(v.floating()));
  if (v.is_string()) {
    if (const auto i = parse_int(v.string(), static_cast<int>(base))) return Value(*i);
    const auto f = parse_float(v.string());
    if (f && std::isfinite(*f) && std::fabs(*f) < 9.2e18) return Value(static_cast<std::int64_t>(*f));
  }
  return a[0];
}

Expected<Value> filter_indent(const Value& v, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("indent", args, {{"width", Value(4)}, {"first", Value(false)}, {"blank", Value(false)}}));
  std::string pad;
  if (a[0].is_string()) {
    pad = a[0].string();
  } else {
    PEREGRINE_ASSIGN_OR_RETURN(const std::int64_t width, int_arg(a[0], "indent width"));
    pad.assign(static_cast<std::size_t>(std::clamp<std::int64_t>(width, 0, 1024)), ' ');
  }
  const std::vector<std::string> lines = py_split(to_str(v) + "\n", std::string("\n"), -1);  // last part is ""
  std::string out = lines.front();
  for (std::size_t i = 1; i + 1 < lines.size(); ++i) {
    out += "\n";
    if (a[2].truthy() || !lines[i].empty()) out += pad;
    out += lines[i];
  }
  return Value(a[1].truthy() ? pad + out : out);
}

Expected<Value> filter_items(const Value& v, const CallArgs& args) {
  PEREGRINE_RETURN_IF_ERROR(expect_no_args("items", args));
  if (v.is_undefined()) return make_list({});
  if (!v.is_dict()) return invalid_argument("Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  for (const auto& [k, val] : v.dict().items) pairs.push_back(make_list({Value(k), val}));
  return make_list(std::move(pairs));
}

Expected<Value> filter_join(const Value& v, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("join", args, {{"d", Value("")}, {"attribute", Value(None{})}}));
  PEREGRINE_ASSIGN_OR_RETURN(const auto items, iterate(v));
  const std::string sep = to_str(a[0]);
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    Value item = items[i];
    if (!a[1].is_none()) {
      PEREGRINE_ASSIGN_OR_RETURN(item, get_attribute_path(item, to_str(a[1])));
    }
    out += to_str(item);
    if (out.size() > kMaxBuiltSize) return invalid_argument("join result too large");
  }
  return Value(std::move(out));
}

Expected<Value> filter_length(const Value& v, const CallArgs& args) {
  PEREGRINE_RETURN_IF_ERROR(expect_no_args("length", args));
  PEREGRINE_ASSIGN_OR_RETURN(const std::int64_t n, length(v));
  return Value(n);
}

Expected<Value> filter_list(const Value& v, const CallArgs& args) {
  PEREGRINE_RETURN_IF_ERROR(expect_no_args("list", args));
  PEREGRINE_ASSIGN_OR_RETURN(auto items, iterate(v));
  return make_list(std::move(items));
}

// The items of a map / select filter's input: jinja2 iterates only a true one (`if seq:`), so
// none and undefined give nothing.
Expected<std::vector<Value>> filtered_items(const Value& v) {
  if (!v.truthy()) return std::vector<Value>{};
  return iterate(v);
}

Expected<Value> filter_map(const Value& v, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto items, filtered_items(v));
  const auto attribute = std::find_if(args.keyword.begin(), args.keyword.end(), [](const auto& kw) { return kw.first == "attribute"; });
  std::vector<Value> out;
  if (attribute != args.keyword.end()) {
    PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("map", args, {{"attribute", std::nullopt}, {"default", Value(Undefined{})}}));
    for (const Value& item : items) {
      PEREGRINE_ASSIGN_OR_RETURN(Value x, get_attribute_path(item, to_str(a[0])));
      out.push_back(x.is_undefined() && !a[1].is_undefined() ? a[1] : x);
    }
    return make_list(std::move(out));
  }
  if (args.positional.empty()) return invalid_argument("map() needs a filter name or attribute=");
  PEREGRINE_ASSIGN_OR_RETURN(const std::string filter, string_arg(args.positional[0], "map filter name"));
  for (const Value& item : items) {
    PEREGRINE_ASSIGN_OR_RETURN(Value x, apply_filter(filter, item, rest_args(args, 1)));
    out.push_back(std::move(x));
  }
  return make_list(std::move(out));
}

// select / reject / selectattr / rejectattr: keep items whose (attribute's) test result is `keep`.
Expected<Value> select_items(const Value& v, const CallArgs& args, bool by_attribute, bool keep) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto items, filtered_items(v));
  std::size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty()) return invalid_argument("selectattr / rejectattr need an attribute name");
    attribute = to_str(args.positional[next++]);
  }
  std::string test;
  if (next < args.positional.size()) {
    PEREGRINE_ASSIGN_OR_RETURN(test, string_arg(args.positional[next++], "test name"));
  }
  const CallArgs test_args = rest_args(args, next);
  std::vector<Value> out;
  for (const Value& item : items) {
    Value x = item;
    if (by_attribute) {
      PEREGRINE_ASSIGN_OR_RETURN(x, get_attribute_path(item, attribute));
    }
    bool passed = x.truthy();
    if (!test.empty()) {
      PEREGRINE_ASSIGN_OR_RETURN(passed, apply_test(test, x, test_args));
    }
    if (passed == keep) out.push_back(item);
  }
  return make_list(std::move(out));
}
Expected<Value> filter_select(const Value& v, const CallArgs& args) { return select_items(v, args, false, true); }
Expected<Value> filter_reject(const Value& v, const CallArgs& args) { return select_items(v, args, false, false); }
Expected<Value> filter_selectattr(const Value& v, const CallArgs& args) { return select_items(v, args, true, true); }
Expected<Value> filter_rejectattr(const Value& v, const CallArgs& args) { return select_items(v, args, true, false); }

Expected<Value> filter_replace(const Value& v, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("replace", args, {{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value(None{})}}));
  std::int64_t count = -1;
  if (!a[2].is_none()) {
    PEREGRINE_ASSIGN_OR_RETURN(count, int_arg(a[2], "replace count"));
  }
  const std::string s = to_str(v), old = to_str(a[0]), repl = to_str(a[1]);
  if (!repl.empty() && py_len(s) + 1 > static_cast<std::int64_t>(kMaxBuiltSize / repl.size())) {
    return invalid_argument("replace result too large");
  }
  return Value(py_replace(s, old, repl, count));
}

Expected<Value> filter_reverse(const Value& v, const CallArgs& args) {
  PEREGRINE_RETURN_IF_ERROR(expect_no_args("reverse", args));
  PEREGRINE_ASSIGN_OR_RETURN(auto items, iterate(v));
  std::reverse(items.begin(), items.end());
  if (!v.is_string()) return make_list(std::move(items));
  std::string out;
  for (const Value& ch : items) out += ch.string();
  return Value(std::move(out));
}

Expected<Value> filter_round(const Value& v, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("round", args, {{"precision", Value(0)}, {"method", Value("common")}}));
  PEREGRINE_ASSIGN_OR_RETURN(const std::int64_t precision, int_arg(a[0], "round precision"));
  PEREGRINE_ASSIGN_OR_RETURN(const std::string method, string_arg(a[1], "round method"));
  if (!v.is_number()) return invalid_argument(std::string("cannot round a ") + v.type_name());
  if (method != "common" && method != "ceil" && method != "floor") return invalid_argument("round method must be common, ceil or floor");
  if (!v.is_float() && method == "common" && precision >= 0) return Value(v.as_int());  // Python's round(int, n)
  const double scale = std::pow(10.0, static_cast<double>(std::clamp<std::int64_t>(precision, -308, 308)));
  const double x = v.as_float() * scale;
  const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
  return Value(r / scale);
}

Expected<Value> filter_safe(const Value& v, const CallArgs& args) {
  PEREGRINE_RETURN_IF_ERROR(expect_no_args("safe", args));
  return v;
}

Expected<Value> filter_sort(const Value& v, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("sort", args, {{"reverse", Value(false)}, {"case_sensitive", Value(false)}, {"attribute", Value(None{})}}));
  PEREGRINE_ASSIGN_OR_RETURN(auto items, iterate(v));
  std::vector<std::pair<Value, Value>> keyed;  // sort key, item
  for (Value& item : items) {
    Value key = item;
    if (!a[2].is_none()) {
      PEREGRINE_ASSIGN_OR_RETURN(key, get_attribute_path(item, to_str(a[2])));
    }
    if (key.is_string() && !a[1].truthy()) key = Value(py_lower(key.string()));
    keyed.emplace_back(std::move(key), std::move(item));
  }
  Status error;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    auto lt = a[0].truthy() ? less_than(y.first, x.first) : less_than(x.first, y.first);
    if (!lt && error.is_ok()) error = lt.status();
    return lt && *lt;
  });
  PEREGRINE_RETURN_IF_ERROR(error);
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return make_list(std::move(out));
}

Expected<Value> filter_string(const Value& v, const CallArgs& args) {
  PEREGRINE_RETURN_IF_ERROR(expect_no_args("string", args));
  return Value(to_str(v));
}

Expected<Value> filter_sum(const Value& v, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("sum", args, {{"attribute", Value(None{})}, {"start", Value(0)}}));
  PEREGRINE_ASSIGN_OR_RETURN(const auto items, iterate(v));
  Value total = a[1];
  for (const Value& item : items) {
    Value x = item;
    if (!a[0].is_none()) {
      PEREGRINE_ASSIGN_OR_RETURN(x, get_attribute_path(item, to_str(a[0])));
    }
    PEREGRINE_ASSIGN_OR_RETURN(total, binary_op("+", total, x));
  }
  return total;
}

Expected<Value> filter_tojson(const Value& v, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("tojson", args, {{"ensure_ascii", Value(false)}, {"indent", Value(None{})}, {"separators", Value(None{})}, {"sort_keys", Value(false)}}));
  if (a[0].truthy() || !a[2].is_none()) return invalid_argument("tojson: ensure_ascii and separators are not supported");
  std::optional<int> indent;
  if (!a[1].is_none()) {
    PEREGRINE_ASSIGN_OR_RETURN(const std::int64_t n, int_arg(a[1], "tojson indent"));
    if (n < 0 || n > 64) return invalid_argument("tojson indent must be between 0 and 64");
    indent = static_cast<int>(n);
  }
  PEREGRINE_ASSIGN_OR_RETURN(std::string json, to_json(v, indent, a[3].truthy()));
  return Value(std::move(json));
}

Expected<Value> filter_trim(const Value& v, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("trim", args, {{"chars", Value(None{})}}));
  PEREGRINE_ASSIGN_OR_RETURN(const auto chars, optional_string_arg(a[0], "trim chars"));
  return Value(py_strip(to_str(v), chars, true, true));
}

Expected<Value> filter_unique(const Value& v, const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("unique", args, {{"case_sensitive", Value(false)}, {"attribute", Value(None{})}}));
  PEREGRINE_ASSIGN_OR_RETURN(const auto items, iterate(v));
  std::vector<Value> out, seen;
  for (const Value& item : items) {
    Value key = item;
    if (!a[1].is_none()) {
      PEREGRINE_ASSIGN_OR_RETURN(key, get_attribute_path(item, to_str(a[1])));
    }
    if (key.is_string() && !a[0].truthy()) key = Value(py_lower(key.string()));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return make_list(std::move(out));
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", filter_abs},
    {"attr", filter_attr},
    {"capitalize", string_filter<py_capitalize>},
    {"count", filter_length},
    {"d", filter_default},
    {"default", filter_default},
    {"e", filter_escape},
    {"escape", filter_escape},
    {"first", filter_first},
    {"float", filter_float},
    {"indent", filter_indent},
    {"int", filter_int},
    {"items", filter_items},
    {"join", filter_join},
    {"last", filter_last},
    {"length", filter_length},
    {"list", filter_list},
    {"lower", string_filter<py_lower>},
    {"map", filter_map},
    {"reject", filter_reject},
    {"rejectattr", filter_rejectattr},
    {"replace", filter_replace},
    {"reverse", filter_reverse},
    {"round", filter_round},
    {"safe", filter_safe},
    {"select", filter_select},
    {"selectattr", filter_selectattr},
    {"sort", filter_sort},
    {"string", filter_string},
    {"sum", filter_sum},
    {"title", string_filter<py_title>},
    {"tojson", filter_tojson},
    {"trim", filter_trim},
    {"unique", filter_unique},
    {"upper", string_filter<py_upper>},
};

}  // namespace

Expected<Value> get_attribute_path(const Value& v, const std::string& path) {
  Value x = v;
  for (const std::string& part : py_split(path, std::string("."), -1)) {
    const bool index = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    const Value key = index && part.size() < 18 ? Value(static_cast<std::int64_t>(std::stoll(part))) : Value(part);
    PEREGRINE_ASSIGN_OR_RETURN(x, get_item(x, key));
  }
  return x;
}

Expected<Value> apply_filter(std::string_view name, const Value& v, const CallArgs& args) {
  for (const FilterEntry& f : kFilters) {
    if (f.name == name) return f.fn(v, args);
  }
  return invalid_argument(std::string("no filter named '").append(name) + "'");
}

}  // namespace peregrine::jinja
