#include "tokenizer/jinja/parser.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <utility>

#include "tokenizer/jinja/lexer.h"

namespace peregrine::jinja {
namespace {

template <typename Node>
ExprPtr make_expr(int line, Node node) {
  auto e = std::make_unique<Expr>();
  e->line = line;
  e->node = std::move(node);
  return e;
}

// Counts one level of nesting for as long as it lives.
class DepthGuard {
 public:
  explicit DepthGuard(int& depth) : depth_(depth) { ++depth_; }
  ~DepthGuard() { --depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;
  bool too_deep() const { return depth_ > kMaxParseDepth; }

 private:
  int& depth_;
};

constexpr std::array<std::string_view, 6> kComparisons = {"==", "!=", "<", "<=", ">", ">="};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Expected<Body> parse() { return body({}, nullptr); }

 private:
  const Token& peek(std::size_t k = 0) const { return toks_[std::min(i_ + k, toks_.size() - 1)]; }
  const Token& next() { return toks_[std::min(i_++, toks_.size() - 1)]; }
  bool is_op(std::string_view op, std::size_t k = 0) const {
    return peek(k).kind == TokenKind::kOperator && peek(k).text == op;
  }
  bool is_name(std::string_view name, std::size_t k = 0) const {
    return peek(k).kind == TokenKind::kName && peek(k).text == name;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::kEnd: return "end of template";
      case TokenKind::kText: return "template text";
      case TokenKind::kString: return "string literal";
      default: return "'" + t.text + "'";
    }
  }
  Status error(const std::string& message) const { return error_at(peek().line, message); }
  static Status error_at(int line, const std::string& message) {
    return invalid_argument("chat template line " + std::to_string(line) + ": " + message);
  }
  Status unexpected(const std::string& expected) const {
    return error("expected " + expected + ", got " + describe(peek()));
  }
  Status expect_op(std::string_view op) {
    if (!is_op(op)) return unexpected(std::string("'").append(op) + "'");
    ++i_;
    return Status::ok();
  }
  Status expect(TokenKind kind, const char* what) {
    if (peek().kind != kind) return unexpected(what);
    ++i_;
    return Status::ok();
  }
  Expected<std::string> expect_name() {
    if (peek().kind != TokenKind::kName) return unexpected("a name");
    return next().text;
  }
  Status expect_block_end() { return expect(TokenKind::kBlockEnd, "'%}'"); }

  // ---- statements ----

  // Statements up to a `{% tag %}` with a tag in `ends` (its name consumed, stored in *end) or
  // the end of the template when `ends` is empty.
  Expected<Body> body(std::initializer_list<std::string_view> ends, std::string* end) {
    DepthGuard guard(depth_);
    if (guard.too_deep()) return error("blocks nested too deeply");
    Body out;
    while (true) {
      const Token& t = peek();
      if (t.kind == TokenKind::kEnd) {
        if (ends.size() == 0) return out;
        return error(std::string("unexpected end of template, expected '").append(*(ends.end() - 1)) + "'");
      }
      if (t.kind == TokenKind::kBlockBegin && peek(1).kind == TokenKind::kName &&
          std::find(ends.begin(), ends.end(), peek(1).text) != ends.end()) {
        i_ += 2;
        *end = toks_[i_ - 1].text;
        return out;
      }
      PEREGRINE_ASSIGN_OR_RETURN(Stmt s, statement());
      out.push_back(std::move(s));
    }
  }

  Expected<Stmt> statement() {
    const Token& t = next();
    Stmt s{t.line, TextStmt{}};
    if (t.kind == TokenKind::kText) {
      s.node = TextStmt{t.text};
      return s;
    }
    if (t.kind == TokenKind::kVariableBegin) {
      PEREGRINE_ASSIGN_OR_RETURN(ExprPtr e, expression(true));
      PEREGRINE_RETURN_IF_ERROR(expect(TokenKind::kVariableEnd, "'}}'"));
      s.node = OutputStmt{std::move(e)};
      return s;
    }
    PEREGRINE_ASSIGN_OR_RETURN(const std::string tag, expect_name());
    if (tag == "if") return if_statement(t.line);
    if (tag == "for") return for_statement(t.line);
    if (tag == "set") return set_statement(t.line);
    if (tag == "filter" || tag == "generation") return filter_block(t.line, tag);
    if (tag == "macro") return macro_statement(t.line);
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) return error_at(s.line, "'" + tag + "' outside of a loop");
      s.node = LoopControlStmt{tag == "break"};
      PEREGRINE_RETURN_IF_ERROR(expect_block_end());
      return s;
    }
    if (tag.starts_with("end") || tag == "else" || tag == "elif") return error_at(s.line, "unexpected '" + tag + "'");
    return error_at(s.line, "unknown or unsupported tag '" + tag + "'");
  }

  Expected<Stmt> if_statement(int line) {
    IfStmt node;
    std::string end = "elif";
    while (end == "elif") {
      PEREGRINE_ASSIGN_OR_RETURN(ExprPtr cond, expression(true));
      PEREGRINE_RETURN_IF_ERROR(expect_block_end());
      PEREGRINE_ASSIGN_OR_RETURN(Body b, body({"elif", "else", "endif"}, &end));
      node.branches.emplace_back(std::move(cond), std::move(b));
    }
    if (end == "else") {
      PEREGRINE_RETURN_IF_ERROR(expect_block_end());
      PEREGRINE_ASSIGN_OR_RETURN(node.otherwise, body({"endif"}, &end));
    }
    PEREGRINE_RETURN_IF_ERROR(expect_block_end());
    return Stmt{line, std::move(node)};
  }

  // name (, name)*, optionally in parentheses.
  Expected<std::vector<std::string>> target_names() {
    const bool paren = is_op("(");
    if (paren) ++i_;
    std::vector<std::string> names;
    do {
      PEREGRINE_ASSIGN_OR_RETURN(std::string n, expect_name());
      names.push_back(std::move(n));
    } while (is_op(",") && (++i_, true));
    if (paren) PEREGRINE_RETURN_IF_ERROR(expect_op(")"));
    return names;
  }

  Expected<Stmt> for_statement(int line) {
    ForStmt node;
    PEREGRINE_ASSIGN_OR_RETURN(node.targets, target_names());
    if (!is_name("in")) return unexpected("'in'");
    ++i_;
    PEREGRINE_ASSIGN_OR_RETURN(node.iterable, expression(false));
    if (is_name("if")) {
      ++i_;
      PEREGRINE_ASSIGN_OR_RETURN(node.filter, expression(true));
    }
    if (is_name("recursive")) return error("recursive loops are not supported");
    PEREGRINE_RETURN_IF_ERROR(expect_block_end());
    std::string end;
    ++loop_depth_;
    auto loop_body = body({"else", "endfor"}, &end);
    --loop_depth_;
    if (!loop_body) return loop_body.status();
    node.body = std::move(*loop_body);
    if (end == "else") {
      PEREGRINE_RETURN_IF_ERROR(expect_block_end());
      PEREGRINE_ASSIGN_OR_RETURN(node.otherwise, body({"endfor"}, &end));
    }
    PEREGRINE_RETURN_IF_ERROR(expect_block_end());
    return Stmt{line, std::move(node)};
  }

  Expected<Stmt> set_statement(int line) {
    SetStmt node;
    if (peek().kind == TokenKind::kName && is_op(".", 1)) {
      node.targets.push_back(next().text);
      ++i_;
      PEREGRINE_ASSIGN_OR_RETURN(node.attr, expect_name());
    } else {
      PEREGRINE_ASSIGN_OR_RETURN(node.targets, target_names());
    }
    if (is_op("=")) {
      ++i_;
      PEREGRINE_ASSIGN_OR_RETURN(node.value, tuple_or_expression());
      PEREGRINE_RETURN_IF_ERROR(expect_block_end());
    } else {
      if (!node.attr.empty() || node.targets.size() != 1) return unexpected("'='");
      PEREGRINE_RETURN_IF_ERROR(expect_block_end());
      std::string end;
      PEREGRINE_ASSIGN_OR_RETURN(node.body, body({"endset"}, &end));
      PEREGRINE_RETURN_IF_ERROR(expect_block_end());
    }
    return Stmt{line, std::move(node)};
  }

  Expected<Stmt> macro_statement(int line) {
    MacroStmt node;
    PEREGRINE_ASSIGN_OR_RETURN(node.name, expect_name());
    PEREGRINE_RETURN_IF_ERROR(expect_op("("));
    while (!is_op(")")) {
      PEREGRINE_ASSIGN_OR_RETURN(std::string param, expect_name());
      ExprPtr default_value;
      if (is_op("=")) {
        ++i_;
        PEREGRINE_ASSIGN_OR_RETURN(default_value, expression(true));
      }
      node.params.emplace_back(std::move(param), std::move(default_value));
      if (!is_op(",")) break;
      ++i_;
    }
    PEREGRINE_RETURN_IF_ERROR(expect_op(")"));
    PEREGRINE_RETURN_IF_ERROR(expect_block_end());
    std::string end;
    const int loops = std::exchange(loop_depth_, 0);  // a break in the body cannot leave a loop around the macro
    auto macro_body = body({"endmacro"}, &end);
    loop_depth_ = loops;
    if (!macro_body) return macro_body.status();
    node.body = std::move(*macro_body);
    PEREGRINE_RETURN_IF_ERROR(expect_block_end());
    return Stmt{line, std::move(node)};
  }

  Expected<Stmt> filter_block(int line, const std::string& tag) {
    FilterBlockStmt node;
    if (tag == "filter") {
      PEREGRINE_ASSIGN_OR_RETURN(node.name, expect_name());
      if (is_op("(")) PEREGRINE_RETURN_IF_ERROR(call_args(node.args));
    }
    PEREGRINE_RETURN_IF_ERROR(expect_block_end());
    std::string end;
    PEREGRINE_ASSIGN_OR_RETURN(node.body, body({tag == "filter" ? "endfilter" : "endgeneration"}, &end));
    PEREGRINE_RETURN_IF_ERROR(expect_block_end());
    return Stmt{line, std::move(node)};
  }

  // ---- expressions ----

  // `a, b, c` (a tuple) or a single expression.
  Expected<ExprPtr> tuple_or_expression() {
    const int line = peek().line;
    PEREGRINE_ASSIGN_OR_RETURN(ExprPtr first, expression(true));
    if (!is_op(",")) return first;
    ListLiteral tuple;
    tuple.items.push_back(std::move(first));
    while (is_op(",")) {
      ++i_;
      if (peek().kind == TokenKind::kBlockEnd) break;
      PEREGRINE_ASSIGN_OR_RETURN(ExprPtr e, expression(true));
      tuple.items.push_back(std::move(e));
    }
    return make_expr(line, std::move(tuple));
  }

  Expected<ExprPtr> expression(bool with_conditional) {
    DepthGuard guard(depth_);
    if (guard.too_deep()) return error("expression nested too deeply");
    PEREGRINE_ASSIGN_OR_RETURN(ExprPtr e, or_expr());
    while (with_conditional && is_name("if")) {
      const int line = next().line;
      PEREGRINE_ASSIGN_OR_RETURN(ExprPtr cond, or_expr());
      ExprPtr otherwise;
      if (is_name("else")) {
        ++i_;
        PEREGRINE_ASSIGN_OR_RETURN(otherwise, expression(true));
      }
      e = make_expr(line, Conditional{std::move(e), std::move(cond), std::move(otherwise)});
    }
    return e;
  }

  template <typename Sub>
  Expected<ExprPtr> binary_chain(std::initializer_list<std::string_view> ops, bool names, Sub sub) {
    PEREGRINE_ASSIGN_OR_RETURN(ExprPtr lhs, (this->*sub)());
    while (true) {
      const Token& t = peek();
      const bool match = (t.kind == (names ? TokenKind::kName : TokenKind::kOperator)) &&
                         std::find(ops.begin(), ops.end(), t.text) != ops.end();
      if (!match) return lhs;
      const std::string op = next().text;
      PEREGRINE_ASSIGN_OR_RETURN(ExprPtr rhs, (this->*sub)());
      lhs = make_expr(t.line, Binary{op, std::move(lhs), std::move(rhs)});
    }
  }
  Expected<ExprPtr> or_expr() { return binary_chain({"or"}, true, &Parser::and_expr); }
  Expected<ExprPtr> and_expr() { return binary_chain({"and"}, true, &Parser::not_expr); }
  Expected<ExprPtr> not_expr() {
    if (!is_name("not")) return compare();
    const int line = next().line;
    DepthGuard guard(depth_);
    if (guard.too_deep()) return error("expression nested too deeply");
    PEREGRINE_ASSIGN_OR_RETURN(ExprPtr operand, not_expr());
    return make_expr(line, Unary{UnaryOp::kNot, std::move(operand)});
  }

  // The comparison operator at the cursor ("==", "in", "not in", ...), or "".
  std::string comparison_op() const {
    if (peek().kind == TokenKind::kOperator &&
        std::find(kComparisons.begin(), kComparisons.end(), peek().text) != kComparisons.end()) {
      return peek().text;
    }
    if (is_name("in")) return "in";
    if (is_name("not") && is_name("in", 1)) return "not in";
    return "";
  }

  Expected<ExprPtr> compare() {
    PEREGRINE_ASSIGN_OR_RETURN(ExprPtr lhs, math1());
    const std::string op = comparison_op();
    if (op.empty()) return lhs;
    const int line = peek().line;
    i_ += op == "not in" ? 2 : 1;
    PEREGRINE_ASSIGN_OR_RETURN(ExprPtr rhs, math1());
    if (!comparison_op().empty()) return error("chained comparisons (a < b < c) are not supported");
    return make_expr(line, Binary{op, std::move(lhs), std::move(rhs)});
  }
  Expected<ExprPtr> math1() { return binary_chain({"+", "-"}, false, &Parser::concat); }
  Expected<ExprPtr> concat() { return binary_chain({"~"}, false, &Parser::math2); }
  Expected<ExprPtr> math2() { return binary_chain({"*", "/", "//", "%"}, false, &Parser::power); }
  Expected<ExprPtr> power() { return binary_chain({"**"}, false, &Parser::unary_with_filters); }
  Expected<ExprPtr> unary_with_filters() { return unary(true); }

  Expected<ExprPtr> unary(bool with_filters) {
    DepthGuard guard(depth_);
    if (guard.too_deep()) return error("expression nested too deeply");
    const int line = peek().line;
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const UnaryOp op = next().text == "-" ? UnaryOp::kNeg : UnaryOp::kPos;
      PEREGRINE_ASSIGN_OR_RETURN(ExprPtr operand, unary(false));
      e = make_expr(line, Unary{op, std::move(operand)});
    } else {
      PEREGRINE_ASSIGN_OR_RETURN(e, primary());
    }
    PEREGRINE_ASSIGN_OR_RETURN(e, postfix(std::move(e)));
    if (with_filters) return filters_and_tests(std::move(e));
    return e;
  }

  Expected<ExprPtr> primary() {
    const Token& t = next();
    switch (t.kind) {
      case TokenKind::kName: return name_or_constant(t);
      case TokenKind::kString: {
        std::string s = t.text;
        while (peek().kind == TokenKind::kString) s += next().text;  // "a" "b" concatenates
        return make_expr(t.line, Literal{Value(std::move(s))});
      }
      case TokenKind::kInteger: return make_expr(t.line, Literal{Value(t.int_value)});
      case TokenKind::kFloat: return make_expr(t.line, Literal{Value(t.float_value)});
      case TokenKind::kOperator:
        if (t.text == "(") return parenthesized(t.line);
        if (t.text == "[") return list_literal(t.line);
        if (t.text == "{") return dict_literal(t.line);
        break;
      default: break;
    }
    --i_;
    return unexpected("an expression");
  }

  static Expected<ExprPtr> name_or_constant(const Token& t) {
    if (t.text == "true" || t.text == "True") return make_expr(t.line, Literal{Value(true)});
    if (t.text == "false" || t.text == "False") return make_expr(t.line, Literal{Value(false)});
    if (t.text == "none" || t.text == "None") return make_expr(t.line, Literal{Value(None{})});
    return make_expr(t.line, Name{t.text});
  }

  // After "(": `()`, `(e)` or a tuple `(a, b)`.
  Expected<ExprPtr> parenthesized(int line) {
    ListLiteral tuple;
    bool is_tuple = is_op(")");
    while (!is_op(")")) {
      PEREGRINE_ASSIGN_OR_RETURN(ExprPtr e, expression(true));
      tuple.items.push_back(std::move(e));
      if (!is_op(",")) break;
      ++i_;
      is_tuple = true;
    }
    PEREGRINE_RETURN_IF_ERROR(expect_op(")"));
    if (!is_tuple) return std::move(tuple.items.front());
    return make_expr(line, std::move(tuple));
  }

  Expected<ExprPtr> list_literal(int line) {
    ListLiteral list;
    while (!is_op("]")) {
      PEREGRINE_ASSIGN_OR_RETURN(ExprPtr e, expression(true));
      list.items.push_back(std::move(e));
      if (!is_op(",")) break;
      ++i_;
    }
    PEREGRINE_RETURN_IF_ERROR(expect_op("]"));
    return make_expr(line, std::move(list));
  }

  Expected<ExprPtr> dict_literal(int line) {
    DictLiteral dict;
    while (!is_op("}")) {
      PEREGRINE_ASSIGN_OR_RETURN(ExprPtr key, expression(true));
      PEREGRINE_RETURN_IF_ERROR(expect_op(":"));
      PEREGRINE_ASSIGN_OR_RETURN(ExprPtr value, expression(true));
      dict.items.emplace_back(std::move(key), std::move(value));
      if (!is_op(",")) break;
      ++i_;
    }
    PEREGRINE_RETURN_IF_ERROR(expect_op("}"));
    return make_expr(line, std::move(dict));
  }

  Expected<ExprPtr> postfix(ExprPtr e) {
    while (true) {
      const int line = peek().line;
      if (is_op(".")) {
        ++i_;
        if (peek().kind == TokenKind::kInteger) {  // x.0 is x[0]
          e = make_expr(line, GetItem{std::move(e), make_expr(line, Literal{Value(next().int_value)})});
          continue;
        }
        PEREGRINE_ASSIGN_OR_RETURN(std::string attr, expect_name());
        e = make_expr(line, GetAttr{std::move(e), std::move(attr)});
      } else if (is_op("[")) {
        ++i_;
        PEREGRINE_ASSIGN_OR_RETURN(e, subscript(std::move(e), line));
      } else if (is_op("(")) {
        PEREGRINE_ASSIGN_OR_RETURN(e, call(std::move(e), line));
      } else {
        return e;
      }
    }
  }

  // After "[": `i]` or a slice `start:stop:step]` (each part optional).
  Expected<ExprPtr> subscript(ExprPtr object, int line) {
    ExprPtr parts[3];
    int n_colons = 0;
    while (true) {
      if (!is_op(":") && !is_op("]")) {
        PEREGRINE_ASSIGN_OR_RETURN(parts[n_colons], expression(true));
      }
      if (!is_op(":") || n_colons == 2) break;
      ++i_;
      ++n_colons;
    }
    PEREGRINE_RETURN_IF_ERROR(expect_op("]"));
    if (n_colons == 0) {
      if (!parts[0]) return error_at(line, "empty subscript");
      return make_expr(line, GetItem{std::move(object), std::move(parts[0])});
    }
    return make_expr(line, SliceExpr{std::move(object), std::move(parts[0]), std::move(parts[1]), std::move(parts[2])});
  }

  Expected<ExprPtr> call(ExprPtr callee, int line) {
    Call c{std::move(callee), {}};
    PEREGRINE_RETURN_IF_ERROR(call_args(c.args));
    return make_expr(line, std::move(c));
  }

  // `(a, b, key=c)`.
  Status call_args(Args& args) {
    PEREGRINE_RETURN_IF_ERROR(expect_op("("));
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) return error("*args / **kwargs in calls are not supported");
      if (peek().kind == TokenKind::kName && is_op("=", 1)) {
        std::string key = next().text;
        ++i_;
        PEREGRINE_ASSIGN_OR_RETURN(ExprPtr v, expression(true));
        args.keyword.emplace_back(std::move(key), std::move(v));
      } else {
        if (!args.keyword.empty()) return error("positional argument after a keyword argument");
        PEREGRINE_ASSIGN_OR_RETURN(ExprPtr v, expression(true));
        args.positional.push_back(std::move(v));
      }
      if (!is_op(",")) break;
      ++i_;
    }
    return expect_op(")");
  }

  // name(.name)* as filters and tests are written.
  Expected<std::string> dotted_name() {
    PEREGRINE_ASSIGN_OR_RETURN(std::string name, expect_name());
    while (is_op(".") && peek(1).kind == TokenKind::kName) {
      i_ += 2;
      name += "." + toks_[i_ - 1].text;
    }
    return name;
  }

  // The argument of `x is test arg` written without parentheses, if any.
  bool bare_test_argument() const {
    const Token& t = peek();
    const bool starts = t.kind == TokenKind::kName || t.kind == TokenKind::kString || t.kind == TokenKind::kInteger ||
                        t.kind == TokenKind::kFloat || is_op("[") || is_op("{");
    return starts && !is_name("else") && !is_name("or") && !is_name("and");
  }

  Expected<ExprPtr> filters_and_tests(ExprPtr e) {
    while (true) {
      const int line = peek().line;
      if (is_op("|")) {
        ++i_;
        FilterExpr f{std::move(e), {}, {}};
        PEREGRINE_ASSIGN_OR_RETURN(f.name, dotted_name());
        if (is_op("(")) PEREGRINE_RETURN_IF_ERROR(call_args(f.args));
        e = make_expr(line, std::move(f));
      } else if (is_name("is")) {
        ++i_;
        TestExpr t{std::move(e), {}, {}, is_name("not")};
        if (t.negated) ++i_;
        PEREGRINE_ASSIGN_OR_RETURN(t.name, dotted_name());
        if (is_op("(")) {
          PEREGRINE_RETURN_IF_ERROR(call_args(t.args));
        } else if (bare_test_argument()) {
          if (is_name("is")) return error("tests cannot be chained with 'is'");
          PEREGRINE_ASSIGN_OR_RETURN(ExprPtr arg, primary());
          PEREGRINE_ASSIGN_OR_RETURN(arg, postfix(std::move(arg)));
          t.args.positional.push_back(std::move(arg));
        }
        e = make_expr(line, std::move(t));
      } else if (is_op("(")) {
        PEREGRINE_ASSIGN_OR_RETURN(e, call(std::move(e), line));
      } else {
        return e;
      }
    }
  }

  std::vector<Token> toks_;
  std::size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Expected<Body> parse_template(std::string_view source) {
  PEREGRINE_ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(source));
  return Parser(std::move(tokens)).parse();
}

}  // namespace peregrine::jinja
