#include "peregrine/sampling/grammar.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>

#include "peregrine/tokenizer/utf8.h"

namespace peregrine {

bool CharSet::contains(std::uint32_t cp) const {
  const bool in = std::any_of(ranges.begin(), ranges.end(), [cp](const auto& r) { return r.first <= cp && cp <= r.second; });
  return in != negated;
}

bool CharSet::intersects(std::uint32_t lo, std::uint32_t hi) const {
  if (!negated) {
    return std::any_of(ranges.begin(), ranges.end(), [&](const auto& r) { return r.first <= hi && lo <= r.second; });
  }
  // Some code point of [lo, hi] outside every range: walk the sorted, merged coverage.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> sorted = ranges;
  std::sort(sorted.begin(), sorted.end());
  std::uint32_t next = lo;  // the lowest code point not yet known to be covered
  for (const auto& [a, b] : sorted) {
    if (a > next) break;
    if (b >= next) {
      if (b >= hi) return false;
      next = b + 1;
    }
  }
  return next <= hi;
}

constexpr std::size_t kMaxRules = 20000;

// Collects rules while parsing, then lays them out flat and checks them.
class GrammarBuilder {
 public:
  using Sequence = std::vector<GrammarElement>;

  std::uint32_t rule_id(const std::string& name) {
    const auto [it, added] = ids_.try_emplace(name, static_cast<std::uint32_t>(names_.size()));
    if (added) {
      names_.push_back(name);
      alts_.emplace_back();
      defined_.push_back(false);
    }
    return it->second;
  }

  // A new rule for a group or repetition, named after the rule it serves; not yet defined.
  std::uint32_t new_rule(std::uint32_t parent) {
    std::string name;
    do {
      name = names_[parent] + "_" + std::to_string(generated_++);
    } while (ids_.contains(name));
    return rule_id(name);
  }

  std::uint32_t generated_rule(std::uint32_t parent, std::vector<Sequence> alts) {
    const std::uint32_t id = new_rule(parent);
    set_alternatives(id, std::move(alts));
    return id;
  }

  // A rule of the text. Errors: kInvalidArgument when it was defined before.
  Status define(std::uint32_t id, std::vector<Sequence> alts) {
    if (defined_[id]) return invalid_argument("grammar: rule '" + names_[id] + "' is defined twice");
    set_alternatives(id, std::move(alts));
    return Status::ok();
  }

  void set_alternatives(std::uint32_t id, std::vector<Sequence> alts) {
    defined_[id] = true;
    alts_[id] = std::move(alts);
  }

  GrammarElement chars(CharSet set) {
    const auto key = std::pair{set.negated, set.ranges};
    const auto [it, added] = set_ids_.try_emplace(key, static_cast<std::uint32_t>(grammar_->char_sets_.size()));
    if (added) grammar_->char_sets_.push_back(std::move(set));
    return {GrammarElement::Kind::kChars, it->second};
  }

  Expected<std::shared_ptr<const Grammar>> finish() {
    // The matcher expands chains of rules recursively: bound them.
    if (names_.size() > kMaxRules) return invalid_argument("grammar: more than 20000 rules (generated ones included)");
    for (std::size_t r = 0; r < names_.size(); ++r) {
      if (!defined_[r]) return invalid_argument("grammar: rule '" + names_[r] + "' is used but not defined");
    }
    const auto root = ids_.find("root");
    if (root == ids_.end()) return invalid_argument("grammar: no 'root' rule (the start rule)");
    if (Status s = check_left_recursion(); !s) return s;
    grammar_->root_ = root->second;
    for (const auto& alts : alts_) {
      auto& starts = grammar_->rules_.emplace_back();
      for (const Sequence& seq : alts) {
        starts.push_back(static_cast<std::uint32_t>(grammar_->elements_.size()));
        grammar_->elements_.insert(grammar_->elements_.end(), seq.begin(), seq.end());
        grammar_->elements_.push_back({});
      }
    }
    return std::shared_ptr<const Grammar>(std::move(grammar_));
  }

 private:
  // A rule that reaches itself through leftmost references over nullable prefixes would make the
  // matcher expand forever.
  Status check_left_recursion() const {
    const std::size_t n = names_.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (std::size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const Sequence& seq : alts_[r]) {
          if (std::all_of(seq.begin(), seq.end(), [&](const GrammarElement& e) { return e.kind == GrammarElement::Kind::kRule && nullable[e.value]; })) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<std::uint32_t>> leftmost(n);
    for (std::size_t r = 0; r < n; ++r) {
      for (const Sequence& seq : alts_[r]) {
        for (const GrammarElement& e : seq) {
          if (e.kind != GrammarElement::Kind::kRule) break;
          leftmost[r].push_back(e.value);
          if (!nullable[e.value]) break;
        }
      }
    }
    std::vector<int> state(n, 0);  // 0 unvisited, 1 on the path, 2 done
    std::function<bool(std::uint32_t)> cycle = [&](std::uint32_t r) {
      state[r] = 1;
      for (std::uint32_t next : leftmost[r]) {
        if (state[next] == 1 || (state[next] == 0 && cycle(next))) return true;
      }
      state[r] = 2;
      return false;
    };
    for (std::uint32_t r = 0; r < n; ++r) {
      if (state[r] == 0 && cycle(r)) return invalid_argument("grammar: rule '" + names_[r] + "' is left-recursive");
    }
    return Status::ok();
  }

  std::shared_ptr<Grammar> grammar_ = std::make_shared<Grammar>();
  std::map<std::string, std::uint32_t> ids_;
  std::vector<std::string> names_;
  std::vector<std::vector<Sequence>> alts_;
  std::vector<bool> defined_;
  std::map<std::pair<bool, std::vector<std::pair<std::uint32_t, std::uint32_t>>>, std::uint32_t> set_ids_;
  std::uint32_t generated_ = 0;
};

namespace {

constexpr std::uint32_t kMaxRepeat = 10000;
constexpr std::size_t kMaxElements = 1u << 20;  // after repetitions are expanded
constexpr int kMaxNesting = 100;                // groups inside groups
constexpr std::uint32_t kUnbounded = std::numeric_limits<std::uint32_t>::max();
using Sequence = GrammarBuilder::Sequence;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// Recursive descent over GBNF text; the first error wins and stops the parse.
class Parser {
 public:
  Parser(std::string_view text, GrammarBuilder& b) : text_(text), b_(b) {}

  Status run() {
    while (ok()) {
      space(true);
      if (at_end()) break;
      const std::string name = parse_name();
      space(false);
      if (!ok()) break;
      if (text_.substr(pos_, 3) != "::=") {
        error("expected '::=' after the rule name '" + name + "'");
        break;
      }
      pos_ += 3;
      space(true);
      const std::uint32_t id = b_.rule_id(name);
      std::vector<Sequence> alts = alternatives(id, false);
      if (!ok()) break;
      if (!at_end() && peek() != '\n' && peek() != '\r') {
        error("expected the end of the line after rule '" + name + "'");
        break;
      }
      if (Status s = b_.define(id, std::move(alts)); !s) return s;
    }
    return status_;
  }

 private:
  bool ok() const { return static_cast<bool>(status_); }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  // Records the first error (with its line and column); later ones are consequences.
  void error(const std::string& what) {
    if (ok()) {
      std::size_t line = 1, col = 1;
      for (std::size_t i = 0; i < pos_ && i < text_.size(); ++i) {
        if (text_[i] == '\n') {
          ++line;
          col = 1;
        } else {
          ++col;
        }
      }
      status_ = invalid_argument("grammar: line " + std::to_string(line) + " column " + std::to_string(col) + ": " + what);
    }
  }

  // Spaces, tabs and comments; newlines too where `newlines` (inside groups, after '|').
  void space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const std::size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == start) error(std::string("expected a rule name, found '") + peek() + "'");
    return std::string(text_.substr(start, pos_ - start));
  }

  std::uint32_t hex(std::size_t digits) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < digits; ++i, ++pos_) {
      const char c = peek();
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) {
        error("expected " + std::to_string(digits) + " hex digits in an escape");
        return 0;
      }
      v = v * 16 + static_cast<std::uint32_t>(d);
    }
    return v;
  }

  // One character of a literal or class: an escape or a UTF-8 code point.
  std::uint32_t character() {
    if (at_end()) {
      error("unexpected end of the grammar inside a literal or class");
      return 0;
    }
    if (peek() != '\\') {
      const std::size_t len = utf8_char_length(text_, pos_);
      const std::uint32_t cp = utf8_decode(text_, pos_, len);
      pos_ += len;
      return cp;
    }
    ++pos_;
    const char c = peek();
    ++pos_;
    switch (c) {
      case 'n': return '\n';
      case 't': return '\t';
      case 'r': return '\r';
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      case '\\': case '"': case '[': case ']': case '-': case '/': case '^': return static_cast<std::uint8_t>(c);
      default:
        --pos_;
        std::string what = "unknown escape '\\";
        what += c;
        what += '\'';
        error(what);
        return 0;
    }
  }

  std::vector<Sequence> alternatives(std::uint32_t rule, bool nested) {
    if (++depth_ > kMaxNesting) {
      error("groups nested more than 100 deep");
      return {};
    }
    std::vector<Sequence> alts{sequence(rule, nested)};
    while (ok() && peek() == '|') {
      ++pos_;
      space(true);
      alts.push_back(sequence(rule, nested));
    }
    --depth_;
    return alts;
  }

  Sequence sequence(std::uint32_t rule, bool nested) {
    Sequence seq;
    std::size_t last = seq.size();  // where the last item starts (repetition applies to it)
    while (ok() && !at_end()) {
      const char c = peek();
      const std::size_t start = seq.size();
      if (c == '"') {
        ++pos_;
        while (ok() && !at_end() && peek() != '"') {
          const std::uint32_t cp = character();
          seq.push_back(b_.chars({{{cp, cp}}, false}));
        }
        if (at_end()) error("unterminated string literal");
        ++pos_;
      } else if (c == '[') {
        seq.push_back(char_class());
      } else if (c == '.') {
        ++pos_;
        seq.push_back(b_.chars({{}, true}));
      } else if (is_name_char(c)) {
        seq.push_back({GrammarElement::Kind::kRule, b_.rule_id(parse_name())});
      } else if (c == '(') {
        ++pos_;
        space(true);
        std::vector<Sequence> inner = alternatives(rule, true);
        if (ok() && peek() != ')') error("expected ')'");
        ++pos_;
        if (ok()) seq.push_back({GrammarElement::Kind::kRule, b_.generated_rule(rule, std::move(inner))});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last == seq.size()) {
          std::string what = "'";
          what.append(1, c).append("' repeats nothing");
          error(what);
          break;
        }
        repeat(rule, seq, last);
        space(nested);
        continue;
      } else {
        break;
      }
      last = start;
      space(nested);
    }
    return seq;
  }

  GrammarElement char_class() {
    ++pos_;  // '['
    CharSet set;
    if (peek() == '^') {
      set.negated = true;
      ++pos_;
    }
    while (ok() && peek() != ']') {
      const std::uint32_t lo = character();
      std::uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        hi = character();
        if (hi < lo) error("empty character range in a class");
      }
      set.ranges.emplace_back(lo, hi);
    }
    if (at_end()) error("unterminated character class");
    ++pos_;
    return b_.chars(std::move(set));
  }

  // Replaces seq[last, end) (one item) by its repetition: the item min times, then the
  // optional rest as generated right-recursive rules.
  void repeat(std::uint32_t rule, Sequence& seq, std::size_t last) {
    const Sequence item(seq.begin() + static_cast<std::ptrdiff_t>(last), seq.end());
    seq.resize(last);
    std::uint32_t min = 0, max = kUnbounded;
    const char op = peek();
    ++pos_;
    if (op == '+') min = 1;
    if (op == '?') max = 1;
    if (op == '{') bounds(min, max);
    if (!ok()) return;
    const std::uint64_t copies = std::uint64_t{min} + (max == kUnbounded ? 1 : max - min);
    if ((elements_ += copies * item.size()) > kMaxElements) {
      error("the grammar grows past 1048576 elements once its repetitions are expanded");
      return;
    }
    for (std::uint32_t i = 0; i < min; ++i) seq.insert(seq.end(), item.begin(), item.end());
    if (max == kUnbounded) {  // R ::= item R | ε
      const std::uint32_t r = b_.new_rule(rule);
      Sequence again = item;
      again.push_back({GrammarElement::Kind::kRule, r});
      b_.set_alternatives(r, {again, {}});
      seq.push_back({GrammarElement::Kind::kRule, r});
      return;
    }
    // R_k ::= item | ε; R_i ::= item R_(i+1) | ε.
    std::vector<GrammarElement> tail;
    for (std::uint32_t i = min; i < max; ++i) {
      Sequence opt = item;
      opt.insert(opt.end(), tail.begin(), tail.end());
      tail = {{GrammarElement::Kind::kRule, b_.generated_rule(rule, {opt, {}})}};
    }
    seq.insert(seq.end(), tail.begin(), tail.end());
  }

  std::uint32_t number() {
    space(false);
    std::uint64_t v = 0;
    const std::size_t start = pos_;
    while (!at_end() && peek() >= '0' && peek() <= '9' && v <= kMaxRepeat) v = v * 10 + static_cast<std::uint64_t>(text_[pos_++] - '0');
    if (pos_ == start) error("expected a number in a repetition {m,n}");
    if (v > kMaxRepeat) error("a repetition bound above 10000");
    space(false);
    return static_cast<std::uint32_t>(v);
  }

  void bounds(std::uint32_t& min, std::uint32_t& max) {
    min = max = number();
    if (peek() == ',') {
      ++pos_;
      space(false);
      max = peek() == '}' ? kUnbounded : number();
    }
    if (ok() && peek() != '}') error("expected '}' closing a repetition");
    ++pos_;
    if (ok() && max < min) error("a repetition {m,n} with m > n");
  }

  std::string_view text_;
  GrammarBuilder& b_;
  std::size_t pos_ = 0;
  int depth_ = 0;                // groups open
  std::uint64_t elements_ = 0;   // added by repetitions so far
  Status status_ = Status::ok();
};

}  // namespace

Expected<std::shared_ptr<const Grammar>> Grammar::parse(std::string_view gbnf) {
  GrammarBuilder builder;
  if (Status s = Parser(gbnf, builder).run(); !s) return s;
  return builder.finish();
}

std::string_view json_object_gbnf() {
  return R"(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ( "," ws string ":" ws value )* )? "}" ws
array  ::= "[" ws ( value ( "," ws value )* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\"" ws
number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9] [0-9]{0,15} )? ws
ws     ::= | " " | "\n" [ \t]{0,20}
)";
}

}  // namespace peregrine
