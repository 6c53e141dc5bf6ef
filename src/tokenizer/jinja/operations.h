// Python's operators and item access on template values, as jinja2's sandboxed environment
// applies them: arithmetic (+ - * / // % **, ints checked for overflow), ~ concatenation,
// comparisons, `in`, attribute and subscript lookup (missing → undefined), slicing, iteration.
// Errors are plain messages (the evaluator adds the line): Python's TypeError / ZeroDivisionError
// wording, and "'x' is undefined" for an undefined operand.
// Spec: https://jinja.palletsprojects.com/en/3.1.x/templates/#expressions , Python 3 semantics.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/core/status.h"
#include "tokenizer/jinja/value.h"

namespace peregrine::jinja {

/// Longest string or list a template may build (bytes / items); longer results are errors.
inline constexpr std::size_t kMaxBuiltSize = std::size_t{64} << 20;

/// `a op b` for op in + - * / // % ** ~ == != < <= > >= in "not in" (not and / or).
/// Errors: kInvalidArgument for unsupported operand types, division by zero, int overflow,
/// results over kMaxBuiltSize, undefined operands where Python would fail.
Expected<Value> binary_op(std::string_view op, const Value& a, const Value& b);
/// -x / +x. Errors: kInvalidArgument for non-numbers.
Expected<Value> negate(const Value& v, bool minus);
/// `item in container`. Errors: kInvalidArgument when `container` is not iterable.
Expected<bool> contains(const Value& container, const Value& item);
/// `x.name`: a dict's key or a namespace's attribute, else undefined.
/// Errors: kInvalidArgument when `x` is undefined.
Expected<Value> get_attr(const Value& object, const std::string& name);
/// `x[key]`: dict key, list / string index (negative from the end), else undefined.
/// Errors: kInvalidArgument when `x` is undefined.
Expected<Value> get_item(const Value& object, const Value& key);
/// `x[start:stop:step]` of a list or string (Python's slice rules); absent parts are nullopt.
/// Errors: kInvalidArgument (step 0, non-integer bounds, not a list / string).
Expected<Value> slice(const Value& object, std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
                      std::optional<std::int64_t> step);
/// The items `for x in v` visits: list items, dict keys, string characters, nothing for
/// undefined. Errors: kInvalidArgument "'int' object is not iterable" and the like.
Expected<std::vector<Value>> iterate(const Value& v);
/// len(v) of a string (code points), list or dict; 0 for undefined.
/// Errors: kInvalidArgument "object of type 'int' has no len()".
Expected<std::int64_t> length(const Value& v);
/// Python's `<` on numbers, strings (code point order) and lists.
/// Errors: kInvalidArgument "'<' not supported between instances of ...".
Expected<bool> less_than(const Value& a, const Value& b);

}  // namespace peregrine::jinja
