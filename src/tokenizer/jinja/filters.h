// Jinja2's built-in filters that chat templates use (`x | name(args)`), plus transformers'
// `tojson`: abs, attr, capitalize, count, d / default, e / escape, first, float, indent, int,
// items, join, last, length, list, lower, map, reject, rejectattr, replace, reverse, round,
// safe, select, selectattr, sort, string, sum, title, tojson, trim, unique, upper.
// Spec: https://jinja.palletsprojects.com/en/3.1.x/templates/#list-of-builtin-filters ;
// transformers' chat_template_utils (tojson = json.dumps(x, ensure_ascii=False, indent=indent,
// separators=separators, sort_keys=sort_keys)).
#pragma once

#include <string_view>

#include "peregrine/core/status.h"
#include "tokenizer/jinja/call_args.h"
#include "tokenizer/jinja/value.h"

namespace peregrine::jinja {

/// `v | name(args)`. Errors: kInvalidArgument for an unknown filter, bad arguments, or a value
/// the filter cannot take (e.g. `items` of a list, `tojson` of undefined).
Expected<Value> apply_filter(std::string_view name, const Value& v, const CallArgs& args);

/// Looks up `path` ("a.b.0") in `v` the way filters' attribute= arguments do: each part a key
/// or, when all digits, an index. Missing parts give undefined.
/// Errors: kInvalidArgument when an intermediate value is undefined.
Expected<Value> get_attribute_path(const Value& v, const std::string& path);

}  // namespace peregrine::jinja
