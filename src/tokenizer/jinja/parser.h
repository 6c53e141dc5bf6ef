// Jinja2 template parser: tokens → statement tree, with Jinja2's operator precedence
// (lowest first): `x if c else y`, or, and, not, comparisons / in / not in, + -, ~, * / // %,
// **, unary - +, then postfix (.attr, [index], [a:b:c], (call)), filters `|` and tests `is`.
// Statements: if / elif / else, for (tuple targets, `if` filter, else), set (names, tuples,
// namespace attributes, blocks), filter blocks, break / continue, transformers' generation.
// Spec: https://jinja.palletsprojects.com/en/3.1.x/templates/ , jinja2/parser.py.
#pragma once

#include <string_view>

#include "peregrine/core/status.h"
#include "tokenizer/jinja/ast.h"

namespace peregrine::jinja {

/// Maximum nesting of expressions and blocks (deeper templates are rejected, not recursed into).
inline constexpr int kMaxParseDepth = 128;

/// Parses a whole template. Errors: kInvalidArgument "chat template line L: ..." for syntax
/// errors, unknown tags, unclosed blocks and nesting deeper than kMaxParseDepth.
Expected<Body> parse_template(std::string_view source);

}  // namespace peregrine::jinja
