#include "server/text/jinja/parser.h"

#include <algorithm>
#include <initializer_list>
#include <string>

#include "server/text/jinja/builtins.h"
#include "server/text/jinja/lexer.h"

namespace flashserve::jinja {
namespace {

using Names = std::initializer_list<std::string_view>;

std::string describe(const Token& t) {
  switch (t.type) {
    case TokenType::kData: return "template data";
    case TokenType::kVariableBegin: return "begin of print statement";
    case TokenType::kVariableEnd: return "end of print statement";
    case TokenType::kBlockBegin: return "begin of statement block";
    case TokenType::kBlockEnd: return "end of statement block";
    case TokenType::kName: return "'" + t.value + "'";
    case TokenType::kString: return "string";
    case TokenType::kInteger: return "integer";
    case TokenType::kFloat: return "float";
    case TokenType::kOperator: return "'" + t.value + "'";
    case TokenType::kEof: return "end of template";
  }
  return "token";
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  std::vector<Node> parse() {
    std::vector<Node> body = subparse({});
    if (cur().type != TokenType::kEof) fail("unexpected " + describe(cur()));
    return body;
  }

 private:
  // ---- the token stream ----
  const Token& cur() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool is_op(std::string_view op) const { return cur().type == TokenType::kOperator && cur().value == op; }
  bool is_name(std::string_view name) const { return cur().type == TokenType::kName && cur().value == name; }
  bool is_name_in(Names names) const {
    if (cur().type != TokenType::kName) return false;
    return std::find(names.begin(), names.end(), cur().value) != names.end();
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  [[noreturn]] void fail(const std::string& message) const {
    throw TemplateError(message, cur().line, false, cur().column);
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected '" + std::string(op) + "', got " + describe(cur()));
  }
  void expect_type(TokenType type, const char* what) {
    if (cur().type != type) fail(std::string("expected ") + what + ", got " + describe(cur()));
    next();
  }
  std::string expect_name() {
    if (cur().type != TokenType::kName) fail("expected a name, got " + describe(cur()));
    return next().value;
  }

  struct DepthGuard {
    DepthGuard(Parser* p, int* counter, int limit, const char* what) : counter(counter) {
      if (++*counter > limit) p->fail(std::string(what) + " nested too deeply");
    }
    ~DepthGuard() { --*counter; }
    int* counter;
  };

  // ---- statements ----
  std::vector<Node> subparse(Names end_names) {
    std::vector<Node> body;
    while (cur().type != TokenType::kEof) {
      const Token& t = cur();
      if (t.type == TokenType::kData) {
        Node n;
        n.kind = NodeKind::kText;
        n.line = t.line;
        n.text = t.value;
        body.push_back(std::move(n));
        next();
      } else if (t.type == TokenType::kVariableBegin) {
        next();
        Node n;
        n.kind = NodeKind::kOutput;
        n.line = t.line;
        n.expr = parse_tuple(false, true, {}, false);
        expect_type(TokenType::kVariableEnd, "end of print statement");
        body.push_back(std::move(n));
      } else if (t.type == TokenType::kBlockBegin) {
        next();
        if (end_names.size() > 0 && is_name_in(end_names)) return body;
        parse_statement(&body);
        expect_type(TokenType::kBlockEnd, "end of statement block");
      } else {
        fail("unexpected " + describe(t));
      }
    }
    return body;
  }

  std::vector<Node> parse_statements(Names end_names, bool drop_needle) {
    skip_op(":");
    expect_type(TokenType::kBlockEnd, "end of statement block");
    std::vector<Node> body = subparse(end_names);
    if (cur().type == TokenType::kEof) {
      std::string names;
      for (auto n : end_names) names += (names.empty() ? "'" : " or '") + std::string(n) + "'";
      fail("unexpected end of template, expected " + names);
    }
    if (drop_needle) next();
    return body;
  }

  void parse_statement(std::vector<Node>* body) {
    if (cur().type != TokenType::kName) fail("tag name expected");
    DepthGuard guard(this, &block_depth_, kMaxBlockNesting, "statements");
    const std::string tag = cur().value;
    Node n;
    n.line = cur().line;
    if (tag == "for") {
      parse_for(&n);
    } else if (tag == "if") {
      parse_if(&n);
    } else if (tag == "set") {
      parse_set(&n);
    } else if (tag == "macro") {
      parse_macro(&n);
    } else if (tag == "filter") {
      next();
      n.kind = NodeKind::kFilterBlock;
      n.expr = parse_filter(nullptr, true);
      n.body = parse_statements({"endfilter"}, true);
    } else if (tag == "with") {
      next();
      n.kind = NodeKind::kWith;
      while (cur().type != TokenType::kBlockEnd) {
        if (!n.assignments.empty()) expect_op(",");
        Target target = parse_assign_target(true, false, {}, false);
        expect_op("=");
        n.assignments.emplace_back(std::move(target), parse_expression(true));
      }
      n.body = parse_statements({"endwith"}, true);
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail("'" + tag + "' outside of a loop");
      next();
      n.kind = tag == "break" ? NodeKind::kBreak : NodeKind::kContinue;
    } else if (tag == "print") {
      next();
      bool first = true;
      while (cur().type != TokenType::kBlockEnd) {
        if (!first) expect_op(",");
        first = false;
        Node out;
        out.kind = NodeKind::kOutput;
        out.line = n.line;
        out.expr = parse_expression(true);
        body->push_back(std::move(out));
      }
      return;
    } else if (tag == "generation") {  // transformers' AssistantTracker: renders its body
      next();
      n.kind = NodeKind::kScope;
      n.body = parse_statements({"endgeneration"}, true);
    } else if (tag == "block" || tag == "extends" || tag == "include" || tag == "import" || tag == "from" ||
               tag == "call" || tag == "autoescape" || tag == "raw") {
      fail("tag '" + tag + "' is not supported in chat templates");
    } else {
      fail("Encountered unknown tag '" + tag + "'");
    }
    body->push_back(std::move(n));
  }

  void parse_for(Node* n) {
    next();
    n->kind = NodeKind::kFor;
    n->target = parse_assign_target(true, false, {"in"}, false);
    if (!skip_name("in")) fail("expected 'in', got " + describe(cur()));
    n->expr = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) n->loop_filter = parse_expression(true);
    if (is_name("recursive")) fail("recursive for loops are not supported");
    ++loop_depth_;
    n->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    if (next().value != "endfor") n->else_body = parse_statements({"endfor"}, true);
  }

  void parse_if(Node* n) {
    next();
    ++soft_depth_;
    std::vector<std::pair<ExprPtr, std::vector<Node>>> branches;
    std::vector<Node> else_body;
    int line = n->line;
    std::vector<int> lines;
    while (true) {
      ExprPtr test = parse_tuple(false, false, {}, false);
      std::vector<Node> body = parse_statements({"elif", "else", "endif"}, false);
      branches.emplace_back(std::move(test), std::move(body));
      lines.push_back(line);
      line = cur().line;
      const Token& t = next();
      if (t.value == "elif") continue;
      if (t.value == "else") else_body = parse_statements({"endif"}, true);
      break;
    }
    --soft_depth_;
    // if a: A elif b: B else: C  ==  if a: A else: (if b: B else: C)
    for (size_t i = branches.size(); i-- > 0;) {
      Node node;
      node.kind = NodeKind::kIf;
      node.line = lines[i];
      node.expr = std::move(branches[i].first);
      node.body = std::move(branches[i].second);
      node.else_body = std::move(else_body);
      else_body.clear();
      if (i == 0) {
        *n = std::move(node);
      } else {
        else_body.push_back(std::move(node));
      }
    }
  }

  void parse_set(Node* n) {
    next();
    n->target = parse_assign_target(true, false, {}, true);
    if (skip_op("=")) {
      n->kind = NodeKind::kSet;
      n->expr = parse_tuple(false, true, {}, false);
      return;
    }
    n->kind = NodeKind::kSetBlock;
    n->expr = parse_filter(nullptr, false);
    n->body = parse_statements({"endset"}, true);
  }

  void parse_macro(Node* n) {
    next();
    n->kind = NodeKind::kMacro;
    n->text = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      if (!n->params.empty()) expect_op(",");
      n->params.push_back(expect_name());
      if (skip_op("=")) {
        n->defaults.push_back(parse_expression(true));
      } else {
        if (!n->defaults.empty() && n->defaults.back() != nullptr) fail("non-default argument follows default argument");
        n->defaults.push_back(nullptr);
      }
    }
    expect_op(")");
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    n->body = parse_statements({"endmacro"}, true);
    loop_depth_ = saved_loop_depth;
  }

  Target parse_assign_target(bool with_tuple, bool name_only, Names extra_end, bool with_namespace) {
    Target target;
    if (with_namespace && look().type == TokenType::kOperator && look().value == ".") {
      target.kind = Target::Kind::kNamespaceAttr;
      target.name = expect_name();
      next();  // the dot
      target.attr = expect_name();
      return target;
    }
    if (name_only) {
      target.name = expect_name();
      return target;
    }
    ExprPtr e = with_tuple ? parse_tuple(true, true, extra_end, false) : parse_primary();
    return to_target(*e);
  }

  Target to_target(const Expr& e) {
    Target t;
    if (e.kind == ExprKind::kName) {
      t.name = e.name;
      return t;
    }
    if (e.kind == ExprKind::kTuple) {
      t.kind = Target::Kind::kTuple;
      for (const auto& item : e.children) t.items.push_back(to_target(*item));
      return t;
    }
    fail("can't assign to this expression");
  }

  // ---- expressions ----
  ExprPtr make(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  // Records a node's depth once its children are in place; a tree deeper than the limit fails.
  ExprPtr done(ExprPtr e) {
    int d = 0;
    for (const auto& c : e->children) {
      if (c) d = std::max(d, c->depth);
    }
    for (const auto& [k, v] : e->kwargs) d = std::max(d, v->depth);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth) fail("expression nested too deeply");
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(this, &expr_depth_, kMaxExprDepth, "expression");
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    int line = cur().line;
    ExprPtr expr1 = parse_or();
    while (skip_name("if")) {
      ++soft_depth_;
      ExprPtr expr2 = parse_or();
      ExprPtr expr3;
      if (skip_name("else")) expr3 = parse_condexpr();
      --soft_depth_;
      ExprPtr c = make(ExprKind::kCond, line);
      c->children.push_back(std::move(expr1));
      c->children.push_back(std::move(expr2));
      c->children.push_back(std::move(expr3));
      expr1 = done(std::move(c));
      line = cur().line;
    }
    return expr1;
  }

  ExprPtr binary_node(ExprKind kind, int line, ExprPtr a, ExprPtr b) {
    ExprPtr e = make(kind, line);
    e->children.push_back(std::move(a));
    e->children.push_back(std::move(b));
    return done(std::move(e));
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const int line = next().line;
      left = binary_node(ExprKind::kOr, line, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const int line = next().line;
      left = binary_node(ExprKind::kAnd, line, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(this, &expr_depth_, kMaxExprDepth, "expression");
      ExprPtr e = make(ExprKind::kNot, next().line);
      e->children.push_back(parse_not());
      return done(std::move(e));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr expr = parse_math1();
    ExprPtr cmp;
    while (true) {
      CompareOp op;
      if (cur().type == TokenType::kOperator && (cur().value == "==" || cur().value == "!=" || cur().value == "<" ||
                                                 cur().value == "<=" || cur().value == ">" || cur().value == ">=")) {
        const std::string& v = cur().value;
        op = v == "==" ? CompareOp::kEq
             : v == "!=" ? CompareOp::kNe
             : v == "<"  ? CompareOp::kLt
             : v == "<=" ? CompareOp::kLe
             : v == ">"  ? CompareOp::kGt
                         : CompareOp::kGe;
        next();
      } else if (is_name("in")) {
        next();
        op = CompareOp::kIn;
      } else if (is_name("not") && look().type == TokenType::kName && look().value == "in") {
        next();
        next();
        op = CompareOp::kNotIn;
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(ExprKind::kCompare, line);
        cmp->children.push_back(std::move(expr));
      }
      cmp->compare_ops.push_back(op);
      cmp->children.push_back(parse_math1());
    }
    return cmp ? done(std::move(cmp)) : std::move(expr);
  }

  ExprPtr binary_op(BinaryOp op, int line, ExprPtr a, ExprPtr b) {
    ExprPtr e = make(ExprKind::kBinary, line);
    e->op = op;
    e->children.push_back(std::move(a));
    e->children.push_back(std::move(b));
    return done(std::move(e));
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const BinaryOp op = cur().value == "+" ? BinaryOp::kAdd : BinaryOp::kSub;
      const int line = next().line;
      left = binary_op(op, line, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    const int line = cur().line;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    ExprPtr e = make(ExprKind::kConcat, line);
    e->children.push_back(std::move(first));
    while (skip_op("~")) e->children.push_back(parse_math2());
    return done(std::move(e));
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string& v = cur().value;
      const BinaryOp op = v == "*" ? BinaryOp::kMul : v == "/" ? BinaryOp::kDiv : v == "//" ? BinaryOp::kFloorDiv
                                                                                            : BinaryOp::kMod;
      const int line = next().line;
      left = binary_op(op, line, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const int line = next().line;
      left = binary_op(BinaryOp::kPow, line, std::move(left), parse_unary(true));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      DepthGuard guard(this, &expr_depth_, kMaxExprDepth, "expression");
      const ExprKind kind = cur().value == "-" ? ExprKind::kNeg : ExprKind::kPos;
      node = make(kind, next().line);
      node->children.push_back(parse_unary(false));
      node = done(std::move(node));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    DepthGuard guard(this, &expr_depth_, kMaxExprDepth, "expression");
    const Token& t = cur();
    ExprPtr node;
    if (t.type == TokenType::kName) {
      if (t.value == "true" || t.value == "false" || t.value == "True" || t.value == "False") {
        node = make(ExprKind::kConst, t.line);
        node->value = Value::boolean(t.value == "true" || t.value == "True");
      } else if (t.value == "none" || t.value == "None") {
        node = make(ExprKind::kConst, t.line);
        node->value = Value::none();
      } else {
        node = make(ExprKind::kName, t.line);
        node->name = t.value;
      }
      next();
    } else if (t.type == TokenType::kString) {
      std::string s;
      node = make(ExprKind::kConst, t.line);
      while (cur().type == TokenType::kString) s += next().value;
      node->value = Value::string(std::move(s));
    } else if (t.type == TokenType::kInteger) {
      node = make(ExprKind::kConst, t.line);
      node->value = Value::integer(t.int_value);
      next();
    } else if (t.type == TokenType::kFloat) {
      node = make(ExprKind::kConst, t.line);
      node->value = Value::number(t.float_value);
      next();
    } else if (is_op("(")) {
      next();
      node = parse_tuple(false, true, {}, true);
      expect_op(")");
    } else if (is_op("[")) {
      node = make(ExprKind::kList, next().line);
      while (!is_op("]")) {
        if (!node->children.empty()) expect_op(",");
        if (is_op("]")) break;
        node->children.push_back(parse_expression(true));
      }
      expect_op("]");
      node = done(std::move(node));
    } else if (is_op("{")) {
      node = make(ExprKind::kDict, next().line);
      while (!is_op("}")) {
        if (!node->children.empty()) expect_op(",");
        if (is_op("}")) break;
        node->children.push_back(parse_expression(true));
        expect_op(":");
        node->children.push_back(parse_expression(true));
      }
      expect_op("}");
      node = done(std::move(node));
    } else {
      fail("unexpected " + describe(t));
    }
    return node;
  }

  bool is_tuple_end(Names extra_end) const {
    if (cur().type == TokenType::kVariableEnd || cur().type == TokenType::kBlockEnd || is_op(")")) return true;
    return extra_end.size() > 0 && is_name_in(extra_end);
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, Names extra_end, bool explicit_parens) {
    const int line = cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      args.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) fail("Expected an expression, got " + describe(cur()));
    }
    ExprPtr e = make(ExprKind::kTuple, line);
    e->children = std::move(args);
    return done(std::move(e));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        node = parse_filter(std::move(node), false);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    if (t.value == ".") {
      const Token& attr = cur();
      if (attr.type == TokenType::kName) {
        ExprPtr e = make(ExprKind::kGetAttr, t.line);
        e->name = next().value;
        e->children.push_back(std::move(node));
        return done(std::move(e));
      }
      if (attr.type != TokenType::kInteger) fail("expected name or number");
      ExprPtr index = make(ExprKind::kConst, attr.line);
      index->value = Value::integer(attr.int_value);
      next();
      ExprPtr e = make(ExprKind::kGetItem, t.line);
      e->children.push_back(std::move(node));
      e->children.push_back(std::move(index));
      return done(std::move(e));
    }
    // '['
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    ExprPtr arg;
    if (args.size() == 1) {
      arg = std::move(args[0]);
    } else {
      arg = make(ExprKind::kTuple, t.line);
      arg->children = std::move(args);
      arg = done(std::move(arg));
    }
    if (arg->kind == ExprKind::kSlice) {  // obj[a:b:c]: the slice node takes obj as child 0
      arg->children.insert(arg->children.begin(), std::move(node));
      return done(std::move(arg));
    }
    ExprPtr e = make(ExprKind::kGetItem, t.line);
    e->children.push_back(std::move(node));
    e->children.push_back(std::move(arg));
    return done(std::move(e));
  }

  ExprPtr parse_subscribed() {
    const int line = cur().line;
    std::vector<ExprPtr> args;
    if (is_op(":")) {
      next();
      args.push_back(nullptr);
    } else {
      ExprPtr node = parse_expression(true);
      if (!is_op(":")) return node;
      next();
      args.push_back(std::move(node));
    }
    if (is_op(":") || is_op("]") || is_op(",")) {
      args.push_back(nullptr);
    } else {
      args.push_back(parse_expression(true));
    }
    if (is_op(":")) {
      next();
      if (!is_op("]") && !is_op(",")) {
        args.push_back(parse_expression(true));
      } else {
        args.push_back(nullptr);
      }
    } else {
      args.push_back(nullptr);
    }
    ExprPtr e = make(ExprKind::kSlice, line);
    e->children = std::move(args);
    return done(std::move(e));
  }

  void parse_call_args(Expr* e) {
    expect_op("(");
    bool require_comma = false;
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().type == TokenType::kName && look().type == TokenType::kOperator && look().value == "=") {
        std::string key = next().value;
        next();
        e->kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e->kwargs.empty()) fail("invalid syntax for function call expression");
        e->children.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    ExprPtr e = make(ExprKind::kCall, cur().line);
    e->children.push_back(std::move(node));
    parse_call_args(e.get());
    return done(std::move(e));
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (skip_op(".")) {
      name += '.';
      name += expect_name();
    }
    return name;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      const int line = cur().line;
      const int column = cur().column;
      ExprPtr e = make(ExprKind::kFilter, line);
      e->name = dotted_name();
      if (!is_known_filter(e->name) && soft_depth_ == 0) {
        throw TemplateError("No filter named '" + e->name + "'.", line, false, column);
      }
      e->children.push_back(std::move(node));
      if (is_op("(")) parse_call_args(e.get());
      node = done(std::move(e));
      start_inline = false;
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    const int line = next().line;  // 'is'
    const bool negated = skip_name("not");
    const int column = cur().column;
    ExprPtr e = make(ExprKind::kTest, line);
    e->name = dotted_name();
    if (!is_known_test(e->name) && soft_depth_ == 0) {
      throw TemplateError("No test named '" + e->name + "'.", line, false, column);
    }
    e->children.push_back(std::move(node));
    const Token& t = cur();
    if (is_op("(")) {
      parse_call_args(e.get());
    } else if ((t.type == TokenType::kName || t.type == TokenType::kString || t.type == TokenType::kInteger ||
                t.type == TokenType::kFloat || is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("You cannot chain multiple tests with is");
      e->children.push_back(parse_postfix(parse_primary()));
    }
    e = done(std::move(e));
    if (!negated) return e;
    ExprPtr n = make(ExprKind::kNot, line);
    n->children.push_back(std::move(e));
    return done(std::move(n));
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int block_depth_ = 0;
  int expr_depth_ = 0;
  int loop_depth_ = 0;
  int soft_depth_ = 0;  // inside an if or a conditional expression: unknown filters fail at run time
};

}  // namespace

std::vector<Node> parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

}  // namespace flashserve::jinja
