// Arguments of a filter, test, method or global function call, bound to named parameters the
// way Python binds them (positional first, then keywords; defaults for the rest).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "peregrine/core/status.h"
#include "tokenizer/jinja/value.h"

namespace peregrine::jinja {

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

/// A parameter: its name and default (nullopt: required).
struct Param {
  std::string_view name;
  std::optional<Value> default_value;
};

/// The values of `params` in order. Errors: kInvalidArgument naming `function` for too many
/// positional arguments, an unknown or repeated keyword, or a missing required argument.
Expected<std::vector<Value>> bind_args(std::string_view function, const CallArgs& args, std::initializer_list<Param> params);

/// Errors: kInvalidArgument "<function>() takes no arguments" when `args` is not empty.
Status expect_no_args(std::string_view function, const CallArgs& args);

/// `v` as an int (bool counts). Errors: kInvalidArgument "<what> must be an integer".
Expected<std::int64_t> int_arg(const Value& v, std::string_view what);
/// `v` as a string. Errors: kInvalidArgument "<what> must be a string".
Expected<std::string> string_arg(const Value& v, std::string_view what);
/// `v` as a string, or nullopt for none / undefined. Errors: kInvalidArgument for other types.
Expected<std::optional<std::string>> optional_string_arg(const Value& v, std::string_view what);

}  // namespace peregrine::jinja
