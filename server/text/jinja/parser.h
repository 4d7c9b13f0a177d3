// The template parser: Jinja2 3.1's grammar (jinja2/parser.py) for the statements chat templates
// use: for (with loop filters and else), if/elif/else, set (names, tuples, ns.attr, and set
// blocks), macro, filter blocks, with, break/continue (transformers enables loopcontrols),
// print, and transformers' {% generation %} tag. include/extends/import/block/call are not
// supported (chat templates are one file). Expressions follow jinja2's precedence exactly.
#pragma once

#include <string_view>
#include <vector>

#include "server/text/jinja/ast.h"

namespace flashserve::jinja {

// Limits that keep a hostile template from exhausting the stack at parse or render time.
inline constexpr int kMaxBlockNesting = 64;   // nested statements
inline constexpr int kMaxExprDepth = 128;     // depth of one expression tree

// Throws TemplateError (line and column) on a syntax error, an unknown tag, or an unknown filter
// or test outside an `if` (jinja2 reports those at compile time too).
std::vector<Node> parse_template(std::string_view source);

}  // namespace flashserve::jinja
