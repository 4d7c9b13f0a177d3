// The parsed template: expressions and statements as Jinja2's parser builds them (one node
// type each, children by value), owned by ChatTemplate and walked by the interpreter.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/text/jinja/value.h"

namespace flashserve::jinja {

enum class ExprKind {
  kConst,    // value
  kName,     // name
  kList,     // children: items
  kTuple,    // children: items
  kDict,     // children: key0, value0, key1, value1, ...
  kGetAttr,  // children[0].name
  kGetItem,  // children[0][children[1]]
  kSlice,    // children[0][children[1]:children[2]:children[3]] (null children: omitted)
  kCall,     // children[0](children[1..], kwargs)
  kFilter,   // children[0] | name(children[1..], kwargs); children[0] null in a filter block
  kTest,     // children[0] is name(children[1..], kwargs)
  kNeg,      // -children[0]
  kPos,      // +children[0]
  kNot,      // not children[0]
  kBinary,   // children[0] op children[1]
  kConcat,   // children[0] ~ children[1] ~ ...
  kAnd,      // children[0] and children[1]
  kOr,       // children[0] or children[1]
  kCompare,  // children[0] ops[0] children[1] ops[1] children[2] ...
  kCond,     // children[0] if children[1] else children[2] (null: undefined)
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kConst;
  int line = 0;
  int depth = 1;     // 1 + the deepest child's depth (bounded by the parser)
  Value value;       // kConst
  std::string name;  // kName, kGetAttr, kFilter, kTest
  BinaryOp op = BinaryOp::kAdd;
  std::vector<CompareOp> compare_ops;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // kCall, kFilter, kTest
};

// An assignment target: a name, a tuple of targets (for k, v in ...), or ns.attr.
struct Target {
  enum class Kind { kName, kTuple, kNamespaceAttr };
  Kind kind = Kind::kName;
  std::string name;  // kName; kNamespaceAttr: the namespace variable
  std::string attr;  // kNamespaceAttr
  std::vector<Target> items;
};

enum class NodeKind {
  kText,      // text
  kOutput,    // {{ expr }}
  kIf,        // if expr: body else else_body (an elif is an If alone in else_body)
  kFor,       // for target in expr [if filter]: body else else_body
  kSet,       // set target = expr
  kSetBlock,  // set target [| filter]: body endset
  kMacro,     // macro name(params = defaults): body
  kFilterBlock,  // filter f: body endfilter (expr: the filter chain on a null operand)
  kWith,      // with assignments: body
  kBreak,
  kContinue,
  kScope,     // a body rendered in place (the transformers {% generation %} tag)
};

struct Node {
  NodeKind kind = NodeKind::kText;
  int line = 0;
  std::string text;  // kText; kMacro: its name
  ExprPtr expr;
  ExprPtr loop_filter;  // kFor
  Target target;
  std::vector<Node> body;
  std::vector<Node> else_body;
  std::vector<std::string> params;  // kMacro
  std::vector<ExprPtr> defaults;    // kMacro: one per param, null without a default
  std::vector<std::pair<Target, ExprPtr>> assignments;  // kWith
};

}  // namespace flashserve::jinja
