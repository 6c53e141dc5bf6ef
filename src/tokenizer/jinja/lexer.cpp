#include "tokenizer/jinja/lexer.h"

#include <algorithm>
#include <array>
#include <limits>

#include "peregrine/tokenizer/utf8.h"

namespace peregrine::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
int hex_digit(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// \r\n and \r become \n; one trailing newline is dropped (jinja2 keep_trailing_newline=False).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      out += '\n';
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

constexpr std::array<std::string_view, 6> kTwoCharOperators = {"//", "**", "==", "!=", "<=", ">="};
constexpr std::string_view kOneCharOperators = "+-*/%~<>()[]{},.:|=;";

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_newlines(source)) {}

  Expected<std::vector<Token>> run() {
    while (pos_ < src_.size()) PEREGRINE_RETURN_IF_ERROR(next_tag());
    push(TokenKind::kEnd, "");
    return std::move(tokens_);
  }

 private:
  Status error(const std::string& message) const {
    return invalid_argument("chat template line " + std::to_string(line_) + ": " + message);
  }
  bool at(std::string_view s) const { return src_.compare(pos_, s.size(), s) == 0; }
  void push(TokenKind kind, std::string text) { tokens_.push_back(Token{kind, std::move(text), line_, 0, 0.0}); }
  // Moves to `to`, counting the newlines passed.
  void advance_to(std::size_t to) {
    line_ += static_cast<int>(std::count(src_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                         src_.begin() + static_cast<std::ptrdiff_t>(to), '\n'));
    pos_ = to;
  }
  void skip_whitespace() {
    std::size_t p = pos_;
    while (p < src_.size() && is_space(src_[p])) ++p;
    advance_to(p);
  }

  std::size_t find_tag_start(std::size_t from) const {
    for (std::size_t p = src_.find('{', from); p != std::string::npos; p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) return p;
    }
    return src_.size();
  }

  // Text before a tag, with the tag's `-` (strip all whitespace) or lstrip_blocks applied.
  void emit_text(std::string text, char control, bool lstrip_applies) {
    if (control == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (control != '+' && lstrip_applies) {
      const std::size_t line_start = text.rfind('\n') + 1;  // npos + 1 == 0
      const bool only_blanks = std::all_of(text.begin() + static_cast<std::ptrdiff_t>(line_start), text.end(), is_space);
      if ((line_start > 0 || line_starting_) && only_blanks) text.resize(line_start);
    }
    if (!text.empty()) tokens_.push_back(Token{TokenKind::kText, std::move(text), text_line_, 0, 0.0});
  }

  // After a block or comment end marker: `-` strips all whitespace, trim_blocks one newline.
  void after_block_end(char control) {
    const std::size_t before = pos_;
    if (control == '-') {
      skip_whitespace();
    } else if (control != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      advance_to(pos_ + 1);
    }
    line_starting_ = pos_ > before && src_[pos_ - 1] == '\n';
  }

  Status next_tag() {
    const std::size_t start = find_tag_start(pos_);
    text_line_ = line_;
    std::string text = src_.substr(pos_, start - pos_);
    advance_to(start);
    if (start == src_.size()) {
      emit_text(std::move(text), 0, false);
      return Status::ok();
    }
    const char kind = src_[start + 1];
    const char control = (start + 2 < src_.size() && (src_[start + 2] == '-' || src_[start + 2] == '+')) ? src_[start + 2] : 0;
    emit_text(std::move(text), control, kind != '{');
    advance_to(start + 2 + (control ? 1 : 0));
    if (kind == '#') return comment();
    if (kind == '%' && raw_begin()) return raw_body();
    push(kind == '{' ? TokenKind::kVariableBegin : TokenKind::kBlockBegin, kind == '{' ? "{{" : "{%");
    return expression_tokens(kind == '{');
  }

  Status comment() {
    const std::size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) return error("unterminated comment");
    const char control = (end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+')) ? src_[end - 1] : 0;
    advance_to(end + 2);
    after_block_end(control);
    return Status::ok();
  }

  // `\s*raw\s*(-)?%}` after "{%": consumes it and returns true.
  bool raw_begin() {
    std::size_t p = pos_;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0 || (p + 3 < src_.size() && is_name_char(src_[p + 3]))) return false;
    p += 3;
    while (p < src_.size() && is_space(src_[p])) ++p;
    const bool strip = src_.compare(p, 3, "-%}") == 0;
    if (!strip && src_.compare(p, 2, "%}") != 0) return false;
    advance_to(p + (strip ? 3 : 2));
    if (strip) skip_whitespace();
    line_starting_ = false;
    return true;
  }

  // The text up to {% endraw %}, then that tag's end.
  Status raw_body() {
    for (std::size_t p = src_.find("{%", pos_); p != std::string::npos; p = src_.find("{%", p + 1)) {
      std::size_t q = p + 2;
      const char control = (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ? src_[q] : 0;
      if (control) ++q;
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < src_.size() && is_space(src_[q])) ++q;
      const char end_control = (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ? src_[q] : 0;
      if (src_.compare(q + (end_control ? 1 : 0), 2, "%}") != 0) continue;
      text_line_ = line_;
      emit_text(src_.substr(pos_, p - pos_), control, true);
      advance_to(q + (end_control ? 3 : 2));
      after_block_end(end_control);
      return Status::ok();
    }
    return error("missing {% endraw %}");
  }

  Status expression_tokens(bool variable) {
    std::string brackets;  // open ( [ { awaiting their closers
    while (true) {
      skip_whitespace();
      if (pos_ >= src_.size()) return error(variable ? "unclosed '{{'" : "unclosed '{%'");
      if (brackets.empty() && end_of_tag(variable)) return Status::ok();
      const char c = src_[pos_];
      if (is_name_start(c)) {
        name();
      } else if (is_digit(c)) {
        PEREGRINE_RETURN_IF_ERROR(number());
      } else if (c == '\'' || c == '"') {
        PEREGRINE_RETURN_IF_ERROR(string_literal());
      } else {
        PEREGRINE_RETURN_IF_ERROR(operator_token(brackets));
      }
    }
  }

  bool end_of_tag(bool variable) {
    const std::string_view close = variable ? "}}" : "%}";
    char control = 0;
    if ((at("-") || (!variable && at("+"))) && src_.compare(pos_ + 1, 2, close) == 0) control = src_[pos_];
    if (!control && !at(close)) return false;
    push(variable ? TokenKind::kVariableEnd : TokenKind::kBlockEnd, std::string(close));
    advance_to(pos_ + 2 + (control ? 1 : 0));
    if (variable) {
      const std::size_t before = pos_;
      if (control == '-') skip_whitespace();
      line_starting_ = pos_ > before && src_[pos_ - 1] == '\n';
    } else {
      after_block_end(control);
    }
    return true;
  }

  void name() {
    std::size_t p = pos_;
    while (p < src_.size() && is_name_char(src_[p])) ++p;
    push(TokenKind::kName, src_.substr(pos_, p - pos_));
    advance_to(p);
  }

  // Digits with single underscores between them; returns the end and appends the digits.
  std::size_t digits(std::size_t p, std::string& out) const {
    while (p < src_.size() && (is_digit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1])))) {
      if (src_[p] != '_') out += src_[p];
      ++p;
    }
    return p;
  }

  Status number() {
    std::string text;
    std::size_t p = digits(pos_, text);
    bool is_float = false;
    const bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';  // `x.0` is attribute 0, not a float
    if (!after_dot && p + 1 < src_.size() && src_[p] == '.' && is_digit(src_[p + 1])) {
      text += '.';
      p = digits(p + 1, text);
      is_float = true;
    }
    if (!after_dot && p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      std::size_t q = p + 1;
      std::string exp = "e";
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) exp += src_[q++];
      if (q < src_.size() && is_digit(src_[q])) {
        p = digits(q, exp);
        text += exp;
        is_float = true;
      }
    }
    Token t{is_float ? TokenKind::kFloat : TokenKind::kInteger, text, line_, 0, 0.0};
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      for (char d : text) {
        if (t.int_value > (std::numeric_limits<std::int64_t>::max() - (d - '0')) / 10) {
          return error("integer literal " + text + " is too large");
        }
        t.int_value = t.int_value * 10 + (d - '0');
      }
    }
    tokens_.push_back(std::move(t));
    advance_to(p);
    return Status::ok();
  }

  // Python's unicode-escape decoding of one escape at src_[p] (just after the backslash);
  // returns the position after it.
  Expected<std::size_t> escape(std::size_t p, std::string& out) const {
    const char c = src_[p];
    switch (c) {
      case 'n': out += '\n'; return p + 1;
      case 't': out += '\t'; return p + 1;
      case 'r': out += '\r'; return p + 1;
      case 'a': out += '\a'; return p + 1;
      case 'b': out += '\b'; return p + 1;
      case 'f': out += '\f'; return p + 1;
      case 'v': out += '\v'; return p + 1;
      case '\n': return p + 1;
      case '\\': case '\'': case '"': out += c; return p + 1;
      default: break;
    }
    if (c >= '0' && c <= '7') {
      std::uint32_t cp = 0;
      std::size_t q = p;
      for (; q < p + 3 && q < src_.size() && src_[q] >= '0' && src_[q] <= '7'; ++q) cp = cp * 8 + static_cast<std::uint32_t>(src_[q] - '0');
      utf8_append(cp, out);
      return q;
    }
    const int n_hex = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    if (n_hex == 0) {  // unknown escapes stay as written
      out += '\\';
      return p;
    }
    std::uint32_t cp = 0;
    for (int i = 1; i <= n_hex; ++i) {
      const int h = p + static_cast<std::size_t>(i) < src_.size() ? hex_digit(src_[p + static_cast<std::size_t>(i)]) : -1;
      if (h < 0) return error(std::string("truncated \\") + c + " escape in a string literal");
      cp = cp * 16 + static_cast<std::uint32_t>(h);
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return error("escape of an invalid code point in a string literal");
    utf8_append(cp, out);
    return p + 1 + static_cast<std::size_t>(n_hex);
  }

  Status string_literal() {
    const char quote = src_[pos_];
    std::string value;
    std::size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) {
      if (src_[p] == '\\' && p + 1 < src_.size()) {
        PEREGRINE_ASSIGN_OR_RETURN(p, escape(p + 1, value));
      } else {
        value += src_[p++];
      }
    }
    if (p >= src_.size()) return error("unterminated string literal");
    push(TokenKind::kString, std::move(value));
    advance_to(p + 1);
    return Status::ok();
  }

  Status operator_token(std::string& brackets) {
    for (std::string_view op : kTwoCharOperators) {
      if (at(op)) {
        push(TokenKind::kOperator, std::string(op));
        advance_to(pos_ + 2);
        return Status::ok();
      }
    }
    const char c = src_[pos_];
    if (kOneCharOperators.find(c) == std::string_view::npos) {
      return error(std::string("unexpected character '") + c + "'");
    }
    if (c == '(' || c == '[' || c == '{') brackets += c;
    if (c == ')' || c == ']' || c == '}') {
      const char open = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (brackets.empty() || brackets.back() != open) return error(std::string("unexpected '") + c + "'");
      brackets.pop_back();
    }
    push(TokenKind::kOperator, std::string(1, c));
    advance_to(pos_ + 1);
    return Status::ok();
  }

  std::string src_;
  std::size_t pos_ = 0;
  int line_ = 1;
  int text_line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

Expected<std::vector<Token>> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace peregrine::jinja
