#include "chat/template_parser.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <initializer_list>
#include <limits>

#include "chat/template_builtins.h"
#include "chat/template_lexer.h"

namespace mi::chat {
namespace {

std::string describe(const Token& token) {
  switch (token.kind) {
    case TokenKind::kData: return "template text";
    case TokenKind::kVariableBegin: return "'{{'";
    case TokenKind::kVariableEnd: return "'}}'";
    case TokenKind::kBlockBegin: return "'{%'";
    case TokenKind::kBlockEnd: return "'%}'";
    case TokenKind::kName: return "'" + token.text + "'";
    case TokenKind::kString: return "string literal";
    case TokenKind::kInteger: case TokenKind::kFloat: return "number " + token.text;
    case TokenKind::kOperator: return "'" + token.text + "'";
    case TokenKind::kEnd: return "end of template";
  }
  return "token";
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse() {
    std::string end_tag;
    Body body = parse_body({}, &end_tag, SourcePos{}, "");
    return body;
  }

 private:
  // ---- token helpers ----------------------------------------------------------------------------------------
  const Token& current() const { return tokens_[index_]; }
  const Token& peek(size_t ahead = 1) const { return tokens_[std::min(index_ + ahead, tokens_.size() - 1)]; }
  void advance() {
    if (index_ + 1 < tokens_.size()) ++index_;
  }
  bool at_operator(const char* op) const { return current().kind == TokenKind::kOperator && current().text == op; }
  bool at_name(const char* name) const { return current().kind == TokenKind::kName && current().text == name; }
  [[noreturn]] void error(const Token& token, const std::string& message) const {
    throw TemplateError(token.pos, message);
  }
  void expect_operator(const char* op) {
    if (!at_operator(op)) error(current(), std::string("expected '") + op + "', got " + describe(current()));
    advance();
  }
  std::string expect_name(const char* what) {
    if (current().kind != TokenKind::kName) error(current(), std::string("expected ") + what + ", got " + describe(current()));
    std::string name = current().text;
    advance();
    return name;
  }
  void expect_block_end(const std::string& tag) {
    if (current().kind != TokenKind::kBlockEnd) {
      error(current(), "expected '%}' to end '{% " + tag + " %}', got " + describe(current()));
    }
    advance();
  }

  // Bounds recursion of the parser itself (nested parentheses, unary minus chains, nested blocks).
  struct DepthGuard {
    DepthGuard(Parser& p, const Token& at) : parser(p) {
      if (++parser.recursion_ > kMaxExpressionDepth + kMaxStatementNesting) {
        parser.error(at, "template nested too deeply");
      }
    }
    ~DepthGuard() { --parser.recursion_; }
    Parser& parser;
  };

  ExprPtr node(ExprKind kind, SourcePos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

  // Computes the subtree height and rejects trees deeper than kMaxExpressionDepth (long `a.b.c...` or
  // `1+1+1...` chains are built iteratively, so the parser's recursion bound alone does not cover them).
  ExprPtr finish(ExprPtr e) {
    int deepest = 0;
    auto see = [&](const ExprPtr& child) {
      if (child) deepest = std::max(deepest, child->depth);
    };
    for (const auto& c : e->items) see(c);
    for (const auto& c : e->values) see(c);
    for (const auto& c : e->kwargs) see(c.second);
    for (const auto& c : e->operands) see(c);
    for (const ExprPtr* c : {&e->object, &e->index, &e->start, &e->stop, &e->step, &e->left, &e->right,
                             &e->condition, &e->then, &e->otherwise}) {
      see(*c);
    }
    e->depth = deepest + 1;
    if (e->depth > kMaxExpressionDepth) throw TemplateError(e->pos, "expression nested too deeply");
    return e;
  }

  // ---- statements -------------------------------------------------------------------------------------------

  // Parses statements until `{% <one of end_tags> ...`; stores the tag found in *end_tag (the parser stays on
  // that tag's name). At top level (no end tags) parses to the end of the template.
  Body parse_body(std::initializer_list<const char*> end_tags, std::string* end_tag, SourcePos opened_at,
                  const std::string& opened_tag) {
    Body body;
    while (true) {
      const Token& token = current();
      switch (token.kind) {
        case TokenKind::kEnd:
          if (end_tags.size() == 0) return body;
          {
            std::string expected;
            for (const char* t : end_tags) expected += std::string(expected.empty() ? "" : " or ") + "'{% " + t + " %}'";
            throw TemplateError(opened_at, "unclosed '{% " + opened_tag + " %}' block: expected " + expected +
                                               " before the end of the template");
          }
        case TokenKind::kData: {
          auto stmt = std::make_unique<Stmt>();
          stmt->kind = StmtKind::kText;
          stmt->pos = token.pos;
          stmt->text = token.text;
          body.push_back(std::move(stmt));
          advance();
          break;
        }
        case TokenKind::kVariableBegin: {
          auto stmt = std::make_unique<Stmt>();
          stmt->kind = StmtKind::kOutput;
          stmt->pos = token.pos;
          advance();
          stmt->expr = parse_tuple(true, {});
          if (current().kind != TokenKind::kVariableEnd) {
            error(current(), "expected '}}', got " + describe(current()));
          }
          advance();
          body.push_back(std::move(stmt));
          break;
        }
        case TokenKind::kBlockBegin: {
          const Token& name = peek();
          if (name.kind == TokenKind::kName) {
            for (const char* t : end_tags) {
              if (name.text == t) {
                advance();  // onto the tag name
                *end_tag = name.text;
                return body;
              }
            }
          }
          body.push_back(parse_statement());
          break;
        }
        default:
          error(token, "unexpected " + describe(token));
      }
    }
  }

  // Consumes `name %}` of an end/else tag the body parser stopped at.
  void finish_end_tag(const std::string& tag) {
    advance();  // the tag name
    expect_block_end(tag);
  }

  StmtPtr parse_statement() {
    const Token& begin = current();
    DepthGuard guard(*this, begin);
    advance();  // {%
    const Token& name_token = current();
    if (name_token.kind != TokenKind::kName) error(name_token, "expected a tag name after '{%', got " + describe(name_token));
    const std::string tag = name_token.text;
    auto stmt = std::make_unique<Stmt>();
    stmt->pos = name_token.pos;
    advance();
    if (tag == "if") return parse_if(std::move(stmt));
    if (tag == "for") return parse_for(std::move(stmt));
    if (tag == "set") return parse_set(std::move(stmt));
    if (tag == "macro") return parse_macro(std::move(stmt));
    if (tag == "with") return parse_with(std::move(stmt));
    if (tag == "filter") return parse_filter_block(std::move(stmt));
    if (tag == "generation") {
      stmt->kind = StmtKind::kGeneration;
      expect_block_end(tag);
      std::string end;
      stmt->body = parse_body({"endgeneration"}, &end, stmt->pos, tag);
      finish_end_tag(end);
      return stmt;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) error(name_token, "'{% " + tag + " %}' outside of a for loop");
      stmt->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      expect_block_end(tag);
      return stmt;
    }
    static const char* const kUnsupported[] = {"include", "import", "from", "extends", "block", "call", "raw",
                                               "do", "autoescape", "trans", "pluralize", "print"};
    for (const char* unsupported : kUnsupported) {
      if (tag == unsupported) error(name_token, "unsupported tag '{% " + tag + " %}'");
    }
    if (tag.rfind("end", 0) == 0 || tag == "elif" || tag == "else") {
      error(name_token, "unexpected '{% " + tag + " %}' without a matching opening tag");
    }
    error(name_token, "unknown tag '{% " + tag + " %}'");
  }

  StmtPtr parse_if(StmtPtr stmt) {
    stmt->kind = StmtKind::kIf;
    const SourcePos opened = stmt->pos;
    stmt->conditions.push_back(parse_tuple(false, {}));
    expect_block_end("if");
    while (true) {
      std::string end;
      stmt->bodies.push_back(parse_body({"elif", "else", "endif"}, &end, opened, "if"));
      if (end == "elif") {
        advance();
        stmt->conditions.push_back(parse_tuple(false, {}));
        expect_block_end("elif");
        continue;
      }
      if (end == "else") {
        finish_end_tag(end);
        std::string endif;
        stmt->else_body = parse_body({"endif"}, &endif, opened, "if");
      }
      finish_end_tag("endif");
      return stmt;
    }
  }

  StmtPtr parse_for(StmtPtr stmt) {
    stmt->kind = StmtKind::kFor;
    const SourcePos opened = stmt->pos;
    stmt->target = parse_assign_target(false);
    if (!at_name("in")) error(current(), "expected 'in' in '{% for %}', got " + describe(current()));
    advance();
    stmt->expr = parse_tuple(false, {"recursive", "if"});
    if (at_name("if")) {
      advance();
      stmt->condition = parse_expression(true);
    }
    if (at_name("recursive")) error(current(), "unsupported: recursive for loops");
    expect_block_end("for");
    ++loop_depth_;
    std::string end;
    stmt->body = parse_body({"endfor", "else"}, &end, opened, "for");
    --loop_depth_;
    if (end == "else") {
      finish_end_tag(end);
      stmt->else_body = parse_body({"endfor"}, &end, opened, "for");
    }
    finish_end_tag("endfor");
    return stmt;
  }

  StmtPtr parse_set(StmtPtr stmt) {
    const SourcePos opened = stmt->pos;
    stmt->target = parse_assign_target(true);
    if (at_operator("=")) {
      advance();
      stmt->kind = StmtKind::kSet;
      stmt->expr = parse_tuple(true, {});
      expect_block_end("set");
      return stmt;
    }
    if (stmt->target.unpack || !stmt->target.attribute.empty()) {
      error(current(), "expected '=' in '{% set %}', got " + describe(current()));
    }
    if (current().kind != TokenKind::kBlockEnd) {
      error(current(), "expected '=' or '%}' in '{% set %}', got " + describe(current()));
    }
    advance();
    stmt->kind = StmtKind::kSetBlock;
    stmt->text = stmt->target.names[0];
    std::string end;
    stmt->body = parse_body({"endset"}, &end, opened, "set");
    finish_end_tag(end);
    return stmt;
  }

  StmtPtr parse_macro(StmtPtr stmt) {
    stmt->kind = StmtKind::kMacro;
    const SourcePos opened = stmt->pos;
    stmt->text = expect_name("a macro name");
    expect_operator("(");
    bool seen_default = false;
    while (!at_operator(")")) {
      if (!stmt->params.empty()) expect_operator(",");
      if (at_operator(")")) break;
      MacroParam param;
      param.name = expect_name("a macro parameter name");
      if (at_operator("=")) {
        advance();
        param.default_value = parse_expression(true);
        seen_default = true;
      } else if (seen_default) {
        error(current(), "macro parameter '" + param.name + "' without a default follows one with a default");
      }
      stmt->params.push_back(std::move(param));
    }
    advance();  // )
    expect_block_end("macro");
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;  // break/continue cannot cross a macro boundary
    std::string end;
    stmt->body = parse_body({"endmacro"}, &end, opened, "macro");
    loop_depth_ = saved_loop_depth;
    finish_end_tag(end);
    return stmt;
  }

  StmtPtr parse_with(StmtPtr stmt) {
    stmt->kind = StmtKind::kWith;
    const SourcePos opened = stmt->pos;
    while (current().kind != TokenKind::kBlockEnd) {
      if (!stmt->assignments.empty()) expect_operator(",");
      std::string name = expect_name("a variable name in '{% with %}'");
      expect_operator("=");
      stmt->assignments.emplace_back(std::move(name), parse_expression(true));
    }
    advance();
    std::string end;
    stmt->body = parse_body({"endwith"}, &end, opened, "with");
    finish_end_tag(end);
    return stmt;
  }

  StmtPtr parse_filter_block(StmtPtr stmt) {
    stmt->kind = StmtKind::kFilterBlock;
    const SourcePos opened = stmt->pos;
    stmt->expr = parse_filter(nullptr);
    while (at_operator("|")) stmt->expr = parse_filter(std::move(stmt->expr));
    expect_block_end("filter");
    std::string end;
    stmt->body = parse_body({"endfilter"}, &end, opened, "filter");
    finish_end_tag(end);
    return stmt;
  }

  // `x`, `a, b`, `(a, b)` or (set only) `ns.attr`.
  AssignTarget parse_assign_target(bool allow_namespace) {
    AssignTarget target;
    if (allow_namespace && current().kind == TokenKind::kName && peek().kind == TokenKind::kOperator &&
        peek().text == ".") {
      target.names.push_back(current().text);
      advance();
      advance();
      target.attribute = expect_name("an attribute name");
      return target;
    }
    const bool parenthesized = at_operator("(");
    if (parenthesized) advance();
    while (true) {
      target.names.push_back(expect_name("a variable name"));
      if (!at_operator(",")) break;
      target.unpack = true;
      advance();
      if (current().kind != TokenKind::kName) {  // Jinja2 rejects `a, = ...` and `for a, in ...`
        error(current(), "expected a variable name after ',', got " + describe(current()));
      }
    }
    if (parenthesized) {
      expect_operator(")");
      target.unpack = true;
    }
    for (const auto& name : target.names) {
      if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" ||
          name == "None") {
        error(current(), "cannot assign to constant '" + name + "'");
      }
    }
    return target;
  }

  // ---- expressions ------------------------------------------------------------------------------------------

  bool at_tuple_end(std::initializer_list<const char*> extra_end_names) const {
    const Token& t = current();
    if (t.kind == TokenKind::kBlockEnd || t.kind == TokenKind::kVariableEnd || t.kind == TokenKind::kEnd) return true;
    if (t.kind == TokenKind::kOperator && (t.text == ")" || t.text == "]" || t.text == "}")) return true;
    if (t.kind == TokenKind::kName) {
      for (const char* n : extra_end_names) {
        if (t.text == n) return true;
      }
    }
    return false;
  }

  // Comma-separated expressions; more than one (or a trailing comma) makes a tuple.
  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<const char*> extra_end_names) {
    const SourcePos pos = current().pos;
    std::vector<ExprPtr> items;
    bool saw_comma = false;
    while (true) {
      if (!items.empty()) {
        if (!at_operator(",")) break;
        advance();
        saw_comma = true;
        if (at_tuple_end(extra_end_names)) break;
      }
      items.push_back(parse_expression(with_condexpr));
    }
    if (!saw_comma) return std::move(items[0]);
    auto e = node(ExprKind::kList, pos);
    e->items = std::move(items);
    e->is_tuple = true;
    return finish(std::move(e));
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this, current());
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr expr = parse_or();
    while (at_name("if")) {
      auto e = node(ExprKind::kConditional, current().pos);
      advance();
      e->then = std::move(expr);
      e->condition = parse_or();
      if (at_name("else")) {
        advance();
        DepthGuard guard(*this, current());
        e->otherwise = parse_condexpr();
      }
      expr = finish(std::move(e));
    }
    return expr;
  }

  ExprPtr binary(const std::string& op, SourcePos pos, ExprPtr left, ExprPtr right) {
    auto e = node(ExprKind::kBinary, pos);
    e->name = op;
    e->left = std::move(left);
    e->right = std::move(right);
    return finish(std::move(e));
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      const SourcePos pos = current().pos;
      advance();
      left = binary("or", pos, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      const SourcePos pos = current().pos;
      advance();
      left = binary("and", pos, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      DepthGuard guard(*this, current());
      auto e = node(ExprKind::kUnary, current().pos);
      advance();
      e->name = "not";
      e->right = parse_not();
      return finish(std::move(e));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const SourcePos pos = current().pos;
    ExprPtr first = parse_math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> operands;
    while (true) {
      const Token& t = current();
      if (t.kind == TokenKind::kOperator &&
          (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" || t.text == ">=")) {
        ops.push_back(t.text);
        advance();
      } else if (at_name("in")) {
        ops.push_back("in");
        advance();
      } else if (at_name("not") && peek().kind == TokenKind::kName && peek().text == "in") {
        ops.push_back("not in");
        advance();
        advance();
      } else {
        break;
      }
      operands.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto e = node(ExprKind::kCompare, pos);
    e->left = std::move(first);
    e->ops = std::move(ops);
    e->operands = std::move(operands);
    return finish(std::move(e));
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (at_operator("+") || at_operator("-")) {
      const std::string op = current().text;
      const SourcePos pos = current().pos;
      advance();
      left = binary(op, pos, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (at_operator("~")) {
      const SourcePos pos = current().pos;
      advance();
      left = binary("~", pos, std::move(left), parse_math2());
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (at_operator("*") || at_operator("/") || at_operator("//") || at_operator("%")) {
      const std::string op = current().text;
      const SourcePos pos = current().pos;
      advance();
      left = binary(op, pos, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (at_operator("**")) {
      const SourcePos pos = current().pos;
      advance();
      left = binary("**", pos, std::move(left), parse_unary(true));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this, current());
    ExprPtr expr;
    if (at_operator("-") || at_operator("+")) {
      auto e = node(ExprKind::kUnary, current().pos);
      e->name = current().text;
      advance();
      e->right = parse_unary(false);
      expr = finish(std::move(e));
    } else {
      expr = parse_primary();
    }
    expr = parse_postfix(std::move(expr));
    if (with_filter) expr = parse_filter_expr(std::move(expr));
    return expr;
  }

  ExprPtr literal(SourcePos pos, Value value) {
    auto e = node(ExprKind::kLiteral, pos);
    e->value = std::move(value);
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = current();
    const SourcePos pos = t.pos;
    switch (t.kind) {
      case TokenKind::kName: {
        const std::string name = t.text;
        advance();
        if (name == "true" || name == "True") return literal(pos, Value::boolean(true));
        if (name == "false" || name == "False") return literal(pos, Value::boolean(false));
        if (name == "none" || name == "None") return literal(pos, Value::none());
        auto e = node(ExprKind::kName, pos);
        e->name = name;
        return e;
      }
      case TokenKind::kString: {
        std::string text;
        while (current().kind == TokenKind::kString) {  // adjacent literals concatenate
          text += current().text;
          advance();
        }
        return literal(pos, Value::string(std::move(text)));
      }
      case TokenKind::kInteger: {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(t.text.c_str(), &end, 10);
        if (errno == ERANGE) error(t, "integer literal " + t.text + " does not fit in 64 bits");
        advance();
        return literal(pos, Value::integer(v));
      }
      case TokenKind::kFloat: {
        const double v = std::strtod(t.text.c_str(), nullptr);
        advance();
        return literal(pos, Value::number(v));
      }
      case TokenKind::kOperator: {
        if (t.text == "(") {
          advance();
          if (at_operator(")")) {  // empty tuple
            advance();
            auto e = node(ExprKind::kList, pos);
            e->is_tuple = true;
            return e;
          }
          ExprPtr inner = parse_tuple(true, {});
          expect_operator(")");
          return inner;
        }
        if (t.text == "[") {
          advance();
          auto e = node(ExprKind::kList, pos);
          while (!at_operator("]")) {
            if (!e->items.empty()) {
              expect_operator(",");
              if (at_operator("]")) break;
            }
            e->items.push_back(parse_expression(true));
          }
          advance();
          return finish(std::move(e));
        }
        if (t.text == "{") {
          advance();
          auto e = node(ExprKind::kDict, pos);
          while (!at_operator("}")) {
            if (!e->items.empty()) {
              expect_operator(",");
              if (at_operator("}")) break;
            }
            e->items.push_back(parse_expression(true));
            expect_operator(":");
            e->values.push_back(parse_expression(true));
          }
          advance();
          return finish(std::move(e));
        }
        break;
      }
      default:
        break;
    }
    error(t, "unexpected " + describe(t) + " in an expression");
  }

  // Call arguments after '(' up to and including ')'.
  void parse_call_args(Expr& e) {
    expect_operator("(");
    while (!at_operator(")")) {
      if (!e.items.empty() || !e.kwargs.empty()) {
        expect_operator(",");
        if (at_operator(")")) break;
      }
      if (at_operator("*") || at_operator("**")) error(current(), "unsupported: *args / **kwargs in a call");
      if (current().kind == TokenKind::kName && peek().kind == TokenKind::kOperator && peek().text == "=") {
        std::string name = current().text;
        advance();
        advance();
        e.kwargs.emplace_back(std::move(name), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) error(current(), "positional argument follows keyword argument");
        e.items.push_back(parse_expression(true));
      }
    }
    advance();
  }

  ExprPtr parse_postfix(ExprPtr expr) {
    while (true) {
      if (at_operator(".")) {
        const SourcePos pos = current().pos;
        advance();
        if (current().kind == TokenKind::kName) {
          auto e = node(ExprKind::kAttribute, pos);
          e->name = current().text;
          advance();
          e->object = std::move(expr);
          expr = finish(std::move(e));
        } else if (current().kind == TokenKind::kInteger) {  // foo.0 is foo[0]
          auto e = node(ExprKind::kSubscript, pos);
          e->index = parse_primary();
          e->object = std::move(expr);
          expr = finish(std::move(e));
        } else {
          error(current(), "expected an attribute name after '.', got " + describe(current()));
        }
      } else if (at_operator("[")) {
        expr = parse_subscript(std::move(expr));
      } else if (at_operator("(")) {
        auto e = node(ExprKind::kCall, expr->pos);  // a call is located at its callee
        parse_call_args(*e);
        e->object = std::move(expr);
        expr = finish(std::move(e));
      } else {
        return expr;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr object) {
    const SourcePos pos = current().pos;
    advance();  // [
    ExprPtr parts[3];
    int colons = 0;
    while (!at_operator("]")) {
      if (at_operator(":")) {
        if (++colons > 2) error(current(), "too many ':' in a slice");
        advance();
        continue;
      }
      if (parts[colons]) error(current(), "expected ']' or ':' in a subscript, got " + describe(current()));
      parts[colons] = parse_expression(true);
      if (at_operator(",")) error(current(), "unsupported: tuple subscripts");
    }
    advance();  // ]
    if (colons == 0) {
      if (!parts[0]) error(current(), "empty subscript '[]'");
      auto e = node(ExprKind::kSubscript, pos);
      e->object = std::move(object);
      e->index = std::move(parts[0]);
      return finish(std::move(e));
    }
    auto e = node(ExprKind::kSlice, pos);
    e->object = std::move(object);
    e->start = std::move(parts[0]);
    e->stop = std::move(parts[1]);
    e->step = std::move(parts[2]);
    return finish(std::move(e));
  }

  ExprPtr parse_filter_expr(ExprPtr expr) {
    while (true) {
      if (at_operator("|")) {
        expr = parse_filter(std::move(expr));
      } else if (at_name("is")) {
        expr = parse_test(std::move(expr));
      } else if (at_operator("(")) {
        auto e = node(ExprKind::kCall, expr->pos);  // a call is located at its callee
        parse_call_args(*e);
        e->object = std::move(expr);
        expr = finish(std::move(e));
      } else {
        return expr;
      }
    }
  }

  // `| name` or `| name(args)`; with object null (filter blocks) starts at the name.
  ExprPtr parse_filter(ExprPtr object) {
    if (object) advance();  // |
    auto e = node(ExprKind::kFilter, current().pos);
    e->name = expect_name("a filter name");
    while (at_operator(".")) {
      advance();
      e->name += "." + expect_name("a filter name");
    }
    if (!has_filter(e->name)) throw TemplateError(e->pos, "unknown filter '" + e->name + "'");
    if (at_operator("(")) parse_call_args(*e);
    e->object = std::move(object);
    return finish(std::move(e));
  }

  ExprPtr parse_test(ExprPtr object) {
    auto e = node(ExprKind::kTest, current().pos);
    advance();  // is
    if (at_name("not")) {
      e->negated = true;
      advance();
    }
    const SourcePos name_pos = current().pos;
    e->name = expect_name("a test name after 'is'");
    while (at_operator(".")) {
      advance();
      e->name += "." + expect_name("a test name");
    }
    if (!has_test(e->name)) throw TemplateError(name_pos, "unknown test '" + e->name + "'");
    const Token& t = current();
    if (at_operator("(")) {
      parse_call_args(*e);
    } else if ((t.kind == TokenKind::kName || t.kind == TokenKind::kString || t.kind == TokenKind::kInteger ||
                t.kind == TokenKind::kFloat || at_operator("[") || at_operator("{")) &&
               !(at_name("else") || at_name("or") || at_name("and"))) {
      // One argument without parentheses: `x is divisibleby 3`, `x is sameas false`.
      if (at_name("is")) error(t, "cannot chain tests with 'is'");
      DepthGuard guard(*this, t);
      e->items.push_back(parse_postfix(parse_primary()));
    }
    e->object = std::move(object);
    return finish(std::move(e));
  }

  std::vector<Token> tokens_;
  size_t index_ = 0;
  int recursion_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

}  // namespace mi::chat
