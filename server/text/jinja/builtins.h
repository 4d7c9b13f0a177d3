// The names a template can call that are not its own: filters, tests, globals and methods.
#pragma once

#include <string_view>

namespace flashserve::jinja {

bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);

}  // namespace flashserve::jinja
