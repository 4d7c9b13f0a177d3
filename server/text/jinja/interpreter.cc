#include "server/text/jinja/interpreter.h"

#include <cmath>
#include <limits>

namespace flashserve::jinja {
namespace {

[[noreturn]] void type_error(const std::string& message, int line) { throw TemplateError(message, line); }

[[noreturn]] void undefined_error(const Value& v, int line) {
  throw TemplateError(v.undefined_hint().empty() ? "undefined value" : v.undefined_hint(), line);
}

void check_overflow(bool overflow, int line) {
  if (overflow) throw TemplateError("integer overflow", line);
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::string undefined_attr_hint(const Value& obj, const std::string& name) {
  return "'" + std::string(obj.type_name()) + " object' has no attribute '" + name + "'";
}

bool is_mutating_method(const Value& obj, const std::string& name) {
  if (obj.is_list()) {
    return !obj.is_tuple() && (name == "append" || name == "clear" || name == "extend" || name == "insert" ||
                               name == "pop" || name == "remove" || name == "reverse" || name == "sort");
  }
  if (obj.is_dict()) {
    return name == "clear" || name == "pop" || name == "popitem" || name == "setdefault" || name == "update";
  }
  return false;
}

}  // namespace

// Makes a new innermost scope whose parent is `parent` (the current scope by default) and
// restores the previous one on exit.
class Interpreter::FrameScope {
 public:
  FrameScope(Interpreter* in, int parent) : in_(in), saved_(in->current_) {
    Frame f;
    f.parent = parent;
    in->frames_.push_back(std::move(f));
    in->current_ = static_cast<int>(in->frames_.size()) - 1;
  }
  explicit FrameScope(Interpreter* in) : FrameScope(in, in->current_) {}
  ~FrameScope() {
    in_->frames_.pop_back();
    in_->current_ = saved_;
  }
  FrameScope(const FrameScope&) = delete;
  FrameScope& operator=(const FrameScope&) = delete;

 private:
  Interpreter* in_;
  int saved_;
};

class Interpreter::DepthScope {
 public:
  DepthScope(Interpreter* in, int line) : in_(in) {
    if (++in->depth_ > in->limits_.max_depth) {
      throw TemplateError("template nesting deeper than " + std::to_string(in->limits_.max_depth), line, true);
    }
  }
  ~DepthScope() { --in_->depth_; }

 private:
  Interpreter* in_;
};

Interpreter::Interpreter(const Limits& limits, int64_t now_unix) : limits_(limits), now_unix_(now_unix) {
  frames_.emplace_back();
  frames_.reserve(64);
}

void Interpreter::define(const std::string& name, Value value) {
  auto& vars = frames_[0].vars;
  for (auto& [k, v] : vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(name, std::move(value));
}

std::string Interpreter::render(const std::vector<Node>& body) {
  top_output_.clear();
  out_ = &top_output_;
  exec_body(body);
  return std::move(top_output_);
}

// ---- bookkeeping -----------------------------------------------------------------------------

void Interpreter::step(int line) {
  if (++steps_ > limits_.max_steps) {
    throw TemplateError("template ran more than " + std::to_string(limits_.max_steps) + " steps", line, true);
  }
}

void Interpreter::charge(size_t bytes, int line) {
  allocated_ += bytes;
  if (allocated_ > limits_.max_alloc_bytes) {
    throw TemplateError("template built more than " + std::to_string(limits_.max_alloc_bytes) + " bytes", line,
                        true);
  }
}

Value Interpreter::make_string(std::string s, int line) {
  charge(s.size(), line);
  return Value::string(std::move(s));
}

Value Interpreter::make_list(ValueList items, int line, bool is_tuple) {
  charge(items.size() * sizeof(Value), line);
  return Value::list(std::move(items), is_tuple);
}

void Interpreter::emit(const std::string& s, int line) {
  charge(s.size(), line);
  out_->append(s);
  if (out_ == &top_output_ && top_output_.size() > limits_.max_output_bytes) {
    throw TemplateError("rendered prompt longer than " + std::to_string(limits_.max_output_bytes) + " bytes", line,
                        true);
  }
}

const Value* Interpreter::lookup(const std::string& name) const {
  for (int f = current_; f >= 0; f = frames_[f].parent) {
    for (const auto& [k, v] : frames_[f].vars) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Interpreter::set_var(const std::string& name, Value v) {
  auto& vars = frames_[current_].vars;
  for (auto& [k, old] : vars) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

void Interpreter::assign(const Target& t, const Value& v, int line) {
  switch (t.kind) {
    case Target::Kind::kName: set_var(t.name, v); return;
    case Target::Kind::kTuple: {
      if (v.is_undefined()) undefined_error(v, line);
      ValueList items = iterate(v, line);
      if (items.size() != t.items.size()) {
        type_error(items.size() < t.items.size()
                       ? "not enough values to unpack (expected " + std::to_string(t.items.size()) + ", got " +
                             std::to_string(items.size()) + ")"
                       : "too many values to unpack (expected " + std::to_string(t.items.size()) + ")",
                   line);
      }
      for (size_t i = 0; i < items.size(); ++i) assign(t.items[i], items[i], line);
      return;
    }
    case Target::Kind::kNamespaceAttr: {
      const Value* ns = lookup(t.name);
      if (ns == nullptr || !ns->is_namespace()) type_error("cannot assign attribute on non-namespace object", line);
      if (v.holds_namespace()) type_error("a namespace cannot hold a namespace", line);  // value.h says why
      auto& items = ns->mutable_namespace_items();
      for (auto& [k, old] : items) {
        if (k.is_string() && k.as_string() == t.attr) {
          old = v;
          return;
        }
      }
      items.emplace_back(Value::string(t.attr), v);
      charge(sizeof(Value) * 2, line);
      return;
    }
  }
}

// ---- statements ------------------------------------------------------------------------------

Interpreter::Flow Interpreter::exec_body(const std::vector<Node>& body) {
  for (const Node& n : body) {
    const Flow f = exec(n);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

std::string Interpreter::capture(const std::vector<Node>& body) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    exec_body(body);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

Interpreter::Flow Interpreter::exec(const Node& n) {
  step(n.line);
  DepthScope depth(this, n.line);
  switch (n.kind) {
    case NodeKind::kText: emit(n.text, n.line); return Flow::kNormal;
    case NodeKind::kOutput: {
      const Value v = eval(*n.expr);
      if (v.is_string()) {
        emit(v.as_string(), n.line);
      } else {
        std::string s;
        append_str(v, &s);
        emit(s, n.line);
      }
      return Flow::kNormal;
    }
    case NodeKind::kIf: {
      Flow flow = Flow::kNormal;
      exec_if(n, &flow);
      return flow;
    }
    case NodeKind::kFor: exec_for(n); return Flow::kNormal;
    case NodeKind::kSet: assign(n.target, eval(*n.expr), n.line); return Flow::kNormal;
    case NodeKind::kSetBlock: {
      Value v = make_string(capture(n.body), n.line);
      if (n.expr) v = eval_filter(*n.expr, &v);
      assign(n.target, v, n.line);
      return Flow::kNormal;
    }
    case NodeKind::kFilterBlock: {
      const Value body = make_string(capture(n.body), n.line);
      const Value v = eval_filter(*n.expr, &body);
      emit(to_str(v), n.line);
      return Flow::kNormal;
    }
    case NodeKind::kMacro: {
      auto fn = std::make_shared<Callable>();
      fn->kind = Callable::Kind::kMacro;
      fn->name = n.text;
      fn->macro = &n;
      set_var(n.text, Value::callable(std::move(fn)));
      return Flow::kNormal;
    }
    case NodeKind::kWith: {
      FrameScope scope(this);
      for (const auto& [target, expr] : n.assignments) assign(target, eval(*expr), n.line);
      return exec_body(n.body);
    }
    case NodeKind::kScope: return exec_body(n.body);
    case NodeKind::kBreak: return Flow::kBreak;
    case NodeKind::kContinue: return Flow::kContinue;
  }
  return Flow::kNormal;
}

void Interpreter::exec_if(const Node& n, Flow* flow) {
  if (eval(*n.expr).truthy()) {
    *flow = exec_body(n.body);
  } else {
    *flow = exec_body(n.else_body);
  }
}

void Interpreter::exec_for(const Node& n) {
  ValueList items = iterate(eval(*n.expr), n.line);
  if (n.loop_filter) {
    ValueList kept;
    for (const Value& item : items) {
      FrameScope scope(this);
      assign(n.target, item, n.line);
      if (eval(*n.loop_filter).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    FrameScope scope(this);
    exec_body(n.else_body);
    return;
  }
  const auto length = static_cast<int64_t>(items.size());
  int depth0 = 0;
  if (const Value* outer = lookup("loop"); outer != nullptr && outer->is_dict()) {
    if (const Value* d = outer->find("depth0"); d != nullptr && d->is_int()) depth0 = static_cast<int>(d->as_int()) + 1;
  }
  for (int64_t i = 0; i < length; ++i) {
    step(n.line);
    FrameScope scope(this);
    auto cycle = std::make_shared<Callable>();
    cycle->kind = Callable::Kind::kLoopCycle;
    cycle->name = "loop.cycle";
    cycle->self = Value::integer(i);
    ValueItems loop = {
        {Value::string("index"), Value::integer(i + 1)},
        {Value::string("index0"), Value::integer(i)},
        {Value::string("revindex"), Value::integer(length - i)},
        {Value::string("revindex0"), Value::integer(length - i - 1)},
        {Value::string("first"), Value::boolean(i == 0)},
        {Value::string("last"), Value::boolean(i == length - 1)},
        {Value::string("length"), Value::integer(length)},
        {Value::string("depth"), Value::integer(depth0 + 1)},
        {Value::string("depth0"), Value::integer(depth0)},
        {Value::string("previtem"), i > 0 ? items[i - 1] : Value::undefined("there is no previous item")},
        {Value::string("nextitem"), i + 1 < length ? items[i + 1] : Value::undefined("there is no next item")},
        {Value::string("cycle"), Value::callable(std::move(cycle))},
    };
    set_var("loop", Value::dict(std::move(loop)));
    assign(n.target, items[i], n.line);
    if (exec_body(n.body) == Flow::kBreak) break;
  }
}

// ---- expressions -----------------------------------------------------------------------------

Value Interpreter::eval(const Expr& e) {
  step(e.line);
  DepthScope depth(this, e.line);
  switch (e.kind) {
    case ExprKind::kConst: return e.value;
    case ExprKind::kName: {
      const Value* v = lookup(e.name);
      return v != nullptr ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      ValueList items;
      items.reserve(e.children.size());
      for (const auto& c : e.children) items.push_back(eval(*c));
      return make_list(std::move(items), e.line, e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      ValueItems items;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        Value key = eval(*e.children[i]);
        Value value = eval(*e.children[i + 1]);
        if (key.is_list() && !key.is_tuple()) type_error("unhashable type: 'list'", e.line);
        if (key.is_mapping()) type_error("unhashable type: 'dict'", e.line);
        bool replaced = false;
        for (auto& [k, v] : items) {
          if (equals(k, key)) {
            v = value;
            replaced = true;
            break;
          }
        }
        if (!replaced) items.emplace_back(std::move(key), std::move(value));
      }
      charge(items.size() * 2 * sizeof(Value), e.line);
      return Value::dict(std::move(items));
    }
    case ExprKind::kGetAttr: return getattr(eval(*e.children[0]), e.name, e.line);
    case ExprKind::kGetItem: {
      const Value obj = eval(*e.children[0]);
      return getitem(obj, eval(*e.children[1]), e.line);
    }
    case ExprKind::kSlice: return eval_slice(e);
    case ExprKind::kCall: return eval_call(e);
    case ExprKind::kFilter: return eval_filter(e, nullptr);
    case ExprKind::kTest: {
      const Value v = eval(*e.children[0]);
      Args args;
      Kwargs kwargs;
      eval_args(e, 1, &args, &kwargs);
      return Value::boolean(test(e.name, v, args, kwargs, e.line));
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      const Value v = eval(*e.children[0]);
      if (v.is_undefined()) undefined_error(v, e.line);
      if (!v.is_number()) {
        type_error(std::string("bad operand type for unary ") + (e.kind == ExprKind::kNeg ? "-" : "+") + ": '" +
                       v.type_name() + "'",
                   e.line);
      }
      if (e.kind == ExprKind::kPos) return v.is_bool() ? Value::integer(v.as_int()) : v;
      if (v.is_float()) return Value::number(-v.as_double());
      if (v.as_int() == std::numeric_limits<int64_t>::min()) throw TemplateError("integer overflow", e.line);
      return Value::integer(-v.as_int());
    }
    case ExprKind::kNot: return Value::boolean(!eval(*e.children[0]).truthy());
    case ExprKind::kBinary: {
      const Value a = eval(*e.children[0]);
      return binary(e.op, a, eval(*e.children[1]), e.line);
    }
    case ExprKind::kConcat: {
      std::string s;
      for (const auto& c : e.children) {
        append_str(eval(*c), &s);
        charge(0, e.line);
      }
      return make_string(std::move(s), e.line);
    }
    case ExprKind::kAnd: {
      Value a = eval(*e.children[0]);
      if (!a.truthy()) return a;
      return eval(*e.children[1]);
    }
    case ExprKind::kOr: {
      Value a = eval(*e.children[0]);
      if (a.truthy()) return a;
      return eval(*e.children[1]);
    }
    case ExprKind::kCompare: return eval_compare(e);
    case ExprKind::kCond: {
      if (eval(*e.children[1]).truthy()) return eval(*e.children[0]);
      if (e.children[2]) return eval(*e.children[2]);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
    }
  }
  return Value();
}

void Interpreter::eval_args(const Expr& e, size_t first, Args* args, Kwargs* kwargs) {
  for (size_t i = first; i < e.children.size(); ++i) args->push_back(eval(*e.children[i]));
  for (const auto& [k, v] : e.kwargs) kwargs->emplace_back(k, eval(*v));
}

Value Interpreter::eval_call(const Expr& e) {
  const Value fn = eval(*e.children[0]);
  Args args;
  Kwargs kwargs;
  eval_args(e, 1, &args, &kwargs);
  return call(fn, std::move(args), std::move(kwargs), e.line);
}

Value Interpreter::eval_filter(const Expr& e, const Value* block_operand) {
  // A filter block's chain has a null operand at its innermost filter.
  Value v;
  if (e.children[0]) {
    v = e.children[0]->kind == ExprKind::kFilter ? eval_filter(*e.children[0], block_operand) : eval(*e.children[0]);
  } else if (block_operand != nullptr) {
    v = *block_operand;
  }
  Args args;
  Kwargs kwargs;
  eval_args(e, 1, &args, &kwargs);
  return filter(e.name, v, std::move(args), std::move(kwargs), e.line);
}

Value Interpreter::eval_compare(const Expr& e) {
  Value left = eval(*e.children[0]);
  for (size_t i = 0; i < e.compare_ops.size(); ++i) {
    Value right = eval(*e.children[i + 1]);
    bool r = false;
    switch (e.compare_ops[i]) {
      case CompareOp::kEq: r = equals(left, right); break;
      case CompareOp::kNe: r = !equals(left, right); break;
      case CompareOp::kLt: r = less_than(left, right, e.line); break;
      case CompareOp::kGt: r = less_than(right, left, e.line); break;
      case CompareOp::kLe: r = less_than(left, right, e.line) || equals(left, right); break;
      case CompareOp::kGe: r = less_than(right, left, e.line) || equals(left, right); break;
      case CompareOp::kIn:
      case CompareOp::kNotIn: {
        r = test("in", left, Args{right}, Kwargs{}, e.line);
        if (e.compare_ops[i] == CompareOp::kNotIn) r = !r;
        break;
      }
    }
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interpreter::eval_slice(const Expr& e) {
  const Value obj = eval(*e.children[0]);
  Value bounds[3];
  for (int i = 0; i < 3; ++i) bounds[i] = e.children[i + 1] ? eval(*e.children[i + 1]) : Value::none();
  if (obj.is_undefined()) undefined_error(obj, e.line);
  for (const Value& b : bounds) {
    if (!b.is_none() && !b.is_int() && !b.is_bool()) {
      type_error("slice indices must be integers or None or have an __index__ method", e.line);
    }
  }
  if (obj.is_string()) {
    const std::vector<char32_t> cps = decode_utf8(obj.as_string());
    int64_t first = 0, step_n = 1, count = 0;
    slice_indices(static_cast<int64_t>(cps.size()), bounds[0], bounds[1], bounds[2], &first, &step_n, &count, e.line);
    std::string s;
    for (int64_t k = 0; k < count; ++k) append_utf8(cps[first + k * step_n], &s);
    return make_string(std::move(s), e.line);
  }
  if (obj.is_list()) {
    const ValueList& items = obj.as_list();
    int64_t first = 0, step_n = 1, count = 0;
    slice_indices(static_cast<int64_t>(items.size()), bounds[0], bounds[1], bounds[2], &first, &step_n, &count,
                  e.line);
    ValueList out;
    out.reserve(count);
    for (int64_t k = 0; k < count; ++k) out.push_back(items[first + k * step_n]);
    return make_list(std::move(out), e.line, obj.is_tuple());
  }
  return Value::undefined(std::string("'") + obj.type_name() + " object' is not subscriptable by a slice");
}

Value Interpreter::binary(BinaryOp op, const Value& a, const Value& b, int line) {
  if (a.is_undefined()) undefined_error(a, line);
  if (b.is_undefined()) undefined_error(b, line);
  static constexpr const char* kSymbols[] = {"+", "-", "*", "/", "//", "%", "**"};
  auto unsupported = [&]() {
    type_error(std::string("unsupported operand type(s) for ") + kSymbols[static_cast<int>(op)] + ": '" +
                   a.type_name() + "' and '" + b.type_name() + "'",
               line);
  };
  if (a.is_number() && b.is_number()) {
    const bool as_float = a.is_float() || b.is_float();
    const int64_t x = a.as_int(), y = b.as_int();
    const double fx = a.as_double(), fy = b.as_double();
    int64_t r = 0;
    switch (op) {
      case BinaryOp::kAdd:
        if (as_float) return Value::number(fx + fy);
        check_overflow(__builtin_add_overflow(x, y, &r), line);
        return Value::integer(r);
      case BinaryOp::kSub:
        if (as_float) return Value::number(fx - fy);
        check_overflow(__builtin_sub_overflow(x, y, &r), line);
        return Value::integer(r);
      case BinaryOp::kMul:
        if (as_float) return Value::number(fx * fy);
        check_overflow(__builtin_mul_overflow(x, y, &r), line);
        return Value::integer(r);
      case BinaryOp::kDiv:
        if (fy == 0.0) throw TemplateError("division by zero", line);
        return Value::number(fx / fy);
      case BinaryOp::kFloorDiv:
        if (as_float) {
          if (fy == 0.0) throw TemplateError("float floor division by zero", line);
          return Value::number(std::floor(fx / fy));
        }
        if (y == 0) throw TemplateError("integer division or modulo by zero", line);
        if (x == std::numeric_limits<int64_t>::min() && y == -1) throw TemplateError("integer overflow", line);
        return Value::integer(floor_div(x, y));
      case BinaryOp::kMod:
        if (as_float) {
          if (fy == 0.0) throw TemplateError("float modulo", line);
          double m = std::fmod(fx, fy);
          if (m != 0.0 && ((m < 0) != (fy < 0))) m += fy;
          return Value::number(m);
        }
        if (y == 0) throw TemplateError("integer division or modulo by zero", line);
        if (y == -1) return Value::integer(0);
        return Value::integer(x - floor_div(x, y) * y);
      case BinaryOp::kPow:
        if (!as_float && y >= 0) {
          int64_t result = 1, base = x, e = y;
          while (e > 0) {
            if (e & 1) check_overflow(__builtin_mul_overflow(result, base, &result), line);
            e >>= 1;
            if (e > 0) check_overflow(__builtin_mul_overflow(base, base, &base), line);
          }
          return Value::integer(result);
        }
        if (fx == 0.0 && fy < 0) throw TemplateError("0.0 cannot be raised to a negative power", line);
        return Value::number(std::pow(fx, fy));
    }
  }
  if (op == BinaryOp::kAdd) {
    if (a.is_string() && b.is_string()) {
      charge(a.as_string().size() + b.as_string().size(), line);
      return Value::string(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      ValueList items = a.as_list();
      items.insert(items.end(), b.as_list().begin(), b.as_list().end());
      return make_list(std::move(items), line, a.is_tuple());
    }
    unsupported();
  }
  if (op == BinaryOp::kMul) {
    const Value* seq = (a.is_string() || a.is_list()) ? &a : (b.is_string() || b.is_list()) ? &b : nullptr;
    const Value* count = seq == &a ? &b : &a;
    if (seq != nullptr && (count->is_int() || count->is_bool())) {
      const int64_t n = std::max<int64_t>(0, count->as_int());
      if (seq->is_string()) {
        const size_t unit = seq->as_string().size();
        if (unit > 0 && static_cast<uint64_t>(n) > (limits_.max_alloc_bytes / unit) + 1) {
          throw TemplateError("string repetition too large", line, true);
        }
        charge(unit * static_cast<size_t>(n), line);
        std::string s;
        s.reserve(unit * static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) s += seq->as_string();
        return Value::string(std::move(s));
      }
      const size_t unit = seq->as_list().size() * sizeof(Value);
      if (unit > 0 && static_cast<uint64_t>(n) > (limits_.max_alloc_bytes / unit) + 1) {
        throw TemplateError("list repetition too large", line, true);
      }
      ValueList items;
      for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq->as_list().begin(), seq->as_list().end());
      return make_list(std::move(items), line, seq->is_tuple());
    }
  }
  if (op == BinaryOp::kMod && a.is_string()) {
    throw TemplateError("printf-style '%' string formatting is not supported", line);
  }
  unsupported();
  return Value();
}

// ---- attribute access and calls --------------------------------------------------------------

Value Interpreter::getattr(const Value& obj, const std::string& name, int line) {
  if (obj.is_undefined()) undefined_error(obj, line);
  if (obj.is_namespace()) {
    const Value* v = obj.find(name);
    return v != nullptr ? *v : Value::undefined(undefined_attr_hint(obj, name));
  }
  if (has_method(obj, name)) {
    if (is_mutating_method(obj, name)) {
      return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe.");
    }
    auto fn = std::make_shared<Callable>();
    fn->kind = Callable::Kind::kMethod;
    fn->name = name;
    fn->self = obj;
    return Value::callable(std::move(fn));
  }
  if (obj.is_dict()) {
    const Value* v = obj.find(name);
    if (v != nullptr) return *v;
  }
  return Value::undefined(undefined_attr_hint(obj, name));
}

Value Interpreter::getitem(const Value& obj, const Value& key, int line) {
  if (obj.is_undefined()) undefined_error(obj, line);
  if (obj.is_dict()) {
    if (const Value* v = obj.find(key)) return *v;
  } else if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    const int64_t n = obj.is_list() ? static_cast<int64_t>(obj.as_list().size())
                                    : static_cast<int64_t>(count_code_points(obj.as_string()));
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i >= 0 && i < n) {
      if (obj.is_list()) return obj.as_list()[i];
      const std::string& s = obj.as_string();
      size_t pos = 0;
      for (int64_t k = 0; k < i; ++k) next_code_point(s, &pos);
      const size_t start = pos;
      next_code_point(s, &pos);
      return Value::string(s.substr(start, pos - start));
    }
    return Value::undefined(std::string(obj.type_name()) + " object has no element " + std::to_string(key.as_int()));
  }
  if (key.is_string()) {
    if (obj.is_namespace() || has_method(obj, key.as_string())) return getattr(obj, key.as_string(), line);
  }
  std::string shown;
  append_repr(key, &shown);
  return Value::undefined("'" + std::string(obj.type_name()) + " object' has no attribute " + shown);
}

ValueList Interpreter::iterate(const Value& v, int line) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList: return v.as_list();
    case Value::Kind::kDict: {
      ValueList keys;
      for (const auto& [k, val] : v.as_items()) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      ValueList chars;
      const std::string& s = v.as_string();
      charge(s.size() * sizeof(Value), line);
      for (size_t pos = 0; pos < s.size();) {
        const size_t start = pos;
        next_code_point(s, &pos);
        chars.push_back(Value::string(s.substr(start, pos - start)));
      }
      return chars;
    }
    default: type_error(std::string("'") + v.type_name() + "' object is not iterable", line);
  }
}

Value Interpreter::call(const Value& fn, Args args, Kwargs kwargs, int line) {
  if (fn.is_undefined()) undefined_error(fn, line);
  if (!fn.is_callable()) type_error(std::string("'") + fn.type_name() + "' object is not callable", line);
  const Callable& c = fn.as_callable();
  switch (c.kind) {
    case Callable::Kind::kBuiltin: return call_global(*this, c.name, args, kwargs, line);
    case Callable::Kind::kMethod: return call_method(*this, c.self, c.name, args, kwargs, line);
    case Callable::Kind::kMacro: return call_macro(c, std::move(args), std::move(kwargs), line);
    case Callable::Kind::kLoopCycle: {
      if (args.empty()) type_error("no items for cycling given", line);
      return args[static_cast<size_t>(c.self.as_int()) % args.size()];
    }
  }
  return Value();
}

Value Interpreter::call_macro(const Callable& fn, Args args, Kwargs kwargs, int line) {
  const Node& m = *fn.macro;
  DepthScope depth(this, line);
  if (args.size() > m.params.size()) {
    type_error("macro '" + m.text + "' takes not more than " + std::to_string(m.params.size()) + " argument(s)", line);
  }
  FrameScope scope(this, 0);
  std::vector<bool> bound(m.params.size(), false);
  for (size_t i = 0; i < args.size(); ++i) {
    set_var(m.params[i], std::move(args[i]));
    bound[i] = true;
  }
  for (auto& [k, v] : kwargs) {
    bool found = false;
    for (size_t i = 0; i < m.params.size(); ++i) {
      if (m.params[i] == k) {
        if (bound[i]) type_error("macro '" + m.text + "' got multiple values for argument '" + k + "'", line);
        set_var(k, std::move(v));
        bound[i] = found = true;
        break;
      }
    }
    if (!found) type_error("macro '" + m.text + "' takes no keyword argument '" + k + "'", line);
  }
  for (size_t i = 0; i < m.params.size(); ++i) {
    if (bound[i]) continue;
    set_var(m.params[i], m.defaults[i] ? eval(*m.defaults[i])
                                       : Value::undefined("parameter '" + m.params[i] + "' was not provided"));
  }
  return make_string(capture(m.body), line);
}

Value Interpreter::filter(const std::string& name, const Value& v, Args args, Kwargs kwargs, int line) {
  return call_filter(*this, name, v, args, kwargs, line);
}

bool Interpreter::test(const std::string& name, const Value& v, const Args& args, const Kwargs& kwargs, int line) {
  if (!kwargs.empty()) type_error("test '" + name + "' takes no keyword arguments", line);
  return call_test(*this, name, v, args, line);
}

}  // namespace flashserve::jinja
