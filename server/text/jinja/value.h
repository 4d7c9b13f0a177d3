// The values a chat template computes with: Python's objects as Jinja2 sees them (None, bool,
// int, float, str, list, tuple, dict, Jinja's Undefined, namespace, callables), with Python's
// printing (str, repr), truthiness, equality and ordering, and json.dumps as transformers'
// `tojson` filter calls it (ensure_ascii=False). Strings are UTF-8; lengths, indices and slices
// count code points as Python does.
//
// Lists and dicts are immutable once built (transformers renders in an
// ImmutableSandboxedEnvironment), so values share them by pointer; a namespace is the one
// mutable object (`ns.x = ...`), shared by reference like Python's. Every value is a finite tree
// of bounded depth, so printing, comparing and freeing one never recurses without end: a list
// or dict nests at most kMaxValueDepth levels (deeper is a TemplateError), and a namespace never
// holds a namespace, directly or inside a list or dict (Python allows `ns.x = ns`; a namespace
// in a namespace would allow cycles and depth that grows after construction; fuzz_chat_template
// found `{% set ns.n = ns %}{{ ns.n }}` overflowing the stack).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/text/utf8.h"

namespace flashserve::jinja {

// A template error raised while rendering or parsing; caught at the API and turned into a Status.
// `resource` marks a hit limit (output size, steps, depth) rather than a template bug.
struct TemplateError : std::runtime_error {
  TemplateError(const std::string& message, int line, bool resource = false, int column = 0)
      : std::runtime_error(message), line(line), column(column), resource(resource) {}
  int line;       // 1-based template line, 0 when unknown
  int column;     // 1-based byte column (parse errors), 0 when unknown
  bool resource;  // a limit, not a bug
};

class Value;
struct Callable;
inline constexpr int kMaxValueDepth = 128;
using ValueList = std::vector<Value>;
using ValueItems = std::vector<std::pair<Value, Value>>;  // a dict: keys in insertion order

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,  // Jinja's default Undefined: prints "", falsy, iterates empty
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,  // list or tuple (is_tuple())
    kDict,
    kNamespace,  // jinja2's namespace(): a dict whose attributes can be assigned
    kCallable,   // builtin function, bound method, macro
  };

  Value() = default;  // undefined
  static Value undefined(std::string hint = {});
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s);
  static Value list(ValueList items, bool is_tuple = false);
  static Value dict(ValueItems items);
  // Throws TemplateError (a limit) for a list or dict deeper than kMaxValueDepth.
  static Value name_space(ValueItems items);  // throws TemplateError if an item holds a namespace
  static Value callable(std::shared_ptr<const Callable> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_mapping() const { return kind_ == Kind::kDict || kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return bool_; }
  int64_t as_int() const { return int_; }  // bool and int
  double as_double() const;                 // bool, int, float
  const std::string& as_string() const { return *str_; }
  const ValueList& as_list() const { return *list_; }
  const ValueItems& as_items() const { return *items_; }
  ValueItems& mutable_namespace_items() const { return *items_; }
  const Callable& as_callable() const { return *fn_; }
  // Whether a namespace is in this list or dict, at any depth (or this is one).
  bool holds_namespace() const { return holds_ns_ || kind_ == Kind::kNamespace; }
  const std::string& undefined_hint() const { return hint_; }  // "'x' is undefined"

  // Python's bool(x).
  bool truthy() const;
  // The dict entry for `key`, or nullptr.
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;

  // Python's type name, for error messages: 'str', 'list', 'dict', 'NoneType', ...
  const char* type_name() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  bool tuple_ = false;
  bool holds_ns_ = false;  // a list or dict with a namespace in it, at any depth
  uint8_t depth_ = 0;      // list and dict levels: 0 for a scalar or namespace, else 1 + its items'
  int64_t int_ = 0;
  double float_ = 0.0;
  std::shared_ptr<const std::string> str_;
  std::shared_ptr<const ValueList> list_;
  std::shared_ptr<ValueItems> items_;  // dict (never written after creation) or namespace
  std::shared_ptr<const Callable> fn_;
  std::string hint_;
};

// Python's str(x), appended to `out` ("" for Undefined, "None", "True", repr for containers).
void append_str(const Value& v, std::string* out);
std::string to_str(const Value& v);
// Python's repr(x).
void append_repr(const Value& v, std::string* out);
// json.dumps(x, ensure_ascii=False, indent=indent, sort_keys=sort_keys) with json's default
// separators (", " and ": ", or "," and ": " when indented). `indent` < 0: no indent;
// `indent_str` non-empty overrides the spaces. Throws TemplateError on what json cannot dump.
void append_json(const Value& v, int indent, const std::string& indent_str, bool sort_keys, std::string* out);
// Python's float repr: shortest round trip, "1.0", "1e+16", "1e-05", "inf", "nan".
std::string float_repr(double d);

// Python's ==, and ordering (<) which throws TemplateError for types Python cannot order.
bool equals(const Value& a, const Value& b);
bool less_than(const Value& a, const Value& b, int line);

// ---- UTF-8 as Python's str sees it ----
// Code points of a UTF-8 string; a byte that is not valid UTF-8 stands for itself (U+0080..U+00FF
// range, like surrogateescape would keep it distinct), so nothing crashes on bad input.
std::vector<char32_t> decode_utf8(std::string_view s);
// The code point at byte `*pos` (< s.size()); advances `*pos`.
char32_t next_code_point(std::string_view s, size_t* pos);
using ::flashserve::text::append_utf8;  // server/text/utf8.h
std::string encode_utf8(const std::vector<char32_t>& cps, size_t begin, size_t end);
size_t count_code_points(std::string_view s);
// Python's str.isspace() for one code point (also what `\s` matches in Python's re).
bool is_py_space(char32_t cp);
// Python's str.strip/lstrip/rstrip: `chars` empty means whitespace.
std::string py_strip(std::string_view s, std::string_view chars, bool left, bool right, bool have_chars);
// Simple case mappings (ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic); others unchanged.
char32_t to_upper_cp(char32_t cp);
char32_t to_lower_cp(char32_t cp);
bool is_alpha_cp(char32_t cp);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);

}  // namespace flashserve::jinja
