#include "tokenizer/jinja/call_args.h"

namespace peregrine::jinja {

Expected<std::vector<Value>> bind_args(std::string_view function, const CallArgs& args, std::initializer_list<Param> params) {
  const std::string fn(function);
  if (args.positional.size() > params.size()) {
    return invalid_argument(fn + "() takes at most " + std::to_string(params.size()) + " arguments (" +
                            std::to_string(args.positional.size()) + " given)");
  }
  std::vector<std::optional<Value>> bound(params.size());
  for (std::size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    std::size_t i = 0;
    for (const Param& p : params) {
      if (p.name == key) break;
      ++i;
    }
    if (i == params.size()) return invalid_argument(fn + "() got an unexpected keyword argument '" + key + "'");
    if (bound[i]) return invalid_argument(fn + "() got multiple values for argument '" + key + "'");
    bound[i] = value;
  }
  std::vector<Value> out;
  std::size_t i = 0;
  for (const Param& p : params) {
    if (!bound[i] && !p.default_value) {
      return invalid_argument(fn + std::string("() missing required argument '").append(p.name) + "'");
    }
    out.push_back(bound[i] ? std::move(*bound[i]) : *p.default_value);
    ++i;
  }
  return out;
}

Status expect_no_args(std::string_view function, const CallArgs& args) {
  if (args.positional.empty() && args.keyword.empty()) return Status::ok();
  return invalid_argument(std::string(function) + "() takes no arguments");
}

Expected<std::int64_t> int_arg(const Value& v, std::string_view what) {
  if (!v.is_int() && !v.is_bool()) return invalid_argument(std::string(what) + " must be an integer, not " + v.type_name());
  return v.as_int();
}

Expected<std::string> string_arg(const Value& v, std::string_view what) {
  if (!v.is_string()) return invalid_argument(std::string(what) + " must be a string, not " + v.type_name());
  return v.string();
}

Expected<std::optional<std::string>> optional_string_arg(const Value& v, std::string_view what) {
  if (v.is_none() || v.is_undefined()) return std::optional<std::string>{};
  PEREGRINE_ASSIGN_OR_RETURN(std::string s, string_arg(v, what));
  return std::optional<std::string>(std::move(s));
}

}  // namespace peregrine::jinja
