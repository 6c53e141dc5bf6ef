#include "tokenizer/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "peregrine/tokenizer/utf8.h"

namespace peregrine::jinja {
namespace {

template <typename Items, typename Get>
std::pair<int, bool> nesting_of(const Items& items, Get get) {
  int depth = 0;
  bool ns = false;
  for (const auto& item : items) {
    depth = std::max(depth, get(item).depth());
    ns = ns || get(item).holds_namespace();
  }
  return {depth + 1, ns};
}

const Value* find_in(const std::vector<std::pair<std::string, Value>>& items, std::string_view key) {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

// Python's unicode_repr: quote with ' unless the text has ' and no ", escape \, the quote,
// \t \n \r, and other control / non-printable characters as \xNN or \uNNNN.
std::string repr_string(std::string_view s) {
  const char quote = (s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (std::size_t pos = 0; pos < s.size();) {
    const std::size_t len = utf8_char_length(s, pos);
    const std::uint32_t cp = utf8_decode(s, pos, len);
    char buf[16];
    if (cp == static_cast<std::uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
      out += buf;
    } else if ((cp >= 0x200B && cp <= 0x200F) || cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      out += buf;
    } else {
      out.append(s.substr(pos, len));
    }
    pos += len;
  }
  out += quote;
  return out;
}

bool dict_equals(const std::vector<std::pair<std::string, Value>>& a,
                 const std::vector<std::pair<std::string, Value>>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, v] : a) {
    const Value* other = find_in(b, k);
    if (!other || !equals(v, *other)) return false;
  }
  return true;
}

std::string repr_items(const std::vector<std::pair<std::string, Value>>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += repr_string(items[i].first) + ": " + to_repr(items[i].second);
  }
  return out + "}";
}

}  // namespace

int Value::depth() const {
  if (is_list()) return list().depth;
  if (is_dict()) return dict().depth;
  return is_namespace() ? 1 : 0;
}

bool Value::holds_namespace() const {
  if (is_list()) return list().holds_namespace;
  if (is_dict()) return dict().holds_namespace;
  return is_namespace();
}

bool Value::truthy() const {
  if (is_undefined() || is_none()) return false;
  if (is_bool()) return boolean();
  if (is_int()) return integer() != 0;
  if (is_float()) return floating() != 0.0;
  if (is_string()) return !string().empty();
  if (is_list()) return !list().items.empty();
  if (is_dict()) return !dict().items.empty();
  return true;
}

const char* Value::type_name() const {
  if (is_undefined()) return "Undefined";
  if (is_none()) return "NoneType";
  if (is_bool()) return "bool";
  if (is_int()) return "int";
  if (is_float()) return "float";
  if (is_string()) return "str";
  if (is_list()) return "list";
  if (is_dict()) return "dict";
  return "Namespace";
}

const Value* DictData::find(std::string_view key) const { return find_in(items, key); }

const Value* NamespaceData::find(std::string_view key) const { return find_in(attrs, key); }

void NamespaceData::set(const std::string& key, Value v) {
  for (auto& [k, old] : attrs) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  attrs.emplace_back(key, std::move(v));
}

Value make_list(std::vector<Value> items) {
  auto data = std::make_shared<ListData>();
  std::tie(data->depth, data->holds_namespace) = nesting_of(items, [](const Value& v) -> const Value& { return v; });
  data->items = std::move(items);
  return Value(std::shared_ptr<const ListData>(std::move(data)));
}

Value make_dict(std::vector<std::pair<std::string, Value>> items) {
  auto data = std::make_shared<DictData>();
  std::tie(data->depth, data->holds_namespace) =
      nesting_of(items, [](const auto& kv) -> const Value& { return kv.second; });
  data->items = std::move(items);
  return Value(std::shared_ptr<const DictData>(std::move(data)));
}

Value undefined_name(std::string_view name) { return Undefined{std::string("'").append(name) + "' is undefined"}; }

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.string() == b.string();
  if (a.is_list() && b.is_list()) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    return std::equal(x.begin(), x.end(), y.begin(), y.end(), [](const Value& p, const Value& q) { return equals(p, q); });
  }
  if (a.is_dict() && b.is_dict()) return dict_equals(a.dict().items, b.dict().items);
  if (a.is_namespace() && b.is_namespace()) return &a.ns() == &b.ns();
  return (a.is_none() && b.is_none()) || (a.is_undefined() && b.is_undefined());
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));  // "-1.25e-05"
  const std::size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c >= '0' && c <= '9') digits += c;
  }
  int exponent = 0;
  const std::string_view exp_text = sci.substr(e_pos + 1);
  std::from_chars(exp_text.data() + (exp_text[0] == '+' ? 1 : 0), exp_text.data() + exp_text.size(), exponent);
  const int decpt = exponent + 1;  // digits d0.d1d2... × 10^exponent = 0.d0d1... × 10^decpt
  const int n = static_cast<int>(digits.size());
  std::string out;
  if (sci[0] == '-') out += '-';
  if (decpt > -4 && decpt <= 16) {  // positional notation
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<std::size_t>(-decpt), '0');
      out += digits;
    } else if (decpt >= n) {
      out += digits;
      out.append(static_cast<std::size_t>(decpt - n), '0');
      out += ".0";
    } else {
      out.append(digits, 0, static_cast<std::size_t>(decpt));
      out += '.';
      out.append(digits, static_cast<std::size_t>(decpt));
    }
    return out;
  }
  out += digits[0];
  if (n > 1) {
    out += '.';
    out.append(digits, 1);
  }
  std::snprintf(buf, sizeof(buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + buf;
}

std::string to_str(const Value& v) {
  if (v.is_undefined()) return "";
  if (v.is_string()) return v.string();
  return to_repr(v);
}

std::string to_repr(const Value& v) {
  if (v.is_undefined()) return "";
  if (v.is_none()) return "None";
  if (v.is_bool()) return v.boolean() ? "True" : "False";
  if (v.is_int()) return std::to_string(v.integer());
  if (v.is_float()) return float_repr(v.floating());
  if (v.is_string()) return repr_string(v.string());
  if (v.is_dict()) return repr_items(v.dict().items);
  if (v.is_namespace()) return "<Namespace " + repr_items(v.ns().attrs) + ">";
  std::string out = "[";
  const auto& items = v.list().items;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += to_repr(items[i]);
  }
  return out + "]";
}

}  // namespace peregrine::jinja
