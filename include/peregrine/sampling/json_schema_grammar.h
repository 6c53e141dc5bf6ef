// JSON Schema → GBNF (grammar.h), for OpenAI's response_format {"type": "json_schema"}: the
// grammar generates only JSON texts the schema accepts (as llama.cpp's json-schema-to-grammar
// and XGrammar do), in the subset OpenAI's structured outputs document:
//   type (one or a list), properties / required / additionalProperties, items / minItems /
//   maxItems / prefixItems, enum, const, anyOf / oneOf (as alternatives), $ref to #/$defs/NAME
//   or #/definitions/NAME (recursion allowed), string minLength / maxLength / pattern (a regular
//   expression: literals, escapes \d \w \s, classes, groups, |, ?, *, +, {m,n}, anchors ^ $) /
//   format (date, time, date-time, uuid; other formats are annotations, as JSON Schema says),
//   and the annotations title, description, default, examples, $schema, $id, $comment, strict.
// Objects are written with their required properties first, in schema order, then the optional
// ones in order, each at most once: every text is valid, not every valid text is generated.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "peregrine/core/status.h"

namespace peregrine {

/// A GBNF string literal spelling `text` exactly (quotes and backslashes escaped, control
/// bytes as \xHH).
std::string gbnf_literal(std::string_view text);

/// The GBNF of `schema` (ordered: properties are generated in the schema's order). Errors: kInvalidArgument naming the keyword and where it is (a JSON
/// pointer) for a keyword outside the subset above (minimum, multipleOf, allOf, not, ...), a
/// $ref that does not resolve, a malformed value (a "required" that is not a list of strings,
/// minItems > maxItems, a pattern this converter cannot read).
Expected<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema);

}  // namespace peregrine
