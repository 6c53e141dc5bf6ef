#include "tokenizer/jinja/globals.h"

#include <array>
#include <cmath>
#include <ctime>

namespace peregrine::jinja {
namespace {

constexpr std::array<std::string_view, 5> kGlobals = {"range", "namespace", "dict", "raise_exception", "strftime_now"};

Expected<Value> range(const CallArgs& args) {
  if (!args.keyword.empty() || args.positional.empty() || args.positional.size() > 3) {
    return invalid_argument("range() takes 1 to 3 positional arguments");
  }
  std::int64_t bounds[3] = {0, 0, 1};
  for (std::size_t i = 0; i < args.positional.size(); ++i) {
    PEREGRINE_ASSIGN_OR_RETURN(bounds[args.positional.size() == 1 ? 1 : i], int_arg(args.positional[i], "range argument"));
  }
  const auto [start, stop, step] = bounds;
  if (step == 0) return invalid_argument("range() arg 3 must not be zero");
  const double count = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
  if (count > static_cast<double>(kMaxRangeLength)) return invalid_argument("range() longer than " + std::to_string(kMaxRangeLength) + " items");
  std::vector<Value> out;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(count); ++i) out.emplace_back(start + i * step);
  return make_list(std::move(out));
}

Expected<Value> keyword_object(const CallArgs& args, bool as_namespace) {
  if (!args.positional.empty()) return invalid_argument("namespace() / dict() take keyword arguments only");
  if (!as_namespace) return make_dict(args.keyword);
  for (const auto& [k, v] : args.keyword) {
    if (v.holds_namespace()) return invalid_argument("a namespace cannot hold another namespace");
  }
  auto ns = std::make_shared<NamespaceData>();
  ns->attrs = args.keyword;
  return Value(std::move(ns));
}

Expected<Value> strftime_now(const CallArgs& args) {
  PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("strftime_now", args, {{"format", std::nullopt}}));
  PEREGRINE_ASSIGN_OR_RETURN(const std::string format, string_arg(a[0], "strftime_now format"));
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[256];
  const std::size_t n = format.empty() ? 0 : std::strftime(buf, sizeof(buf), format.c_str(), &local);
  if (n == 0 && !format.empty()) return invalid_argument("strftime_now: format gives no text or too much");
  return Value(std::string(buf, n));
}

}  // namespace

bool is_global_function(std::string_view name) {
  for (std::string_view g : kGlobals) {
    if (g == name) return true;
  }
  return false;
}

Expected<Value> call_global(std::string_view name, const CallArgs& args) {
  if (name == "range") return range(args);
  if (name == "namespace" || name == "dict") return keyword_object(args, name == "namespace");
  if (name == "strftime_now") return strftime_now(args);
  if (name == "raise_exception") {
    PEREGRINE_ASSIGN_OR_RETURN(const auto a, bind_args("raise_exception", args, {{"message", std::nullopt}}));
    return invalid_argument(to_str(a[0]));
  }
  return invalid_argument(std::string(name) + " is not a function");
}

}  // namespace peregrine::jinja
