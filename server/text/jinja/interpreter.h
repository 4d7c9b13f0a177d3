// The tree-walking interpreter: renders parsed statements with jinja2's runtime semantics
// (scopes: a for-loop iteration and a macro call see their own assignments, `if` does not make
// one; Undefined; and/or return an operand; Python arithmetic and comparisons; the sandbox's
// attribute rules: dict methods before keys, no mutating methods).
//
// Everything a template does is bounded: steps (node evaluations), nesting depth (macros),
// bytes produced (strings, lists, output, cumulative so live memory is bounded too) and
// range() length (jinja2's sandbox MAX_RANGE). Hitting a limit throws TemplateError with
// resource = true.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "server/text/jinja/ast.h"
#include "server/text/jinja/callable.h"
#include "server/text/jinja/value.h"

namespace flashserve::jinja {

struct Limits {
  size_t max_output_bytes = 16u << 20;  // the rendered prompt
  size_t max_alloc_bytes = 256u << 20;  // every string and list built while rendering, summed
  int64_t max_steps = 5'000'000;        // expression and statement evaluations
  int max_depth = 400;                  // nested evaluations (macro recursion lands here)
};

inline constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

using Args = std::vector<Value>;
using Kwargs = std::vector<std::pair<std::string, Value>>;

class Interpreter {
 public:
  // `now_unix` < 0: strftime_now reads the clock.
  Interpreter(const Limits& limits, int64_t now_unix);

  // Defines a name in the outermost scope (render variables and globals).
  void define(const std::string& name, Value value);
  // Renders a template body; throws TemplateError.
  std::string render(const std::vector<Node>& body);

  // ---- for the builtins ----
  Value getattr(const Value& obj, const std::string& name, int line);
  Value getitem(const Value& obj, const Value& key, int line);
  ValueList iterate(const Value& v, int line);
  Value call(const Value& fn, Args args, Kwargs kwargs, int line);
  Value filter(const std::string& name, const Value& v, Args args, Kwargs kwargs, int line);
  bool test(const std::string& name, const Value& v, const Args& args, const Kwargs& kwargs, int line);
  // Charges `bytes` against the allocation budget.
  void charge(size_t bytes, int line);
  Value make_string(std::string s, int line);
  Value make_list(ValueList items, int line, bool is_tuple = false);
  int64_t now_unix() const { return now_unix_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  struct Frame {
    std::vector<std::pair<std::string, Value>> vars;
    int parent = -1;
  };
  class FrameScope;
  class DepthScope;

  Flow exec_body(const std::vector<Node>& body);
  Flow exec(const Node& n);
  void exec_for(const Node& n);
  void exec_if(const Node& n, Flow* flow);
  std::string capture(const std::vector<Node>& body);
  void emit(const std::string& s, int line);

  Value eval(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_filter(const Expr& e, const Value* block_operand);
  Value eval_compare(const Expr& e);
  Value eval_slice(const Expr& e);
  Value binary(BinaryOp op, const Value& a, const Value& b, int line);
  void eval_args(const Expr& e, size_t first, Args* args, Kwargs* kwargs);
  Value call_macro(const Callable& fn, Args args, Kwargs kwargs, int line);

  const Value* lookup(const std::string& name) const;
  void assign(const Target& t, const Value& v, int line);
  void set_var(const std::string& name, Value v);
  void step(int line);

  Limits limits_;
  int64_t now_unix_;
  std::vector<Frame> frames_;
  int current_ = 0;
  std::string* out_ = nullptr;
  std::string top_output_;
  int64_t steps_ = 0;
  int depth_ = 0;
  size_t allocated_ = 0;
};

// Filters, tests, methods and global functions (builtins.cc).
Value call_filter(Interpreter& in, const std::string& name, const Value& v, const Args& args, const Kwargs& kwargs,
                  int line);
bool call_test(Interpreter& in, const std::string& name, const Value& v, const Args& args, int line);
Value call_method(Interpreter& in, const Value& self, const std::string& name, const Args& args,
                  const Kwargs& kwargs, int line);
Value call_global(Interpreter& in, const std::string& name, const Args& args, const Kwargs& kwargs, int line);
// Whether `name` is a method of `self`'s Python type (so getattr finds it before a dict key).
bool has_method(const Value& self, const std::string& name);
// Python's len(); throws for types without one.
int64_t py_len(const Value& v, int line);
// Python's str[start:stop:step] / list[...] for code point sequences and lists.
void slice_indices(int64_t length, const Value& start, const Value& stop, const Value& step_v, int64_t* first,
                   int64_t* step, int64_t* count, int line);

}  // namespace flashserve::jinja
