// Python's str algorithms that the builtins share (split, splitlines, title, replace, ...), on
// UTF-8 strings by code point as Python's str works.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flashserve::jinja {

// str.split(sep, maxsplit) / str.rsplit; sep null: runs of whitespace. sep must not be empty.
std::vector<std::string> py_split(const std::string& s, const std::string* sep, int64_t maxsplit, bool from_right);
std::vector<std::string> py_splitlines(const std::string& s);  // str.splitlines()
std::string py_capitalize(const std::string& s);                // str.capitalize()
std::string py_title(const std::string& s);                     // str.title()
std::string jinja_title(const std::string& s);                  // jinja2's title filter
std::string py_replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count);
int64_t cp_index(const std::string& s, size_t byte_offset);     // code point index of a byte offset
std::string html_escape(const std::string& s);                  // jinja2's escape filter
bool parse_float(const std::string& s, double* out);            // float(str); false when not a number
std::string ascii_escape(const std::string& json);              // json.dumps(ensure_ascii=True)'s escaping

}  // namespace flashserve::jinja
