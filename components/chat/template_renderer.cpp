#include "chat/template_renderer.h"

#include <memory>

#include "chat/template_builtins.h"
#include "chat/template_error.h"
#include "chat/template_lexer.h"

namespace mi::chat {
namespace {

struct Scope {
  std::shared_ptr<Scope> parent;
  Dict variables;
};

enum class Flow { kNormal, kBreak, kContinue };

bool contains_namespace(const Value& value) {
  if (value.is_namespace()) return true;
  if (value.is_list()) {
    for (const Value& item : value.as_list()) {
      if (contains_namespace(item)) return true;
    }
  } else if (value.is_dict()) {
    for (const auto& entry : value.as_dict().entries) {
      if (contains_namespace(entry.second)) return true;
    }
  }
  return false;
}

class Renderer {
 public:
  Renderer(const Dict& variables, const RenderLimits& limits) : limits_(limits), globals_(builtin_globals()) {
    scope_ = std::make_shared<Scope>();
    scope_->variables = variables;
    root_ = scope_;
  }

  std::string render(const Body& body) {
    std::string out;
    out_ = &out;
    exec_body(body);
    return out;
  }

 private:
  // ---- bookkeeping ------------------------------------------------------------------------------------------

  struct DepthGuard {
    DepthGuard(Renderer& r, SourcePos pos) : renderer(r) {
      if (++renderer.depth_ > renderer.limits_.max_depth) {
        throw TemplateError(pos, "RecursionError: template evaluation nested deeper than " +
                                     std::to_string(renderer.limits_.max_depth) + " levels");
      }
      if (++renderer.steps_ > renderer.limits_.max_steps) {
        throw TemplateError(pos, "template exceeded the limit of " + std::to_string(renderer.limits_.max_steps) +
                                     " evaluation steps");
      }
    }
    ~DepthGuard() { --renderer.depth_; }
    Renderer& renderer;
  };

  // Runs `fn` in a new child scope of `parent` and restores the current scope afterwards.
  template <class Fn>
  auto in_scope(std::shared_ptr<Scope> parent, Fn&& fn) {
    auto child = std::make_shared<Scope>();
    child->parent = std::move(parent);
    std::shared_ptr<Scope> saved = scope_;
    scope_ = child;
    struct Restore {
      Renderer& r;
      std::shared_ptr<Scope> saved;
      ~Restore() { r.scope_ = saved; }
    } restore{*this, std::move(saved)};
    return fn();
  }

  // Renders `body` into a separate buffer (macros, set blocks, filter blocks).
  std::string capture(const Body& body) {
    std::string buffer;
    std::string* saved = out_;
    out_ = &buffer;
    struct Restore {
      Renderer& r;
      std::string* saved;
      ~Restore() { r.out_ = saved; }
    } restore{*this, saved};
    exec_body(body);
    return buffer;
  }

  void emit(const std::string& text, SourcePos pos) {
    if (out_->size() + text.size() > limits_.max_output_bytes) {
      throw TemplateError(pos, "rendered output exceeds the limit of " + std::to_string(limits_.max_output_bytes) + " bytes");
    }
    *out_ += text;
  }

  Value lookup(const std::string& name) const {
    for (const Scope* s = scope_.get(); s; s = s->parent.get()) {
      if (const Value* v = s->variables.find(name)) return *v;
    }
    if (const Value* v = globals_.find(name)) return *v;
    return Value::undefined("UndefinedError: '" + name + "' is undefined");
  }

  void assign(const AssignTarget& target, const Value& value) {
    if (!target.attribute.empty()) {
      const Value ns = lookup(target.names[0]);
      if (!ns.is_namespace()) {
        value_fail("TemplateRuntimeError: cannot assign attribute on non-namespace object");
      }
      if (contains_namespace(value)) {  // a namespace reachable from itself would be a reference cycle
        value_fail("TemplateRuntimeError: storing a namespace inside a namespace is not supported");
      }
      ns.as_namespace().attributes.set(target.attribute, value);
      return;
    }
    if (!target.unpack) {
      scope_->variables.set(target.names[0], value);
      return;
    }
    const std::vector<Value> items = iterate(value);
    if (items.size() < target.names.size()) {
      value_fail("ValueError: not enough values to unpack (expected ", std::to_string(target.names.size()), ", got ",
                 std::to_string(items.size()), ")");
    }
    if (items.size() > target.names.size()) {
      value_fail("ValueError: too many values to unpack (expected ", std::to_string(target.names.size()), ")");
    }
    for (size_t i = 0; i < items.size(); ++i) scope_->variables.set(target.names[i], items[i]);
  }

  // ---- statements -------------------------------------------------------------------------------------------

  Flow exec_body(const Body& body) {
    for (const StmtPtr& stmt : body) {
      const Flow flow = exec(*stmt);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec(const Stmt& stmt) {
    DepthGuard guard(*this, stmt.pos);
    try {
      return exec_statement(stmt);
    } catch (const ValueError& e) {
      throw TemplateError(stmt.pos, e.what());
    }
  }

  Flow exec_statement(const Stmt& stmt) {
    switch (stmt.kind) {
      case StmtKind::kText:
        emit(stmt.text, stmt.pos);
        return Flow::kNormal;
      case StmtKind::kOutput:
        emit(eval(*stmt.expr).to_output(), stmt.pos);
        return Flow::kNormal;
      case StmtKind::kIf:
        for (size_t i = 0; i < stmt.conditions.size(); ++i) {
          if (eval(*stmt.conditions[i]).truthy()) return exec_body(stmt.bodies[i]);
        }
        return exec_body(stmt.else_body);
      case StmtKind::kFor:
        return exec_for(stmt);
      case StmtKind::kSet:
        assign(stmt.target, eval(*stmt.expr));
        return Flow::kNormal;
      case StmtKind::kSetBlock:
        scope_->variables.set(stmt.text, Value::string(capture(stmt.body)));
        return Flow::kNormal;
      case StmtKind::kMacro:
        define_macro(stmt);
        return Flow::kNormal;
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
      case StmtKind::kWith: {
        Dict bound;
        for (const auto& [name, expr] : stmt.assignments) bound.set(name, eval(*expr));
        return in_scope(scope_, [&] {
          scope_->variables = std::move(bound);
          return exec_body(stmt.body);
        });
      }
      case StmtKind::kFilterBlock: {
        const std::string text = capture(stmt.body);
        emit(apply_filter_chain(*stmt.expr, Value::string(text)).to_output(), stmt.pos);
        return Flow::kNormal;
      }
      case StmtKind::kGeneration:
        return exec_body(stmt.body);
    }
    return Flow::kNormal;
  }

  Value make_loop(size_t index, size_t length, const std::vector<Value>& items) {
    Dict loop;
    const auto i = static_cast<int64_t>(index);
    const auto n = static_cast<int64_t>(length);
    loop.entries.reserve(12);
    loop.entries.emplace_back("index", Value::integer(i + 1));
    loop.entries.emplace_back("index0", Value::integer(i));
    loop.entries.emplace_back("revindex", Value::integer(n - i));
    loop.entries.emplace_back("revindex0", Value::integer(n - i - 1));
    loop.entries.emplace_back("first", Value::boolean(index == 0));
    loop.entries.emplace_back("last", Value::boolean(index + 1 == length));
    loop.entries.emplace_back("length", Value::integer(n));
    loop.entries.emplace_back("depth", Value::integer(1));
    loop.entries.emplace_back("depth0", Value::integer(0));
    loop.entries.emplace_back("previtem", index > 0 ? items[index - 1]
                                                    : Value::undefined("UndefinedError: there is no previous item"));
    loop.entries.emplace_back("nextitem", index + 1 < length ? items[index + 1]
                                                             : Value::undefined("UndefinedError: there is no next item"));
    loop.entries.emplace_back("cycle", Value::callable("loop.cycle", [index](const CallArgs& args) {
      if (args.positional.empty()) value_fail("TypeError: no items for cycling given");
      return args.positional[index % args.positional.size()];
    }));
    return Value::dict(std::move(loop));
  }

  Flow exec_for(const Stmt& stmt) {
    std::vector<Value> items = iterate(eval(*stmt.expr));
    const std::shared_ptr<Scope> outer = scope_;
    if (stmt.condition) {  // `for x in xs if cond`: filtered before loop.index etc. are computed
      std::vector<Value> kept;
      for (Value& item : items) {
        const bool keep = in_scope(outer, [&] {
          assign(stmt.target, item);
          return eval(*stmt.condition).truthy();
        });
        if (keep) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      in_scope(outer, [&] { return exec_body(stmt.else_body); });
      return Flow::kNormal;
    }
    for (size_t i = 0; i < items.size(); ++i) {
      if (++steps_ > limits_.max_steps) {  // an empty body still costs a step per iteration
        throw TemplateError(stmt.pos, "template exceeded the limit of " + std::to_string(limits_.max_steps) +
                                          " evaluation steps");
      }
      const Flow flow = in_scope(outer, [&] {
        scope_->variables.set("loop", make_loop(i, items.size(), items));
        assign(stmt.target, items[i]);
        return exec_body(stmt.body);
      });
      if (flow == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  // The macro refers to its defining scope weakly: the scope holds the macro, so a strong reference would be
  // a cycle (a leak). A macro that outlives its scope (stored in a namespace) runs in the template's scope.
  void define_macro(const Stmt& stmt) {
    const std::weak_ptr<Scope> definition_scope = scope_;
    const Stmt* macro = &stmt;
    scope_->variables.set(stmt.text, Value::callable(stmt.text, [this, macro, definition_scope](const CallArgs& args) {
      std::shared_ptr<Scope> scope = definition_scope.lock();
      return call_macro(*macro, scope ? scope : root_, args);
    }));
  }

  Value call_macro(const Stmt& macro, const std::shared_ptr<Scope>& definition_scope, const CallArgs& args) {
    DepthGuard guard(*this, macro.pos);
    if (args.positional.size() > macro.params.size()) {
      value_fail("TypeError: macro '", macro.text, "' takes not more than ", std::to_string(macro.params.size()),
                 " argument(s)");
    }
    for (const auto& [name, value] : args.keyword) {
      bool known = false;
      for (const MacroParam& p : macro.params) known = known || p.name == name;
      if (!known) value_fail("TypeError: macro '", macro.text, "' takes no keyword argument '", name, "'");
    }
    return in_scope(definition_scope, [&] {
      for (size_t i = 0; i < macro.params.size(); ++i) {
        const MacroParam& param = macro.params[i];
        const Value* given = i < args.positional.size() ? &args.positional[i] : nullptr;
        for (const auto& [name, value] : args.keyword) {
          if (name == param.name) {
            if (given) value_fail("TypeError: macro '", macro.text, "' got multiple values for argument '", name, "'");
            given = &value;
          }
        }
        Value bound = given ? *given
                            : param.default_value ? eval(*param.default_value)
                                                  : Value::undefined("UndefinedError: parameter '" + param.name +
                                                                     "' was not provided");
        scope_->variables.set(param.name, std::move(bound));
      }
      return Value::string(capture(macro.body));
    });
  }

  // ---- expressions ------------------------------------------------------------------------------------------

  Value eval(const Expr& expr) {
    DepthGuard guard(*this, expr.pos);
    try {
      return eval_expression(expr);
    } catch (const ValueError& e) {
      throw TemplateError(expr.pos, e.what());
    }
  }

  CallArgs eval_args(const Expr& expr) {
    CallArgs args;
    args.positional.reserve(expr.items.size());
    for (const ExprPtr& arg : expr.items) args.positional.push_back(eval(*arg));
    for (const auto& [name, arg] : expr.kwargs) args.keyword.emplace_back(name, eval(*arg));
    return args;
  }

  Value apply_filter_chain(const Expr& filter, const Value& input) {
    const Value source = filter.object ? apply_filter_chain(*filter.object, input) : input;
    return apply_filter(filter.name, source, eval_args(filter));
  }

  Value eval_expression(const Expr& expr) {
    switch (expr.kind) {
      case ExprKind::kLiteral:
        return expr.value;
      case ExprKind::kName:
        return lookup(expr.name);
      case ExprKind::kList: {
        std::vector<Value> items;
        items.reserve(expr.items.size());
        for (const ExprPtr& item : expr.items) items.push_back(eval(*item));
        return Value::list(std::move(items), expr.is_tuple);
      }
      case ExprKind::kDict: {
        Dict dict;
        for (size_t i = 0; i < expr.items.size(); ++i) {
          const Value key = eval(*expr.items[i]);
          if (!key.is_string()) {
            value_fail("TypeError: dict keys must be strings in this renderer, got ", key.type_name());
          }
          dict.set(key.as_string(), eval(*expr.values[i]));
        }
        return Value::dict(std::move(dict));
      }
      case ExprKind::kAttribute:
        return get_attribute(eval(*expr.object), expr.name);
      case ExprKind::kSubscript: {
        const Value object = eval(*expr.object);
        return get_item(object, eval(*expr.index));
      }
      case ExprKind::kSlice: {
        const Value object = eval(*expr.object);
        const Value start = expr.start ? eval(*expr.start) : Value::none();
        const Value stop = expr.stop ? eval(*expr.stop) : Value::none();
        const Value step = expr.step ? eval(*expr.step) : Value::none();
        return get_slice(object, &start, &stop, &step);
      }
      case ExprKind::kCall: {
        const Value callee = eval(*expr.object);
        const CallArgs args = eval_args(expr);
        callee.require_defined();
        if (!callee.is_callable()) value_fail("TypeError: '", callee.type_name(), "' object is not callable");
        return callee.as_callable().call(args);
      }
      case ExprKind::kFilter: {
        const Value input = expr.object ? eval(*expr.object) : Value::none();
        return apply_filter(expr.name, input, eval_args(expr));
      }
      case ExprKind::kTest: {
        const Value input = eval(*expr.object);
        return Value::boolean(apply_test(expr.name, input, eval_args(expr)) != expr.negated);
      }
      case ExprKind::kUnary: {
        const Value operand = eval(*expr.right);
        if (expr.name == "not") return Value::boolean(!operand.truthy());
        if (expr.name == "-") return negate(operand);
        return unary_plus(operand);
      }
      case ExprKind::kBinary: {
        const Value left = eval(*expr.left);
        if (expr.name == "and") return left.truthy() ? eval(*expr.right) : left;
        if (expr.name == "or") return left.truthy() ? left : eval(*expr.right);
        const Value right = eval(*expr.right);
        if (expr.name == "~") return concat_operation(left, right);
        return binary_operation(expr.name, left, right);
      }
      case ExprKind::kCompare: {
        Value left = eval(*expr.left);
        for (size_t i = 0; i < expr.ops.size(); ++i) {
          Value right = eval(*expr.operands[i]);
          if (!compare(expr.ops[i], left, right)) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case ExprKind::kConditional:
        if (eval(*expr.condition).truthy()) return eval(*expr.then);
        if (expr.otherwise) return eval(*expr.otherwise);
        return Value::undefined("UndefinedError: the inline if-expression on line " + std::to_string(expr.pos.line) +
                                " evaluated to false and no else section was defined.");
    }
    return Value();
  }

  const RenderLimits& limits_;
  Dict globals_;
  std::shared_ptr<Scope> scope_;
  std::shared_ptr<Scope> root_;
  std::string* out_ = nullptr;
  uint64_t steps_ = 0;
  int depth_ = 0;
};

}  // namespace

std::string render_template(const Body& body, const Dict& variables, const RenderLimits& limits) {
  const ScopedValueLimits value_limits(limits.values);
  return Renderer(variables, limits).render(body);
}

}  // namespace mi::chat
