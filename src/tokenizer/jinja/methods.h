// Methods templates call on values (`x.name(args)`), as the immutable sandbox allows them:
// str.strip / lstrip / rstrip / split / startswith / endswith / upper / lower / title /
// capitalize / replace / join / find / count, dict.items / keys / values / get.
// Spec: https://docs.python.org/3/library/stdtypes.html (str and dict methods).
#pragma once

#include <string_view>

#include "peregrine/core/status.h"
#include "tokenizer/jinja/call_args.h"
#include "tokenizer/jinja/value.h"

namespace peregrine::jinja {

/// `object.name(args)`. Errors: kInvalidArgument for an unknown method ("'str object' has no
/// method 'foo'"), bad arguments, an undefined object.
Expected<Value> call_method(const Value& object, std::string_view name, const CallArgs& args);

}  // namespace peregrine::jinja
