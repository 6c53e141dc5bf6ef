#include "tokenizer/jinja/evaluator.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>

#include "tokenizer/jinja/call_args.h"
#include "tokenizer/jinja/filters.h"
#include "tokenizer/jinja/globals.h"
#include "tokenizer/jinja/methods.h"
#include "tokenizer/jinja/operations.h"
#include "tokenizer/jinja/tests.h"

namespace peregrine::jinja {
namespace {

enum class Flow { kNormal, kBreak, kContinue };

Status at_line(int line, const Status& s) {
  return Status(s.code(), "chat template line " + std::to_string(line) + ": " + s.message());
}

template <typename T>
Expected<T> located(int line, Expected<T> r) {
  if (!r) return at_line(line, r.status());
  return r;
}

Status check_depth(int line, const Value& v) {
  if (v.depth() <= kMaxValueDepth) return Status::ok();
  return at_line(line, invalid_argument("value nested deeper than " + std::to_string(kMaxValueDepth) + " levels"));
}

class Evaluator {
 public:
  Evaluator(std::vector<std::pair<std::string, Value>> globals, const RenderLimits& limits) : limits_(limits) {
    scopes_.emplace_back(globals.begin(), globals.end());
    scopes_.emplace_back();  // the template's own top-level assignments
  }

  Expected<std::string> run(const Body& body) {
    const auto flow = exec(body);
    if (!flow) return flow.status();
    return std::move(out_);
  }

 private:
  using Scope = std::unordered_map<std::string, Value>;

  // ---- statements ----

  Expected<Flow> exec(const Body& body) {
    for (const Stmt& s : body) {
      PEREGRINE_ASSIGN_OR_RETURN(const Flow flow, std::visit([&](const auto& node) { return exec_node(node, s.line); }, s.node));
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Expected<Flow> write(int line, std::string_view text) {
    if (out_.size() + text.size() > limits_.max_output_bytes) {
      return at_line(line, invalid_argument("output longer than " + std::to_string(limits_.max_output_bytes) + " bytes"));
    }
    out_.append(text);
    return Flow::kNormal;
  }

  Expected<Flow> exec_node(const TextStmt& s, int line) { return write(line, s.text); }

  Expected<Flow> exec_node(const OutputStmt& s, int line) {
    PEREGRINE_ASSIGN_OR_RETURN(const Value v, eval(*s.expr));
    return write(line, to_str(v));
  }

  Expected<Flow> exec_node(const IfStmt& s, int) {
    for (const auto& [cond, body] : s.branches) {
      PEREGRINE_ASSIGN_OR_RETURN(const Value c, eval(*cond));
      if (c.truthy()) return exec(body);
    }
    return exec(s.otherwise);
  }

  // Binds `targets` to `item` in the innermost scope, unpacking when there are several.
  Status bind(int line, const std::vector<std::string>& targets, const Value& item) {
    if (targets.size() == 1) {
      scopes_.back()[targets[0]] = item;
      return Status::ok();
    }
    PEREGRINE_ASSIGN_OR_RETURN(const auto parts, located(line, iterate(item)));
    if (parts.size() != targets.size()) {
      return at_line(line, invalid_argument(parts.size() < targets.size() ? "not enough values to unpack" : "too many values to unpack"));
    }
    for (std::size_t i = 0; i < parts.size(); ++i) scopes_.back()[targets[i]] = parts[i];
    return Status::ok();
  }

  // The items of a for loop after its `if` filter (evaluated with the targets bound).
  Expected<std::vector<Value>> loop_items(const ForStmt& s, int line) {
    PEREGRINE_ASSIGN_OR_RETURN(const Value iterable, eval(*s.iterable));
    PEREGRINE_ASSIGN_OR_RETURN(std::vector<Value> items, located(line, iterate(iterable)));
    if (!s.filter) return items;
    std::vector<Value> kept;
    for (Value& item : items) {
      ScopeGuard scope(scopes_);
      PEREGRINE_RETURN_IF_ERROR(bind(line, s.targets, item));
      PEREGRINE_ASSIGN_OR_RETURN(const Value keep, eval(*s.filter));
      if (keep.truthy()) kept.push_back(std::move(item));
    }
    return kept;
  }

  static Value loop_object(const std::vector<Value>& items, std::size_t i) {
    const auto n = static_cast<std::int64_t>(items.size());
    const auto k = static_cast<std::int64_t>(i);
    return make_dict({{"index0", Value(k)},
                      {"index", Value(k + 1)},
                      {"revindex0", Value(n - k - 1)},
                      {"revindex", Value(n - k)},
                      {"first", Value(k == 0)},
                      {"last", Value(k == n - 1)},
                      {"length", Value(n)},
                      {"previtem", k > 0 ? items[i - 1] : Value(Undefined{"there is no previous item"})},
                      {"nextitem", k + 1 < n ? items[i + 1] : Value(Undefined{"there is no next item"})},
                      {"depth0", Value(0)},
                      {"depth", Value(1)}});
  }

  Expected<Flow> exec_node(const ForStmt& s, int line) {
    PEREGRINE_ASSIGN_OR_RETURN(const std::vector<Value> items, loop_items(s, line));
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (++iterations_ > limits_.max_loop_iterations) {
        return at_line(line, invalid_argument("more than " + std::to_string(limits_.max_loop_iterations) + " loop iterations"));
      }
      ScopeGuard scope(scopes_);
      PEREGRINE_RETURN_IF_ERROR(bind(line, s.targets, items[i]));
      scopes_.back()["loop"] = loop_object(items, i);
      PEREGRINE_ASSIGN_OR_RETURN(const Flow flow, exec(s.body));
      if (flow == Flow::kBreak) break;
    }
    if (items.empty()) return exec(s.otherwise);
    return Flow::kNormal;
  }

  Expected<Flow> exec_node(const SetStmt& s, int line) {
    Value value;
    if (s.value) {
      PEREGRINE_ASSIGN_OR_RETURN(value, eval(*s.value));
    } else {
      PEREGRINE_ASSIGN_OR_RETURN(std::string text, capture(s.body));
      value = Value(std::move(text));
    }
    if (s.attr.empty()) {
      PEREGRINE_RETURN_IF_ERROR(bind(line, s.targets, value));
      return Flow::kNormal;
    }
    const Value target = lookup(s.targets[0]);
    if (!target.is_namespace()) {
      return at_line(line, invalid_argument("cannot assign attribute '" + s.attr + "' on a " + target.type_name() + " (only on namespace())"));
    }
    if (value.holds_namespace()) return at_line(line, invalid_argument("a namespace cannot hold another namespace"));
    target.ns().set(s.attr, std::move(value));
    return Flow::kNormal;
  }

  Expected<Flow> exec_node(const LoopControlStmt& s, int) { return s.is_break ? Flow::kBreak : Flow::kContinue; }

  Expected<Flow> exec_node(const MacroStmt& s, int) {
    macros_[s.name] = &s;
    return Flow::kNormal;
  }

  // A macro call: its body rendered in a scope of its own above the globals and the template's
  // top-level names (not the caller's locals), the parameters bound from `args` (missing ones
  // take their default, else stay undefined, as in Jinja2; extra ones go to varargs / kwargs).
  Expected<Value> call_macro(const MacroStmt& m, const CallArgs& args, int line) {
    if (macro_depth_ >= kMaxMacroDepth) {
      return at_line(line, invalid_argument("macro calls nested deeper than " + std::to_string(kMaxMacroDepth)));
    }
    Scope bound;
    std::vector<Value> varargs;
    for (std::size_t i = 0; i < args.positional.size(); ++i) {
      if (i < m.params.size()) {
        bound[m.params[i].first] = args.positional[i];
      } else {
        varargs.push_back(args.positional[i]);
      }
    }
    std::vector<std::pair<std::string, Value>> kwargs;
    for (const auto& [key, v] : args.keyword) {
      const bool param = std::any_of(m.params.begin(), m.params.end(), [&](const auto& p) { return p.first == key; });
      if (param) {
        bound[key] = v;
      } else {
        kwargs.emplace_back(key, v);
      }
    }
    bound["varargs"] = make_list(std::move(varargs));
    bound["kwargs"] = make_dict(std::move(kwargs));
    std::vector<Scope> callers(std::make_move_iterator(scopes_.begin() + 2), std::make_move_iterator(scopes_.end()));
    scopes_.resize(2);
    scopes_.push_back(std::move(bound));
    ++macro_depth_;
    const Status defaults = bind_defaults(m);
    Expected<std::string> text = defaults ? capture(m.body) : Expected<std::string>(defaults);
    --macro_depth_;
    scopes_.resize(2);
    for (Scope& s : callers) scopes_.push_back(std::move(s));
    if (!text) return text.status();
    return Value(std::move(*text));
  }

  // The defaults of the parameters the call left out, evaluated in the macro's scope.
  Status bind_defaults(const MacroStmt& m) {
    for (const auto& [name, default_value] : m.params) {
      if (scopes_.back().contains(name)) continue;
      if (!default_value) {
        scopes_.back()[name] = undefined_name(name);
        continue;
      }
      PEREGRINE_ASSIGN_OR_RETURN(Value v, eval(*default_value));
      scopes_.back()[name] = std::move(v);
    }
    return Status::ok();
  }

  Expected<Flow> exec_node(const FilterBlockStmt& s, int line) {
    PEREGRINE_ASSIGN_OR_RETURN(std::string text, capture(s.body));
    if (s.name.empty()) return write(line, text);
    PEREGRINE_ASSIGN_OR_RETURN(const CallArgs args, eval_args(s.args));
    PEREGRINE_ASSIGN_OR_RETURN(const Value v, located(line, apply_filter(s.name, Value(std::move(text)), args)));
    return write(line, to_str(v));
  }

  // The output of `body`, rendered aside.
  Expected<std::string> capture(const Body& body) {
    std::string saved = std::move(out_);
    out_.clear();
    const auto flow = exec(body);
    std::string text = std::move(out_);
    out_ = std::move(saved);
    if (!flow) return flow.status();
    return text;
  }

  // ---- expressions ----

  Expected<Value> eval(const Expr& e) {
    return std::visit([&](const auto& node) { return eval_node(node, e.line); }, e.node);
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      const auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    return undefined_name(name);
  }

  Expected<CallArgs> eval_args(const Args& args) {
    CallArgs out;
    for (const ExprPtr& a : args.positional) {
      PEREGRINE_ASSIGN_OR_RETURN(Value v, eval(*a));
      out.positional.push_back(std::move(v));
    }
    for (const auto& [k, a] : args.keyword) {
      PEREGRINE_ASSIGN_OR_RETURN(Value v, eval(*a));
      out.keyword.emplace_back(k, std::move(v));
    }
    return out;
  }

  Expected<Value> eval_node(const Literal& n, int) { return n.value; }
  // A name; a global function's or a macro's name used as a value (`strftime_now is defined`, as
  // Llama 3.x templates ask) is defined, printed as Python prints a function.
  Expected<Value> eval_node(const Name& n, int) {
    Value v = lookup(n.name);
    if (!v.is_undefined()) return v;
    if (macros_.contains(n.name)) return Value("<macro " + n.name + ">");
    if (is_global_function(n.name)) return Value("<built-in function " + n.name + ">");
    return v;
  }

  Expected<Value> eval_node(const ListLiteral& n, int line) {
    std::vector<Value> items;
    for (const ExprPtr& item : n.items) {
      PEREGRINE_ASSIGN_OR_RETURN(Value v, eval(*item));
      items.push_back(std::move(v));
    }
    Value list = make_list(std::move(items));
    PEREGRINE_RETURN_IF_ERROR(check_depth(line, list));
    return list;
  }

  Expected<Value> eval_node(const DictLiteral& n, int line) {
    std::vector<std::pair<std::string, Value>> items;
    for (const auto& [key_expr, value_expr] : n.items) {
      PEREGRINE_ASSIGN_OR_RETURN(const Value key, eval(*key_expr));
      if (!key.is_string()) return at_line(line, invalid_argument(std::string("dict keys must be strings, not ") + key.type_name()));
      PEREGRINE_ASSIGN_OR_RETURN(Value v, eval(*value_expr));
      auto same = std::find_if(items.begin(), items.end(), [&](const auto& kv) { return kv.first == key.string(); });
      if (same != items.end()) {
        same->second = std::move(v);
      } else {
        items.emplace_back(key.string(), std::move(v));
      }
    }
    Value dict = make_dict(std::move(items));
    PEREGRINE_RETURN_IF_ERROR(check_depth(line, dict));
    return dict;
  }

  Expected<Value> eval_node(const GetAttr& n, int line) {
    PEREGRINE_ASSIGN_OR_RETURN(const Value object, eval(*n.object));
    return located(line, get_attr(object, n.attr));
  }

  Expected<Value> eval_node(const GetItem& n, int line) {
    PEREGRINE_ASSIGN_OR_RETURN(const Value object, eval(*n.object));
    PEREGRINE_ASSIGN_OR_RETURN(const Value key, eval(*n.index));
    return located(line, get_item(object, key));
  }

  Expected<std::optional<std::int64_t>> slice_bound(const ExprPtr& e, int line) {
    if (!e) return std::optional<std::int64_t>{};
    PEREGRINE_ASSIGN_OR_RETURN(const Value v, eval(*e));
    if (v.is_none()) return std::optional<std::int64_t>{};
    PEREGRINE_ASSIGN_OR_RETURN(const std::int64_t i, located(line, int_arg(v, "slice index")));
    return std::optional<std::int64_t>(i);
  }

  Expected<Value> eval_node(const SliceExpr& n, int line) {
    PEREGRINE_ASSIGN_OR_RETURN(const Value object, eval(*n.object));
    PEREGRINE_ASSIGN_OR_RETURN(const auto start, slice_bound(n.start, line));
    PEREGRINE_ASSIGN_OR_RETURN(const auto stop, slice_bound(n.stop, line));
    PEREGRINE_ASSIGN_OR_RETURN(const auto step, slice_bound(n.step, line));
    return located(line, slice(object, start, stop, step));
  }

  Expected<Value> eval_node(const Call& n, int line) {
    PEREGRINE_ASSIGN_OR_RETURN(const CallArgs args, eval_args(n.args));
    if (const auto* method = std::get_if<GetAttr>(&n.callee->node)) {
      PEREGRINE_ASSIGN_OR_RETURN(const Value object, eval(*method->object));
      return located(line, call_method(object, method->attr, args));
    }
    const auto* name = std::get_if<Name>(&n.callee->node);
    if (name) {
      if (const auto macro = macros_.find(name->name); macro != macros_.end()) return call_macro(*macro->second, args, line);
    }
    if (name && is_global_function(name->name)) return located(line, call_global(name->name, args));
    PEREGRINE_ASSIGN_OR_RETURN(const Value callee, eval(*n.callee));
    if (callee.is_undefined()) return at_line(line, invalid_argument(callee.undefined().what));
    return at_line(line, invalid_argument(std::string("'") + callee.type_name() + "' object is not callable"));
  }

  Expected<Value> eval_node(const FilterExpr& n, int line) {
    PEREGRINE_ASSIGN_OR_RETURN(const Value v, eval(*n.value));
    PEREGRINE_ASSIGN_OR_RETURN(const CallArgs args, eval_args(n.args));
    return located(line, apply_filter(n.name, v, args));
  }

  Expected<Value> eval_node(const TestExpr& n, int line) {
    PEREGRINE_ASSIGN_OR_RETURN(const Value v, eval(*n.value));
    PEREGRINE_ASSIGN_OR_RETURN(const CallArgs args, eval_args(n.args));
    PEREGRINE_ASSIGN_OR_RETURN(const bool result, located(line, apply_test(n.name, v, args)));
    return Value(result != n.negated);
  }

  Expected<Value> eval_node(const Unary& n, int line) {
    PEREGRINE_ASSIGN_OR_RETURN(const Value v, eval(*n.operand));
    if (n.op == UnaryOp::kNot) return Value(!v.truthy());
    return located(line, negate(v, n.op == UnaryOp::kNeg));
  }

  Expected<Value> eval_node(const Binary& n, int line) {
    PEREGRINE_ASSIGN_OR_RETURN(Value lhs, eval(*n.lhs));
    if (n.op == "and" && !lhs.truthy()) return lhs;
    if (n.op == "or" && lhs.truthy()) return lhs;
    PEREGRINE_ASSIGN_OR_RETURN(Value rhs, eval(*n.rhs));
    if (n.op == "and" || n.op == "or") return rhs;
    return located(line, binary_op(n.op, lhs, rhs));
  }

  Expected<Value> eval_node(const Conditional& n, int) {
    PEREGRINE_ASSIGN_OR_RETURN(const Value c, eval(*n.condition));
    if (c.truthy()) return eval(*n.then);
    if (n.otherwise) return eval(*n.otherwise);
    return Value(Undefined{"the conditional expression's condition was false and it has no else"});
  }

  // A fresh innermost scope for as long as it lives.
  class ScopeGuard {
   public:
    explicit ScopeGuard(std::vector<Scope>& scopes) : scopes_(scopes) { scopes_.emplace_back(); }
    ~ScopeGuard() { scopes_.pop_back(); }
    ScopeGuard(const ScopeGuard&) = delete;
    ScopeGuard& operator=(const ScopeGuard&) = delete;

   private:
    std::vector<Scope>& scopes_;
  };

  static constexpr int kMaxMacroDepth = 64;  // recursive macros (a schema printer) stop here

  RenderLimits limits_;
  std::vector<Scope> scopes_;
  std::unordered_map<std::string, const MacroStmt*> macros_;  // defined so far (the tree outlives the render)
  int macro_depth_ = 0;
  std::string out_;
  std::int64_t iterations_ = 0;
};

}  // namespace

Expected<std::string> render(const Body& body, std::vector<std::pair<std::string, Value>> globals, const RenderLimits& limits) {
  return Evaluator(std::move(globals), limits).run(body);
}

}  // namespace peregrine::jinja
