// Global functions a chat template can call: jinja2's range, namespace and dict, and the two
// transformers adds for chat templates, raise_exception(message) and strftime_now(format).
// Spec: https://jinja.palletsprojects.com/en/3.1.x/templates/#list-of-global-functions ;
// transformers' chat_template_utils._compile_jinja_template.
#pragma once

#include <string_view>

#include "peregrine/core/status.h"
#include "tokenizer/jinja/call_args.h"
#include "tokenizer/jinja/value.h"

namespace peregrine::jinja {

/// Most items range() may produce.
inline constexpr std::int64_t kMaxRangeLength = std::int64_t{1} << 20;

/// Whether `name` is one of the global functions.
bool is_global_function(std::string_view name);

/// Calls global function `name`. Errors: kInvalidArgument with the template's message for
/// raise_exception, bad arguments, a range longer than kMaxRangeLength.
Expected<Value> call_global(std::string_view name, const CallArgs& args);

}  // namespace peregrine::jinja
