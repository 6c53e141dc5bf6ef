#include "tokenizer/jinja/to_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace peregrine::jinja {
namespace {

// json.encoder.py_encode_basestring: escapes " \ and control characters only.
void append_json_string(std::string_view s, std::string& out) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

std::string json_float(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f < 0 ? "-Infinity" : "Infinity";
  return float_repr(f);
}

class JsonWriter {
 public:
  JsonWriter(std::optional<int> indent, bool sort_keys) : indent_(indent), sort_keys_(sort_keys) {}

  Status write(const Value& v, int level) {
    if (v.is_none()) {
      out_ += "null";
    } else if (v.is_bool()) {
      out_ += v.boolean() ? "true" : "false";
    } else if (v.is_int()) {
      out_ += std::to_string(v.integer());
    } else if (v.is_float()) {
      out_ += json_float(v.floating());
    } else if (v.is_string()) {
      append_json_string(v.string(), out_);
    } else if (v.is_list()) {
      return write_list(v.list().items, level);
    } else if (v.is_dict()) {
      return write_dict(v.dict().items, level);
    } else {
      return invalid_argument(std::string("Object of type ") + v.type_name() + " is not JSON serializable");
    }
    return Status::ok();
  }

  std::string take() { return std::move(out_); }

 private:
  // Before item `i` of a container at `level`: the separator and the line break + indent.
  void separator(std::size_t i, int level) {
    if (i) out_ += indent_ ? "," : ", ";
    new_line(level + 1);
  }
  void close(char c, int level) {
    new_line(level);
    out_ += c;
  }
  void new_line(int level) {
    if (!indent_) return;
    out_ += '\n';
    out_.append(static_cast<std::size_t>(*indent_ * level), ' ');
  }

  Status write_list(const std::vector<Value>& items, int level) {
    out_ += '[';
    if (items.empty()) return out_ += ']', Status::ok();
    for (std::size_t i = 0; i < items.size(); ++i) {
      separator(i, level);
      PEREGRINE_RETURN_IF_ERROR(write(items[i], level + 1));
    }
    close(']', level);
    return Status::ok();
  }

  Status write_dict(std::vector<std::pair<std::string, Value>> items, int level) {
    out_ += '{';
    if (items.empty()) return out_ += '}', Status::ok();
    if (sort_keys_) std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 0; i < items.size(); ++i) {
      separator(i, level);
      append_json_string(items[i].first, out_);
      out_ += ": ";
      PEREGRINE_RETURN_IF_ERROR(write(items[i].second, level + 1));
    }
    close('}', level);
    return Status::ok();
  }

  std::optional<int> indent_;
  bool sort_keys_;
  std::string out_;
};

}  // namespace

Expected<std::string> to_json(const Value& v, std::optional<int> indent, bool sort_keys) {
  JsonWriter w(indent, sort_keys);
  PEREGRINE_RETURN_IF_ERROR(w.write(v, 0));
  return w.take();
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<std::string, Value>> items;
      for (const auto& [k, v] : j.items()) items.emplace_back(k, from_json(v));
      return make_dict(std::move(items));
    }
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      for (const auto& v : j) items.push_back(from_json(v));
      return make_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::string: return j.get<std::string>();
    case nlohmann::ordered_json::value_t::boolean: return j.get<bool>();
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned: return j.get<std::int64_t>();
    case nlohmann::ordered_json::value_t::number_float: return j.get<double>();
    default: return None{};
  }
}

}  // namespace peregrine::jinja
