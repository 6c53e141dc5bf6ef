#include "tokenizer/jinja/tests.h"

#include <algorithm>
#include <array>
#include <utility>

#include "tokenizer/jinja/operations.h"

namespace peregrine::jinja {
namespace {

// Tests without arguments: a predicate of the value alone.
bool type_test(std::string_view name, const Value& v, bool* known) {
  *known = true;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.boolean();
  if (name == "false") return v.is_bool() && !v.boolean();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable" || name == "sequence") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "callable" || name == "escaped") return false;
  *known = false;
  return false;
}

// str.islower() / isupper(): some cased character, none of the other case (ASCII letters).
bool has_case(const std::string& s, bool lower) {
  const auto is_lower = [](char c) { return c >= 'a' && c <= 'z'; };
  const auto is_upper = [](char c) { return c >= 'A' && c <= 'Z'; };
  const bool any = std::any_of(s.begin(), s.end(), lower ? is_lower : is_upper);
  const bool other = std::any_of(s.begin(), s.end(), lower ? is_upper : is_lower);
  return any && !other;
}

constexpr std::array<std::pair<std::string_view, std::string_view>, 15> kComparisonTests = {{
    {"eq", "=="}, {"equalto", "=="}, {"==", "=="}, {"ne", "!="}, {"!=", "!="},
    {"lt", "<"},  {"lessthan", "<"}, {"<", "<"},   {"le", "<="}, {"<=", "<="},
    {"gt", ">"},  {"greaterthan", ">"}, {">", ">"}, {"ge", ">="}, {">=", ">="},
}};

Expected<bool> modulo_test(const Value& v, const Value& divisor, std::int64_t remainder) {
  PEREGRINE_ASSIGN_OR_RETURN(const Value r, binary_op("%", v, divisor));
  return equals(r, Value(remainder));
}

}  // namespace

Expected<bool> apply_test(std::string_view name, const Value& v, const CallArgs& args) {
  bool known = false;
  const bool result = type_test(name, v, &known);
  const std::string fn = std::string("test ").append(name);
  if (known) {
    PEREGRINE_RETURN_IF_ERROR(expect_no_args(fn, args));
    return result;
  }
  for (const auto& [test, op] : kComparisonTests) {
    if (name != test) continue;
    PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args(fn, args, {{"other", std::nullopt}}));
    PEREGRINE_ASSIGN_OR_RETURN(const Value r, binary_op(op, v, a[0]));
    return r.truthy();
  }
  if (name == "even" || name == "odd") {
    PEREGRINE_RETURN_IF_ERROR(expect_no_args(fn, args));
    return modulo_test(v, Value(2), name == "odd" ? 1 : 0);
  }
  if (name == "divisibleby") {
    PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args(fn, args, {{"num", std::nullopt}}));
    return modulo_test(v, a[0], 0);
  }
  if (name == "in") {
    PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args(fn, args, {{"seq", std::nullopt}}));
    return contains(a[0], v);
  }
  if (name == "sameas") {
    PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args(fn, args, {{"other", std::nullopt}}));
    return std::string_view(v.type_name()) == a[0].type_name() && equals(v, a[0]);
  }
  if (name == "lower" || name == "upper") {
    PEREGRINE_RETURN_IF_ERROR(expect_no_args(fn, args));
    return has_case(to_str(v), name == "lower");
  }
  return invalid_argument(std::string("no test named '").append(name) + "'");
}

}  // namespace peregrine::jinja
