#include "peregrine/sampling/json_schema_grammar.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <utility>
#include <vector>

#include "peregrine/tokenizer/utf8.h"

namespace peregrine {

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

namespace {

using Json = nlohmann::ordered_json;
using Ranges = std::vector<std::pair<std::uint32_t, std::uint32_t>>;

constexpr std::uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kMaxDepth = 64;

// Rules every converted grammar shares: JSON's lexical pieces, whitespace limited as in
// grammar.h's json_object_gbnf.
constexpr const char* kCommonRules = R"(ws ::= | " " | "\n" [ \t]{0,20}
char ::= [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
string ::= "\"" char* "\"" ws
integer ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ws
number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9] [0-9]{0,15} )? ws
boolean ::= ( "true" | "false" ) ws
null ::= "null" ws
value ::= object | array | string | number | boolean | null
object ::= "{" ws ( string ":" ws value ( "," ws string ":" ws value )* )? "}" ws
array ::= "[" ws ( value ( "," ws value )* )? "]" ws
date ::= [0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] )
time ::= ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )
uuid ::= [0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12}
)";

const std::set<std::string>& known_keywords() {
  static const std::set<std::string> k = {
      "type",      "properties", "required",  "additionalProperties", "items",    "minItems", "maxItems",
      "prefixItems", "enum",     "const",     "anyOf",                "oneOf",    "$ref",     "$defs",
      "definitions", "minLength", "maxLength", "pattern",             "format",   "title",    "description",
      "default",   "examples",   "$schema",   "$id",                  "$comment", "strict"};
  return k;
}


std::string hex_escape(std::uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, cp <= 0xFF ? "\\x%02X" : cp <= 0xFFFF ? "\\u%04X" : "\\U%08X", cp);
  return buf;
}

// Ranges sorted and merged.
Ranges normalized(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& [a, b] : r) {
    if (!out.empty() && a <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, b);
    } else {
      out.emplace_back(a, b);
    }
  }
  return out;
}

Ranges complement(const Ranges& r) {
  Ranges out;
  std::uint32_t next = 0;
  for (const auto& [a, b] : normalized(r)) {
    if (a > next) out.emplace_back(next, a - 1);
    next = b + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

bool covers(const Ranges& r, std::uint32_t cp) {
  return std::any_of(r.begin(), r.end(), [cp](const auto& x) { return x.first <= cp && cp <= x.second; });
}

// A set of string characters as GBNF: the set minus what JSON must escape (controls, '"',
// '\'), plus the escapes of '"' and '\' when the set has them.
std::string json_chars(const Ranges& set) {
  const Ranges kept = normalized(set);
  Ranges plain;
  for (auto [a, b] : kept) {
    const Ranges minus = complement({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}});
    for (const auto& [c, d] : minus) {
      const std::uint32_t lo = std::max(a, c), hi = std::min(b, d);
      if (lo <= hi) plain.emplace_back(lo, hi);
    }
  }
  std::vector<std::string> alts;
  if (!plain.empty()) {
    std::string cls = "[";
    for (const auto& [a, b] : plain) {
      cls.append(hex_escape(a));
      if (a != b) cls.append("-").append(hex_escape(b));
    }
    alts.push_back(cls.append("]"));
  }
  if (covers(kept, '"')) alts.push_back(R"("\\\"")");
  if (covers(kept, '\\')) alts.push_back(R"("\\\\")");
  if (alts.empty()) return "";
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

// A regular expression (JSON Schema's pattern, ECMA-262 subset) as GBNF over JSON string
// characters.
class PatternConverter {
 public:
  explicit PatternConverter(std::string_view p) : p_(p) {}

  Expected<std::string> run() {
    if (peek() == '^') ++pos_;
    std::string out = alternation();
    if (peek() == '$') ++pos_;
    if (!error_.empty()) return invalid_argument(error_);
    if (pos_ != p_.size()) return invalid_argument("unexpected character at offset " + std::to_string(pos_));
    return out;
  }

 private:
  char peek() const { return pos_ < p_.size() ? p_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= p_.size(); }
  void fail(const std::string& what) {
    if (error_.empty()) error_ = what;
    pos_ = p_.size();
  }

  std::string alternation() {
    if (++depth_ > kMaxDepth) {
      fail("groups nested more than 64 deep");
      return "";
    }
    std::vector<std::string> alts{sequence()};
    while (peek() == '|') {
      ++pos_;
      alts.push_back(sequence());
    }
    --depth_;
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
    return out + " )";
  }

  std::string sequence() {
    std::string out;
    while (!at_end() && peek() != '|' && peek() != ')' && !(peek() == '$' && pos_ + 1 == p_.size())) {
      std::string a = atom();
      a += quantifier();
      out += (out.empty() ? "" : " ") + a;
    }
    return out.empty() ? "\"\"" : out;
  }

  std::string quantifier() {
    std::string q;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      q = std::string(1, c);
    } else if (c == '{') {
      const std::size_t close = p_.find('}', pos_);
      if (close == std::string_view::npos) {
        fail("an unclosed '{' quantifier");
        return q;
      }
      q = std::string(p_.substr(pos_, close + 1 - pos_));
      pos_ = close + 1;
      // {m}, {m,} or {m,n}, bounds up to 10000 (GBNF's limit), m <= n.
      static const std::regex bounds(R"(\{(\d{1,5})(,(\d{0,5}))?\})");
      std::smatch m;
      const bool ok = std::regex_match(q, m, bounds) && std::stoul(m[1]) <= 10000 &&
                      (m[3].length() == 0 || (std::stoul(m[3]) <= 10000 && std::stoul(m[1]) <= std::stoul(m[3])));
      if (!ok) fail("a quantifier other than {m}, {m,} or {m,n} with m <= n <= 10000");
    }
    if (!q.empty() && peek() == '?') ++pos_;  // lazy: the same set of strings
    return q;
  }

  std::string atom() {
    const char c = peek();
    ++pos_;
    if (c == '(') {
      if (p_.substr(pos_, 2) == "?:") pos_ += 2;
      std::string inner = alternation();
      if (peek() != ')') fail("an unclosed '('");
      ++pos_;
      return "(" + inner + ")";
    }
    if (c == '[') return json_chars(char_class());
    if (c == '.') return json_chars(complement({{'\n', '\n'}}));
    if (c == '\\') return json_chars(escape());
    if (c == '*' || c == '+' || c == '?' || c == '{' || c == ')') {
      std::string what = "'";
      what += c;
      fail(what.append("' repeats nothing"));
      return "";
    }
    --pos_;
    const std::size_t len = utf8_char_length(p_, pos_);
    const std::uint32_t cp = utf8_decode(p_, pos_, len);
    pos_ += len;
    return json_chars({{cp, cp}});
  }

  // After a backslash: a class escape or an escaped character.
  Ranges escape() {
    const char c = peek();
    ++pos_;
    const Ranges digit = {{'0', '9'}}, word = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}, space = {{'\t', '\r'}, {' ', ' '}};
    switch (c) {
      case 'd': return digit;
      case 'D': return complement(digit);
      case 'w': return word;
      case 'W': return complement(word);
      case 's': return space;
      case 'S': return complement(space);
      case 'n': return {{'\n', '\n'}};
      case 't': return {{'\t', '\t'}};
      case 'r': return {{'\r', '\r'}};
      case '\0': fail("a pattern ending in '\\'"); return {};
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
          std::string what = "the escape '\\";
          what += c;
          fail(what.append("' is not supported"));
          return {};
        }
        return {{static_cast<unsigned char>(c), static_cast<unsigned char>(c)}};
    }
  }

  Ranges char_class() {
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    Ranges set;
    bool first = true;
    while (!at_end() && (peek() != ']' || first)) {
      first = false;
      Ranges item;
      if (peek() == '\\') {
        ++pos_;
        item = escape();
      } else {
        const std::size_t len = utf8_char_length(p_, pos_);
        const std::uint32_t cp = utf8_decode(p_, pos_, len);
        pos_ += len;
        item = {{cp, cp}};
      }
      if (peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']' && item.size() == 1 && item[0].first == item[0].second) {
        ++pos_;
        std::uint32_t hi;
        if (peek() == '\\') {
          ++pos_;
          const Ranges e = escape();
          hi = e.empty() ? 0 : e[0].first;
        } else {
          const std::size_t len = utf8_char_length(p_, pos_);
          hi = utf8_decode(p_, pos_, len);
          pos_ += len;
        }
        if (hi < item[0].first) fail("an empty range in a class");
        item[0].second = hi;
      }
      set.insert(set.end(), item.begin(), item.end());
    }
    if (peek() != ']') fail("an unclosed '['");
    ++pos_;
    return negated ? complement(set) : set;
  }

  std::string_view p_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  std::string error_;
};

class SchemaConverter {
 public:
  explicit SchemaConverter(const Json& root) : root_(root) {}

  Expected<std::string> run() {
    auto root = visit(root_, "#");
    if (!root) return root.status();
    return "root ::= " + *root + "\n" + rules_ + kCommonRules;
  }

 private:
  Status bad(const std::string& where, const std::string& what) const {
    return invalid_argument(what + " at " + where);
  }

  std::string add_rule(const std::string& body) {
    std::string name = "s";
    name += std::to_string(++n_rules_);
    rules_.append(name).append(" ::= ").append(body).append("\n");
    return name;
  }

  // The GBNF expression of schema `s` (at JSON pointer `where`), at most kMaxDepth schemas deep.
  Expected<std::string> visit(const Json& s, const std::string& where) {
    if (depth_ >= kMaxDepth) return bad(where, "schemas nested more than 64 deep");
    ++depth_;
    auto e = visit_schema(s, where);
    --depth_;
    return e;
  }

  // A non-negative integer keyword (minItems, maxLength, ...), `fallback` when absent.
  Expected<std::int64_t> count(const Json& s, const char* key, std::int64_t fallback, const std::string& where) const {
    if (!s.contains(key)) return fallback;
    const Json& v = s.at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 100000) {
      return bad(where, std::string("'") + key + "' that is not an integer in [0, 100000]");
    }
    return v.get<std::int64_t>();
  }

  Expected<std::string> visit_schema(const Json& s, const std::string& where) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) return bad(where, "the schema false (nothing is valid)");
      return std::string("value");
    }
    if (!s.is_object()) return bad(where, "a schema that is not an object or a boolean");
    for (const auto& [key, v] : s.items()) {
      if (!known_keywords().contains(key)) return bad(where, "'" + key + "' is not supported");
    }
    if (s.contains("$ref")) return ref(s.at("$ref"), where);
    if (s.contains("const")) return gbnf_literal(s.at("const").dump()) + " ws";
    if (s.contains("enum")) return enumeration(s.at("enum"), where);
    for (const char* key : {"anyOf", "oneOf"}) {
      if (s.contains(key)) return alternatives(s.at(key), where + "/" + key);
    }
    if (s.contains("type")) return typed(s, where);
    if (s.contains("properties") || s.contains("additionalProperties")) return object(s, where);
    if (s.contains("items") || s.contains("prefixItems")) return array(s, where);
    return std::string("value");
  }

  Expected<std::string> ref(const Json& r, const std::string& where) {
    if (!r.is_string()) return bad(where, "a $ref that is not a string");
    const std::string target = r.get<std::string>();
    for (const std::string prefix : {"#/$defs/", "#/definitions/"}) {
      if (target.rfind(prefix, 0) != 0) continue;
      const std::string name = target.substr(prefix.size());
      const std::string section = prefix.substr(2, prefix.size() - 3);
      if (!root_.contains(section) || !root_.at(section).contains(name)) return bad(where, "the $ref '" + target + "' resolves to nothing");
      const auto known = refs_.find(target);
      if (known != refs_.end()) return known->second;
      const std::string rule = "ref" + std::to_string(refs_.size() + 1);
      refs_[target] = rule;  // before visiting: a recursive schema refers to itself
      auto body = visit(root_.at(section).at(name), target);
      if (!body) return body.status();
      rules_ += rule + " ::= " + *body + "\n";
      return rule;
    }
    return bad(where, "the $ref '" + target + "' (only #/$defs/NAME and #/definitions/NAME are supported)");
  }

  Expected<std::string> enumeration(const Json& values, const std::string& where) {
    if (!values.is_array() || values.empty()) return bad(where, "an enum that is not a non-empty array");
    std::string out = "(";
    for (std::size_t i = 0; i < values.size(); ++i) out += (i ? " | " : " ") + gbnf_literal(values[i].dump());
    return out + " ) ws";
  }

  Expected<std::string> alternatives(const Json& list, const std::string& where) {
    if (!list.is_array() || list.empty()) return bad(where, "not a non-empty array of schemas");
    std::string out = "(";
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto e = visit(list[i], where + "/" + std::to_string(i));
      if (!e) return e.status();
      out += (i ? " | " : " ") + *e;
    }
    return out + " )";
  }

  Expected<std::string> typed(const Json& s, const std::string& where) {
    const Json& type = s.at("type");
    if (type.is_array()) {
      if (type.empty()) return bad(where, "an empty type list");
      std::string out = "(";
      for (std::size_t i = 0; i < type.size(); ++i) {
        Json one = s;
        one["type"] = type[i];
        auto e = typed(one, where);
        if (!e) return e.status();
        out += (i ? " | " : " ") + *e;
      }
      return out + " )";
    }
    if (!type.is_string()) return bad(where, "a type that is not a string or a list of strings");
    const std::string t = type.get<std::string>();
    if (t == "object") return object(s, where);
    if (t == "array") return array(s, where);
    if (t == "string") return string(s, where);
    if (t == "integer" || t == "number" || t == "boolean" || t == "null") return t;
    return bad(where, "the type '" + t + "'");
  }

  static std::string key_value(const std::string& key, const std::string& value) {
    return gbnf_literal(Json(key).dump()) + " ws \":\" ws " + value;
  }

  Expected<std::string> object(const Json& s, const std::string& where) {
    const Json props = s.value("properties", Json::object());
    if (!props.is_object()) return bad(where, "properties that are not an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      const Json& r = s.at("required");
      if (!r.is_array()) return bad(where, "a 'required' that is not an array of names");
      for (const Json& name : r) {
        if (!name.is_string()) return bad(where, "a 'required' that is not an array of names");
        if (!props.contains(name.get<std::string>())) return bad(where, "required property '" + name.get<std::string>() + "' without a schema in 'properties'");
        required.insert(name.get<std::string>());
      }
    }
    if (props.empty()) {
      const Json extra = s.value("additionalProperties", Json(true));
      if (extra.is_boolean() && !extra.get<bool>()) return std::string("\"{\" ws \"}\" ws");
      auto v = visit(extra, where + "/additionalProperties");
      if (!v) return v.status();
      return add_rule("\"{\" ws ( string \":\" ws " + *v + " ( \",\" ws string \":\" ws " + *v + " )* )? \"}\" ws");
    }
    std::vector<std::string> must, may;
    for (const auto& [key, schema] : props.items()) {
      auto v = visit(schema, where + "/properties/" + key);
      if (!v) return v.status();
      (required.contains(key) ? must : may).push_back(key_value(key, *v));
    }
    // The optional ones in order, each at most once: tail_i ::= ( "," ws kv_i )? tail_(i+1).
    std::string tail;
    for (auto it = may.rbegin(); it != may.rend(); ++it) {
      tail = add_rule("( \",\" ws " + *it + " )?" + (tail.empty() ? "" : " " + tail));
    }
    std::string body;
    if (!must.empty()) {
      for (std::size_t i = 0; i < must.size(); ++i) body += (i ? " \",\" ws " : "") + must[i];
      if (!tail.empty()) body += " " + tail;
    } else {
      // None required: the first present one starts, the rest follow as a tail.
      std::string start;
      std::string rest;
      for (auto it = may.rbegin(); it != may.rend(); ++it) {
        const std::string after = rest;
        rest = add_rule("( \",\" ws " + *it + " )?" + (after.empty() ? "" : " " + after));
        start = add_rule(*it + (after.empty() ? "" : " " + after) + (start.empty() ? "" : " | " + start));
      }
      body = "( " + start + " )?";
    }
    return add_rule("\"{\" ws " + body + " \"}\" ws");
  }

  Expected<std::string> array(const Json& s, const std::string& where) {
    PEREGRINE_ASSIGN_OR_RETURN(const std::int64_t min, count(s, "minItems", 0, where));
    PEREGRINE_ASSIGN_OR_RETURN(const std::int64_t max, count(s, "maxItems", -1, where));
    if (max >= 0 && max < min) return bad(where, "minItems / maxItems out of order");
    if (s.contains("prefixItems")) {
      const Json& prefix = s.at("prefixItems");
      if (!prefix.is_array() || s.contains("minItems") || s.contains("maxItems")) {
        return bad(where, "prefixItems other than a fixed tuple (an array without minItems / maxItems)");
      }
      std::string body;
      for (std::size_t i = 0; i < prefix.size(); ++i) {
        auto e = visit(prefix[i], where + "/prefixItems/" + std::to_string(i));
        if (!e) return e.status();
        body += (i ? " \",\" ws " : "") + *e;
      }
      return add_rule("\"[\" ws " + body + " \"]\" ws");
    }
    auto item = visit(s.value("items", Json(true)), where + "/items");
    if (!item) return item.status();
    const std::string more = "( \",\" ws " + *item + " )";
    std::string list;
    if (max < 0) {
      list = *item + " " + more + "{" + std::to_string(std::max<std::int64_t>(min - 1, 0)) + ",}";
    } else if (max == 0) {
      return std::string("\"[\" ws \"]\" ws");
    } else {
      list = *item + " " + more + "{" + std::to_string(std::max<std::int64_t>(min - 1, 0)) + "," + std::to_string(max - 1) + "}";
    }
    return add_rule("\"[\" ws " + (min == 0 ? "( " + list + " )?" : list) + " \"]\" ws");
  }

  Expected<std::string> string(const Json& s, const std::string& where) {
    if (s.contains("pattern")) {
      if (!s.at("pattern").is_string()) return bad(where, "a pattern that is not a string");
      auto body = PatternConverter(s.at("pattern").get<std::string>()).run();
      if (!body) return bad(where, "the pattern " + s.at("pattern").dump() + ": " + body.status().message());
      return add_rule("\"\\\"\" " + *body + " \"\\\"\" ws");
    }
    if (s.contains("format") && !s.at("format").is_string()) return bad(where, "a format that is not a string");
    const std::string format = s.value("format", "");
    if (format == "date" || format == "time" || format == "uuid") return add_rule("\"\\\"\" " + format + " \"\\\"\" ws");
    if (format == "date-time") return add_rule("\"\\\"\" date \"T\" time \"\\\"\" ws");
    PEREGRINE_ASSIGN_OR_RETURN(const std::int64_t min, count(s, "minLength", 0, where));
    PEREGRINE_ASSIGN_OR_RETURN(const std::int64_t max, count(s, "maxLength", -1, where));
    if (max >= 0 && max < min) return bad(where, "minLength / maxLength out of order");
    if (min == 0 && max < 0) return std::string("string");
    const std::string reps = "{" + std::to_string(min) + "," + (max >= 0 ? std::to_string(max) : "") + "}";
    return add_rule("\"\\\"\" char" + reps + " \"\\\"\" ws");
  }

  const Json& root_;
  std::string rules_;
  std::map<std::string, std::string> refs_;
  int n_rules_ = 0;
  int depth_ = 0;
};

}  // namespace

Expected<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema) { return SchemaConverter(schema).run(); }

}  // namespace peregrine
