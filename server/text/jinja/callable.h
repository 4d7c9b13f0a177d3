// What a template can call: a builtin (range, namespace, raise_exception, ...), a method bound to
// its receiver ('abc'.strip, d.items), a macro the template defined, or loop.cycle.
#pragma once

#include <string>

#include "server/text/jinja/value.h"

namespace flashserve::jinja {

struct Node;

struct Callable {
  enum class Kind { kBuiltin, kMethod, kMacro, kLoopCycle };
  Kind kind = Kind::kBuiltin;
  std::string name;            // builtin or method name, macro name
  Value self;                  // kMethod: the receiver; kLoopCycle: the loop's index0
  const Node* macro = nullptr;  // kMacro: its definition (owned by the parsed template)
};

}  // namespace flashserve::jinja
