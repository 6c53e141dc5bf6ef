// The values a chat template computes with: Jinja2's view of Python objects (undefined, None,
// bool, int, float, str, list, dict with insertion order, namespace()), with Python's str(),
// repr(), truthiness and == semantics. Lists and dicts are immutable once built (transformers
// renders in jinja2's ImmutableSandboxedEnvironment) and shared by pointer; namespace() is the
// one mutable object (`{% set ns.attr = ... %}`).
// Spec: https://jinja.palletsprojects.com/en/3.1.x/templates/ , Python 3 data model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "peregrine/core/status.h"

namespace peregrine::jinja {

/// Deepest nesting of lists / dicts a template may build (printing, tojson, == and destruction
/// recurse once per level; a namespace may not hold another one, so this bounds every value).
inline constexpr int kMaxValueDepth = 256;

struct ListData;
struct DictData;
struct NamespaceData;

/// Jinja2's default Undefined: prints as "", iterates as empty, is false; attribute access,
/// subscripting and arithmetic on it are errors. `what` is the error message to give then
/// ("'x' is undefined").
struct Undefined {
  std::string what;
};
struct None {};

class Value {
 public:
  using Storage = std::variant<Undefined, None, bool, std::int64_t, double, std::string,
                               std::shared_ptr<const ListData>, std::shared_ptr<const DictData>,
                               std::shared_ptr<NamespaceData>>;

  Value() : v_(Undefined{}) {}
  Value(Undefined u) : v_(std::move(u)) {}  // NOLINT(google-explicit-constructor)
  Value(None n) : v_(n) {}                  // NOLINT(google-explicit-constructor)
  Value(bool b) : v_(b) {}                  // NOLINT(google-explicit-constructor)
  Value(std::int64_t i) : v_(i) {}          // NOLINT(google-explicit-constructor)
  Value(int i) : v_(std::int64_t{i}) {}     // NOLINT(google-explicit-constructor)
  Value(double f) : v_(f) {}                // NOLINT(google-explicit-constructor)
  Value(std::string s) : v_(std::move(s)) {}                     // NOLINT(google-explicit-constructor)
  Value(const char* s) : v_(std::string(s)) {}                   // NOLINT(google-explicit-constructor)
  Value(std::shared_ptr<const ListData> l) : v_(std::move(l)) {}  // NOLINT(google-explicit-constructor)
  Value(std::shared_ptr<const DictData> d) : v_(std::move(d)) {}  // NOLINT(google-explicit-constructor)
  Value(std::shared_ptr<NamespaceData> n) : v_(std::move(n)) {}   // NOLINT(google-explicit-constructor)

  bool is_undefined() const { return std::holds_alternative<Undefined>(v_); }
  bool is_none() const { return std::holds_alternative<None>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_int() const { return std::holds_alternative<std::int64_t>(v_); }
  bool is_float() const { return std::holds_alternative<double>(v_); }
  /// bool, int or float (Python's numbers.Number: bool is an int).
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<const ListData>>(v_); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<const DictData>>(v_); }
  bool is_namespace() const { return std::holds_alternative<std::shared_ptr<NamespaceData>>(v_); }

  // Accessors; each requires the matching is_*().
  const Undefined& undefined() const { return std::get<Undefined>(v_); }
  bool boolean() const { return std::get<bool>(v_); }
  std::int64_t integer() const { return std::get<std::int64_t>(v_); }
  double floating() const { return std::get<double>(v_); }
  const std::string& string() const { return std::get<std::string>(v_); }
  const ListData& list() const { return *std::get<std::shared_ptr<const ListData>>(v_); }
  const DictData& dict() const { return *std::get<std::shared_ptr<const DictData>>(v_); }
  NamespaceData& ns() const { return *std::get<std::shared_ptr<NamespaceData>>(v_); }

  /// A bool or int as int64 (Python's int(True) == 1); requires is_bool() || is_int().
  std::int64_t as_int() const { return is_bool() ? std::int64_t{boolean()} : integer(); }
  /// A number as double; requires is_number().
  double as_float() const { return is_float() ? floating() : static_cast<double>(as_int()); }

  /// Nesting depth: 0 for scalars, 1 + the deepest element for lists / dicts, 1 for a namespace.
  int depth() const;
  /// Whether a namespace is this value or inside it.
  bool holds_namespace() const;

  /// Python's bool(x) (undefined is false).
  bool truthy() const;
  /// Python's type name for messages: "str", "int", "NoneType", "list", "dict", "Namespace", "Undefined".
  const char* type_name() const;

 private:
  Storage v_;
};

struct ListData {
  std::vector<Value> items;
  int depth = 1;
  bool holds_namespace = false;
};

/// A string-keyed dict in insertion order (Python 3.7+ dicts).
struct DictData {
  std::vector<std::pair<std::string, Value>> items;
  int depth = 1;
  bool holds_namespace = false;
  /// The value of `key`, or nullptr.
  const Value* find(std::string_view key) const;
};

/// jinja2's namespace(): attributes assignable with `{% set ns.attr = value %}`.
struct NamespaceData {
  std::vector<std::pair<std::string, Value>> attrs;
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);
};

/// A list / dict value of these items (depth and namespace flag computed from them).
Value make_list(std::vector<Value> items);
Value make_dict(std::vector<std::pair<std::string, Value>> items);
/// An undefined value whose use fails with "'<name>' is undefined".
Value undefined_name(std::string_view name);

/// Python's `a == b`: numbers by value (1 == 1.0 == True), strings, None, lists element-wise,
/// dicts as key → value sets; undefined equals undefined.
bool equals(const Value& a, const Value& b);
/// Python's str(x) as Jinja2 prints it: undefined → "", None → "None", True → "True",
/// floats as repr (1.0, 1e+16), lists / dicts as their repr (['a', 1]).
std::string to_str(const Value& v);
/// Python's repr(x) (strings quoted: 'it' / "it's").
std::string to_repr(const Value& v);
/// Python's repr(float): shortest round-trip digits, exponent form below 1e-4 and from 1e16.
std::string float_repr(double f);

}  // namespace peregrine::jinja
