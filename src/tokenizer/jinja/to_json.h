// The `tojson` filter as transformers defines it for chat templates:
// json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=sort_keys).
// Spec: https://docs.python.org/3/library/json.html#json.dumps (separators ", " / ": ", or
// "," / ": " with an indent; non-ASCII characters written as they are).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "peregrine/core/status.h"
#include "tokenizer/jinja/value.h"

namespace peregrine::jinja {

/// JSON text of `v`; `indent` spaces per level (nullopt: one line). Errors: kInvalidArgument
/// "Object of type Undefined is not JSON serializable" (undefined, namespace).
Expected<std::string> to_json(const Value& v, std::optional<int> indent, bool sort_keys);

/// The template value of parsed JSON, as json.loads gives it to transformers: objects as dicts in
/// their order, arrays as lists, null as None.
Value from_json(const nlohmann::ordered_json& j);

}  // namespace peregrine::jinja
