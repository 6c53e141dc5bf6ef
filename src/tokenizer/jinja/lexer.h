// Jinja2 template lexer: splits a template into text and the tokens of its {{ }} and {% %}
// tags (comments {# #} dropped), applying Jinja2's whitespace control with transformers'
// settings: `-` on a tag side strips all whitespace on that side; trim_blocks drops the first
// newline after a block or comment tag; lstrip_blocks drops spaces and tabs from the start of
// a line up to a block or comment tag (`+` turns either off for that tag). {% raw %} bodies
// come out as text. Newlines are normalized to \n and one trailing newline is dropped
// (keep_trailing_newline=False).
// Spec: https://jinja.palletsprojects.com/en/3.1.x/templates/#whitespace-control , jinja2/lexer.py.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/core/status.h"

namespace peregrine::jinja {

enum class TokenKind : std::uint8_t {
  kText,           // template text outside tags
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,           // identifier (keywords included: if, for, in, not, and, ...)
  kString,         // string literal, escapes already decoded
  kInteger,
  kFloat,
  kOperator,       // + - * / // % ** ~ == != < <= > >= ( ) [ ] { } , . : | =
  kEnd,            // end of the template
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;  // text / name / decoded string / operator
  int line = 1;      // 1-based line of the token's start
  std::int64_t int_value = 0;
  double float_value = 0.0;
};

/// Tokens of `source`, ending with kEnd. Errors: kInvalidArgument "chat template line L: ..."
/// (unterminated tag, comment or string, unknown character, unbalanced brackets, integer overflow).
Expected<std::vector<Token>> tokenize(std::string_view source);

}  // namespace peregrine::jinja
