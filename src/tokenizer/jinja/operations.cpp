#include "tokenizer/jinja/operations.h"

#include <cmath>

#include "tokenizer/jinja/py_string.h"

namespace peregrine::jinja {
namespace {

Status type_error(std::string_view op, const Value& a, const Value& b) {
  return invalid_argument(std::string("unsupported operand type(s) for ").append(op) + ": '" + a.type_name() + "' and '" +
                          b.type_name() + "'");
}

Status too_large() { return invalid_argument("result larger than " + std::to_string(kMaxBuiltSize) + " bytes / items"); }

// a + b, a - b or a * b of int64s, or an error when the result overflows.
Expected<Value> checked_int(char op, std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  const bool overflow = op == '+'   ? __builtin_add_overflow(a, b, &r)
                        : op == '-' ? __builtin_sub_overflow(a, b, &r)
                                    : __builtin_mul_overflow(a, b, &r);
  if (overflow) return invalid_argument("integer overflow");
  return Value(r);
}

// Python's floor division and modulo (results rounded toward negative infinity).
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
double float_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0.0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

Expected<Value> int_power(std::int64_t base, std::int64_t exp) {
  if (exp < 0) return Value(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  std::int64_t result = 1;
  for (std::int64_t i = 0; i < exp; ++i) {
    if (__builtin_mul_overflow(result, base, &result)) return invalid_argument("integer overflow");
    if (result == 0 || result == 1) break;
  }
  return Value(result);
}

Expected<Value> arithmetic(std::string_view op, const Value& a, const Value& b) {
  const bool ints = !a.is_float() && !b.is_float();
  if (op == "+") return ints ? checked_int('+', a.as_int(), b.as_int()) : Value(a.as_float() + b.as_float());
  if (op == "-") return ints ? checked_int('-', a.as_int(), b.as_int()) : Value(a.as_float() - b.as_float());
  if (op == "*") return ints ? checked_int('*', a.as_int(), b.as_int()) : Value(a.as_float() * b.as_float());
  if (op == "**") return ints ? int_power(a.as_int(), b.as_int()) : Value(std::pow(a.as_float(), b.as_float()));
  if (b.as_float() == 0.0) return invalid_argument(op == "/" ? "division by zero" : "integer division or modulo by zero");
  if (op == "/") return Value(a.as_float() / b.as_float());
  if (ints && a.as_int() == INT64_MIN && b.as_int() == -1) return invalid_argument("integer overflow");
  if (op == "//") return ints ? Value(floor_div(a.as_int(), b.as_int())) : Value(std::floor(a.as_float() / b.as_float()));
  return ints ? Value(a.as_int() - floor_div(a.as_int(), b.as_int()) * b.as_int()) : Value(float_mod(a.as_float(), b.as_float()));
}

// "abc" * 3, [1] * 3.
Expected<Value> repeat(const Value& seq, std::int64_t n) {
  const std::size_t count = n < 0 ? 0 : static_cast<std::size_t>(n);
  const std::size_t unit = seq.is_string() ? seq.string().size() : seq.list().items.size();
  if (unit != 0 && count > kMaxBuiltSize / unit) return too_large();
  if (seq.is_string()) {
    std::string out;
    for (std::size_t i = 0; i < count; ++i) out += seq.string();
    return Value(std::move(out));
  }
  std::vector<Value> out;
  for (std::size_t i = 0; i < count; ++i) out.insert(out.end(), seq.list().items.begin(), seq.list().items.end());
  return make_list(std::move(out));
}

Expected<Value> concatenate(const Value& a, const Value& b) {
  if (a.is_string()) {
    if (a.string().size() + b.string().size() > kMaxBuiltSize) return too_large();
    return Value(a.string() + b.string());
  }
  if (a.list().items.size() + b.list().items.size() > kMaxBuiltSize) return too_large();
  std::vector<Value> out = a.list().items;
  out.insert(out.end(), b.list().items.begin(), b.list().items.end());
  return make_list(std::move(out));
}

Expected<Value> comparison(std::string_view op, const Value& a, const Value& b) {
  if (op == "==") return Value(equals(a, b));
  if (op == "!=") return Value(!equals(a, b));
  if (op == "in" || op == "not in") {
    PEREGRINE_ASSIGN_OR_RETURN(const bool in, contains(b, a));
    return Value(in == (op == "in"));
  }
  const bool swap = op == ">" || op == "<=";
  PEREGRINE_ASSIGN_OR_RETURN(const bool lt, swap ? less_than(b, a) : less_than(a, b));
  return Value((op == "<" || op == ">") ? lt : !lt);
}

// How jinja2's undefined messages name an object: "None", "dict object", "list object", ...
std::string object_description(const Value& v) {
  if (v.is_none()) return "None";
  return std::string(v.type_name()) + " object";
}

std::int64_t adjust_index(std::optional<std::int64_t> i, std::int64_t len, std::int64_t step, bool is_start) {
  if (!i) return step < 0 ? (is_start ? len - 1 : -1) : (is_start ? 0 : len);
  std::int64_t v = *i;
  if (v < 0) {
    v += len;
    if (v < 0) v = step < 0 ? -1 : 0;
  } else if (v >= len) {
    v = step < 0 ? len - 1 : len;
  }
  return v;
}

}  // namespace

Expected<Value> binary_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = to_str(a) + to_str(b);
    if (s.size() > kMaxBuiltSize) return too_large();
    return Value(std::move(s));
  }
  if (op == "==" || op == "!=" || op == "<" || op == "<=" || op == ">" || op == ">=" || op == "in" || op == "not in") {
    return comparison(op, a, b);
  }
  if (a.is_undefined()) return invalid_argument(a.undefined().what);
  if (b.is_undefined()) return invalid_argument(b.undefined().what);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == "+" && ((a.is_string() && b.is_string()) || (a.is_list() && b.is_list()))) return concatenate(a, b);
  if (op == "*" && (a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
  if (op == "*" && (b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
  if (op == "%" && a.is_string()) return invalid_argument("printf-style string formatting ('...' % x) is not supported");
  return type_error(op, a, b);
}

Expected<Value> negate(const Value& v, bool minus) {
  if (v.is_undefined()) return invalid_argument(v.undefined().what);
  if (!v.is_number()) {
    return invalid_argument(std::string("bad operand type for unary ") + (minus ? "-" : "+") + ": '" + v.type_name() + "'");
  }
  if (!minus) return v.is_float() ? v : Value(v.as_int());
  if (v.is_float()) return Value(-v.floating());
  if (v.as_int() == INT64_MIN) return invalid_argument("integer overflow");
  return Value(-v.as_int());
}

Expected<bool> contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) {
      return invalid_argument(std::string("'in <string>' requires string as left operand, not ") + item.type_name());
    }
    return container.string().find(item.string()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& v : container.list().items) {
      if (equals(v, item)) return true;
    }
    return false;
  }
  if (container.is_dict()) return item.is_string() && container.dict().find(item.string()) != nullptr;
  if (container.is_undefined()) return false;
  return invalid_argument(std::string("argument of type '") + container.type_name() + "' is not iterable");
}

Expected<Value> get_attr(const Value& object, const std::string& name) {
  if (object.is_undefined()) return invalid_argument(object.undefined().what);
  const Value* found = object.is_dict() ? object.dict().find(name) : object.is_namespace() ? object.ns().find(name) : nullptr;
  if (found) return *found;
  std::string what = "'";
  what += object_description(object) + "' has no attribute '" + name + "'";
  return Value(Undefined{std::move(what)});
}

Expected<Value> get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) return invalid_argument(object.undefined().what);
  if (key.is_string()) return get_attr(object, key.string());
  if ((object.is_list() || object.is_string()) && (key.is_int() || key.is_bool())) {
    const std::int64_t len = object.is_list() ? static_cast<std::int64_t>(object.list().items.size()) : py_len(object.string());
    const std::int64_t i = key.as_int() < 0 ? key.as_int() + len : key.as_int();
    if (i >= 0 && i < len) {
      if (object.is_list()) return object.list().items[static_cast<std::size_t>(i)];
      return Value(py_chars(object.string())[static_cast<std::size_t>(i)]);
    }
  }
  return Value(Undefined{object_description(object) + " has no element " + to_repr(key)});
}

Expected<Value> slice(const Value& object, std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
                      std::optional<std::int64_t> step) {
  if (object.is_undefined()) return invalid_argument(object.undefined().what);
  if (!object.is_list() && !object.is_string()) return invalid_argument(std::string("'") + object.type_name() + "' object is not subscriptable");
  const std::int64_t st = step.value_or(1);
  if (st == 0) return invalid_argument("slice step cannot be zero");
  const std::vector<std::string> chars = object.is_string() ? py_chars(object.string()) : std::vector<std::string>{};
  const auto len = static_cast<std::int64_t>(object.is_string() ? chars.size() : object.list().items.size());
  const std::int64_t from = adjust_index(start, len, st, true), to = adjust_index(stop, len, st, false);
  std::string text;
  std::vector<Value> items;
  for (std::int64_t i = from; st > 0 ? i < to : i > to; i += st) {
    if (object.is_string()) {
      text += chars[static_cast<std::size_t>(i)];
    } else {
      items.push_back(object.list().items[static_cast<std::size_t>(i)]);
    }
  }
  return object.is_string() ? Value(std::move(text)) : make_list(std::move(items));
}

Expected<std::vector<Value>> iterate(const Value& v) {
  if (v.is_list()) return v.list().items;
  if (v.is_undefined()) return std::vector<Value>{};
  std::vector<Value> out;
  if (v.is_dict()) {
    for (const auto& [k, unused] : v.dict().items) out.emplace_back(k);
    return out;
  }
  if (v.is_string()) {
    for (auto& ch : py_chars(v.string())) out.emplace_back(std::move(ch));
    return out;
  }
  return invalid_argument(std::string("'") + v.type_name() + "' object is not iterable");
}

Expected<std::int64_t> length(const Value& v) {
  if (v.is_string()) return py_len(v.string());
  if (v.is_list()) return static_cast<std::int64_t>(v.list().items.size());
  if (v.is_dict()) return static_cast<std::int64_t>(v.dict().items.size());
  if (v.is_undefined()) return std::int64_t{0};
  return invalid_argument(std::string("object of type '") + v.type_name() + "' has no len()");
}

Expected<bool> less_than(const Value& a, const Value& b) {
  if (a.is_undefined()) return invalid_argument(a.undefined().what);
  if (b.is_undefined()) return invalid_argument(b.undefined().what);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.string() < b.string();  // UTF-8 byte order is code point order
  if (a.is_list() && b.is_list()) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return less_than(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return invalid_argument(std::string("'<' not supported between instances of '") + a.type_name() + "' and '" +
                          b.type_name() + "'");
}

}  // namespace peregrine::jinja
