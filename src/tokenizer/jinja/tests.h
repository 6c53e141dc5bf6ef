// Jinja2's built-in tests (`x is name(args)`): defined, undefined, none, boolean, true, false,
// integer, float, number, string, mapping, iterable, sequence, callable, even, odd,
// divisibleby, lower, upper, in, sameas, escaped, and the comparisons eq / equalto / ==, ne /
// !=, lt / <, le / <=, gt / >, ge / >=.
// Spec: https://jinja.palletsprojects.com/en/3.1.x/templates/#list-of-builtin-tests
#pragma once

#include <string_view>

#include "peregrine/core/status.h"
#include "tokenizer/jinja/call_args.h"
#include "tokenizer/jinja/value.h"

namespace peregrine::jinja {

/// Whether test `name` holds for `v`. Errors: kInvalidArgument for an unknown test, bad
/// arguments, or an operation the test applies failing (e.g. `odd` of a string).
Expected<bool> apply_test(std::string_view name, const Value& v, const CallArgs& args);

}  // namespace peregrine::jinja
