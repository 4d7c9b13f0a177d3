// Argument helpers shared by the filters, tests, methods and globals.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>

#include "server/text/jinja/interpreter.h"

namespace flashserve::jinja::builtin_args {

[[noreturn]] inline void fail(const std::string& message, int line) { throw TemplateError(message, line); }

// Positional-or-keyword argument `index`/`name` of a call; nullptr when absent.
inline const Value* arg(const Args& args, const Kwargs& kwargs, size_t index, std::string_view name) {
  if (index < args.size()) return &args[index];
  for (const auto& [k, v] : kwargs) {
    if (k == name) return &v;
  }
  return nullptr;
}

inline void check_arity(const std::string& what, const Args& args, const Kwargs& kwargs, size_t max_positional,
                 std::initializer_list<std::string_view> keywords, int line) {
  if (args.size() > max_positional) fail(what + "() takes at most " + std::to_string(max_positional) + " arguments", line);
  for (const auto& [k, v] : kwargs) {
    if (std::find(keywords.begin(), keywords.end(), k) == keywords.end()) {
      fail(what + "() got an unexpected keyword argument '" + k + "'", line);
    }
  }
}

inline const std::string& need_string(const Value& v, const std::string& what, int line) {
  if (!v.is_string()) fail(what + " must be str, not " + v.type_name(), line);
  return v.as_string();
}

inline int64_t need_int(const Value& v, const std::string& what, int line) {
  if (!v.is_int() && !v.is_bool()) fail(what + " must be an integer, not " + std::string(v.type_name()), line);
  return v.as_int();
}

inline bool opt_bool(const Value* v, bool fallback) { return v == nullptr ? fallback : v->truthy(); }

}  // namespace flashserve::jinja::builtin_args
