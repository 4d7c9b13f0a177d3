// The names a template can call that are not its own: filters (filters.cc), tests, globals and
// methods (builtins.cc). The functions themselves are declared in interpreter.h.
#pragma once

#include <string_view>

namespace flashserve::jinja {

bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);

}  // namespace flashserve::jinja
