// Tests, methods and globals, as jinja2 3.1 (jinja2/tests.py, defaults.py) and Python's
// str/list/dict methods define them; `strftime_now` as transformers adds it. Filters: filters.cc.
#include "server/text/jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <string>

#include "server/text/jinja/builtin_args.h"
#include "server/text/jinja/interpreter.h"
#include "server/text/jinja/py_str.h"

namespace flashserve::jinja {

using namespace builtin_args;  // NOLINT: the helpers are this file's vocabulary

// ---- names -----------------------------------------------------------------------------------

static constexpr std::string_view kFilters[] = {
    "abs",    "attr",     "batch",  "capitalize", "center",  "count",   "d",          "default",    "dictsort",
    "e",      "escape",   "filesizeformat",       "first",   "float",   "forceescape", "format",    "groupby",
    "indent", "int",      "items",  "join",       "last",    "length",  "list",       "lower",      "map",
    "max",    "min",      "pprint", "random",     "reject",  "rejectattr", "replace", "reverse",    "round",
    "safe",   "select",   "selectattr", "slice",  "sort",    "string",  "striptags",  "sum",        "title",
    "tojson", "trim",     "truncate", "unique",   "upper",   "urlencode", "urlize",   "wordcount",  "wordwrap",
    "xmlattr"};
static constexpr std::string_view kTests[] = {
    "boolean", "callable", "defined", "divisibleby", "eq",     "equalto",  "escaped",  "even",    "false",
    "filter",  "float",    "ge",      "gt",          "greaterthan", "in",  "integer",  "iterable", "le",
    "lower",   "lt",       "lessthan", "mapping",    "ne",     "none",     "number",   "odd",     "sameas",
    "sequence", "string",  "test",    "true",        "undefined", "upper", "==",       "!=",      "<",
    "<=",      ">",        ">="};

bool is_known_filter(std::string_view name) {
  return std::find(std::begin(kFilters), std::end(kFilters), name) != std::end(kFilters);
}
bool is_known_test(std::string_view name) {
  return std::find(std::begin(kTests), std::end(kTests), name) != std::end(kTests);
}

bool has_method(const Value& self, const std::string& name) {
  static constexpr std::string_view kStr[] = {
      "capitalize", "casefold", "center",    "count",     "encode",    "endswith",  "expandtabs", "find",
      "format",     "format_map", "index",   "isalnum",   "isalpha",   "isascii",   "isdecimal", "isdigit",
      "isidentifier", "islower", "isnumeric", "isprintable", "isspace", "istitle",   "isupper",   "join",
      "ljust",      "lower",    "lstrip",    "maketrans", "partition", "removeprefix", "removesuffix", "replace",
      "rfind",      "rindex",   "rjust",     "rpartition", "rsplit",   "rstrip",    "split",     "splitlines",
      "startswith", "strip",    "swapcase",  "title",     "translate", "upper",     "zfill"};
  static constexpr std::string_view kList[] = {"append", "clear", "copy",    "count", "extend", "index",
                                               "insert", "pop",   "remove",  "reverse", "sort"};
  static constexpr std::string_view kTuple[] = {"count", "index"};
  static constexpr std::string_view kDict[] = {"clear", "copy",    "fromkeys",   "get",    "items", "keys",
                                               "pop",   "popitem", "setdefault", "update", "values"};
  auto in = [&](const auto& names) { return std::find(std::begin(names), std::end(names), name) != std::end(names); };
  if (self.is_string()) return in(kStr);
  if (self.is_tuple()) return in(kTuple);
  if (self.is_list()) return in(kList);
  if (self.is_dict()) return in(kDict);
  return false;
}

int64_t py_len(const Value& v, int line) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return static_cast<int64_t>(count_code_points(v.as_string()));
    case Value::Kind::kList: return static_cast<int64_t>(v.as_list().size());
    case Value::Kind::kDict: return static_cast<int64_t>(v.as_items().size());
    default: fail(std::string("object of type '") + v.type_name() + "' has no len()", line);
  }
}

void slice_indices(int64_t length, const Value& start, const Value& stop, const Value& step_v, int64_t* first,
                   int64_t* step, int64_t* count, int line) {
  const int64_t st = step_v.is_none() ? 1 : step_v.as_int();
  if (st == 0) fail("slice step cannot be zero", line);
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (v.is_none()) return dflt;
    int64_t i = v.as_int();
    if (i < 0) {
      i += length;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= length) {
      i = st < 0 ? length - 1 : length;
    }
    return i;
  };
  const int64_t b = clamp(start, st < 0 ? length - 1 : 0);
  const int64_t e = clamp(stop, st < 0 ? -1 : length);
  int64_t n = 0;
  if (st > 0 && e > b) n = (e - b + st - 1) / st;
  if (st < 0 && b > e) n = (b - e + (-st) - 1) / (-st);
  *first = b;
  *step = st;
  *count = n;
}

// ---- tests -----------------------------------------------------------------------------------

bool call_test(Interpreter& /*in*/, const std::string& name, const Value& v, const Args& args, int line) {
  auto need_args = [&](size_t n) {
    if (args.size() < n) fail("test '" + name + "' needs " + std::to_string(n) + " argument(s)", line);
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "sequence") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "callable") return v.is_callable() || v.is_undefined();  // Undefined has a __call__ (that raises)
  if (name == "escaped") return false;
  if (name == "filter") return v.is_string() && is_known_filter(v.as_string());
  if (name == "test") return v.is_string() && is_known_test(v.as_string());
  if (name == "odd" || name == "even" || name == "divisibleby") {
    // value % 2 == 1, value % 2 == 0, value % num == 0, with Python's % (floats too)
    Value divisor = Value::integer(2);
    if (name == "divisibleby") {
      need_args(1);
      divisor = args[0];
    }
    if (v.is_undefined()) fail(v.undefined_hint(), line);
    if (divisor.is_undefined()) fail(divisor.undefined_hint(), line);
    if (!v.is_number() || !divisor.is_number()) {
      fail(std::string("unsupported operand type(s) for %: '") + v.type_name() + "' and '" + divisor.type_name() + "'",
           line);
    }
    double r = 0;
    if (v.is_float() || divisor.is_float()) {
      if (divisor.as_double() == 0.0) fail("float modulo", line);
      r = std::fmod(v.as_double(), divisor.as_double());
      if (r != 0.0 && ((r < 0) != (divisor.as_double() < 0))) r += divisor.as_double();
    } else {
      const int64_t d = divisor.as_int();
      if (d == 0) fail("integer division or modulo by zero", line);
      int64_t m = d == -1 ? 0 : v.as_int() % d;
      if (m != 0 && ((m < 0) != (d < 0))) m += d;
      r = static_cast<double>(m);
    }
    return name == "odd" ? r == 1.0 : r == 0.0;
  }
  if (name == "lower" || name == "upper") {  // str(value).islower() / .isupper()
    bool any_cased = false;
    for (char32_t c : decode_utf8(to_str(v))) {
      if (!is_alpha_cp(c)) continue;
      any_cased = true;
      if (name == "lower" ? to_lower_cp(c) != c : to_upper_cp(c) != c) return false;
    }
    return any_cased;
  }
  if (name == "eq" || name == "equalto" || name == "==") {
    need_args(1);
    return equals(v, args[0]);
  }
  if (name == "ne" || name == "!=") {
    need_args(1);
    return !equals(v, args[0]);
  }
  if (name == "lt" || name == "lessthan" || name == "<") {
    need_args(1);
    return less_than(v, args[0], line);
  }
  if (name == "gt" || name == "greaterthan" || name == ">") {
    need_args(1);
    return less_than(args[0], v, line);
  }
  if (name == "le" || name == "<=") {
    need_args(1);
    return less_than(v, args[0], line) || equals(v, args[0]);
  }
  if (name == "ge" || name == ">=") {
    need_args(1);
    return less_than(args[0], v, line) || equals(v, args[0]);
  }
  if (name == "sameas") {
    need_args(1);
    const Value& o = args[0];
    if (v.kind() != o.kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool()) return v.as_bool() == o.as_bool();
    if (v.is_mapping()) return &v.as_items() == &o.as_items();
    if (v.is_list()) return &v.as_list() == &o.as_list();
    if (v.is_string()) return &v.as_string() == &o.as_string();
    if (v.is_int()) return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;  // CPython's cache
    return false;
  }
  if (name == "in") {
    need_args(1);
    const Value& c = args[0];
    if (c.is_string()) {
      if (!v.is_string()) fail(std::string("'in <string>' requires string as left operand, not ") + v.type_name(), line);
      return c.as_string().find(v.as_string()) != std::string::npos;
    }
    if (c.is_list()) {
      for (const Value& item : c.as_list()) {
        if (equals(item, v)) return true;
      }
      return false;
    }
    if (c.is_dict()) {
      if ((v.is_list() && !v.is_tuple()) || v.is_mapping()) fail(std::string("unhashable type: '") + v.type_name() + "'", line);
      return c.find(v) != nullptr;
    }
    if (c.is_undefined()) return false;
    fail(std::string("argument of type '") + c.type_name() + "' is not iterable", line);
  }
  fail("No test named '" + name + "'.", line);
}

// ---- methods ---------------------------------------------------------------------------------

Value call_method(Interpreter& in, const Value& self, const std::string& name, const Args& args,
                  const Kwargs& kwargs, int line) {
  if (self.is_string()) {
    const std::string& s = self.as_string();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const Value* chars = arg(args, kwargs, 0, "chars");
      const bool have = chars != nullptr && !chars->is_none();
      return in.make_string(py_strip(s, have ? need_string(*chars, "chars", line) : "", name != "rstrip",
                                     name != "lstrip", have),
                            line);
    }
    if (name == "split" || name == "rsplit") {
      const Value* sep_v = arg(args, kwargs, 0, "sep");
      const Value* maxsplit = arg(args, kwargs, 1, "maxsplit");
      const std::string* sep = nullptr;
      if (sep_v != nullptr && !sep_v->is_none()) {
        sep = &need_string(*sep_v, "sep", line);
        if (sep->empty()) fail("empty separator", line);
      }
      ValueList parts;
      for (auto& p : py_split(s, sep, maxsplit != nullptr ? need_int(*maxsplit, "maxsplit", line) : -1,
                              name == "rsplit")) {
        parts.push_back(in.make_string(std::move(p), line));
      }
      return in.make_list(std::move(parts), line);
    }
    if (name == "startswith" || name == "endswith") {
      if (args.empty()) fail(name + "() takes at least 1 argument", line);
      if (args.size() > 1) fail(name + "() with start/end is not supported", line);
      ValueList candidates = args[0].is_tuple() ? args[0].as_list() : ValueList{args[0]};
      for (const Value& c : candidates) {
        const std::string& p = need_string(c, name + " first arg", line);
        const bool hit = p.size() <= s.size() &&
                         (name == "startswith" ? s.compare(0, p.size(), p) == 0
                                               : s.compare(s.size() - p.size(), p.size(), p) == 0);
        if (hit) return Value::boolean(true);
      }
      return Value::boolean(false);
    }
    if (name == "upper") return in.make_string(py_upper(s), line);
    if (name == "lower" || name == "casefold") return in.make_string(py_lower(s), line);
    if (name == "title") return in.make_string(py_title(s), line);
    if (name == "capitalize") return in.make_string(py_capitalize(s), line);
    if (name == "swapcase") {
      std::string out;
      for (char32_t c : decode_utf8(s)) append_utf8(to_upper_cp(c) != c ? to_upper_cp(c) : to_lower_cp(c), &out);
      return in.make_string(std::move(out), line);
    }
    if (name == "replace") {
      if (args.size() < 2) fail("replace() needs old and new", line);
      const int64_t count = args.size() > 2 ? need_int(args[2], "count", line) : -1;
      return in.make_string(py_replace(s, need_string(args[0], "old", line), need_string(args[1], "new", line), count),
                            line);
    }
    if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
      if (args.empty()) fail(name + "() takes at least 1 argument", line);
      if (args.size() > 1) fail(name + "() with start/end is not supported", line);
      const std::string& sub = need_string(args[0], "substring", line);
      if (name == "count") {
        if (sub.empty()) return Value::integer(static_cast<int64_t>(count_code_points(s)) + 1);
        int64_t n = 0;
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
        return Value::integer(n);
      }
      const size_t hit = (name == "find" || name == "index") ? s.find(sub) : s.rfind(sub);
      if (hit == std::string::npos) {
        if (name == "index" || name == "rindex") fail("substring not found", line);
        return Value::integer(-1);
      }
      return Value::integer(cp_index(s, hit));
    }
    if (name == "join") {
      if (args.size() != 1) fail("join() takes exactly one argument", line);
      std::string out;
      bool first = true;
      for (const Value& item : in.iterate(args[0], line)) {
        if (!first) out += s;
        first = false;
        out += need_string(item, "sequence item", line);
        in.charge(0, line);
      }
      return in.make_string(std::move(out), line);
    }
    if (name == "splitlines") {
      ValueList out;
      for (auto& l : py_splitlines(s)) out.push_back(in.make_string(std::move(l), line));
      return in.make_list(std::move(out), line);
    }
    if (name == "removeprefix" || name == "removesuffix") {
      if (args.size() != 1) fail(name + "() takes exactly one argument", line);
      const std::string& a = need_string(args[0], "affix", line);
      if (name == "removeprefix" && s.compare(0, a.size(), a) == 0) return in.make_string(s.substr(a.size()), line);
      if (name == "removesuffix" && !a.empty() && a.size() <= s.size() && s.compare(s.size() - a.size(), a.size(), a) == 0) {
        return in.make_string(s.substr(0, s.size() - a.size()), line);
      }
      return self;
    }
    if (name == "isdigit" || name == "isdecimal" || name == "isnumeric" || name == "isalpha" || name == "isalnum" ||
        name == "isspace" || name == "isascii") {
      const std::vector<char32_t> cps = decode_utf8(s);
      if (name == "isascii") {
        return Value::boolean(std::all_of(cps.begin(), cps.end(), [](char32_t c) { return c < 0x80; }));
      }
      if (cps.empty()) return Value::boolean(false);
      auto digit = [](char32_t c) { return c >= '0' && c <= '9'; };
      bool ok = true;
      for (char32_t c : cps) {
        if (name == "isspace") {
          ok = ok && is_py_space(c);
        } else if (name == "isalpha") {
          ok = ok && is_alpha_cp(c);
        } else if (name == "isalnum") {
          ok = ok && (is_alpha_cp(c) || digit(c));
        } else {
          ok = ok && digit(c);
        }
      }
      return Value::boolean(ok);
    }
    if (name == "isupper" || name == "islower") {
      bool any_cased = false;
      for (char32_t c : decode_utf8(s)) {
        if (!is_alpha_cp(c)) continue;
        any_cased = true;
        if (name == "isupper" ? to_upper_cp(c) != c : to_lower_cp(c) != c) return Value::boolean(false);
      }
      return Value::boolean(any_cased);
    }
    fail("str." + name + "() is not supported by this chat template engine", line);
  }
  if (self.is_dict()) {
    if (name == "items") {
      ValueList pairs;
      for (const auto& [k, v] : self.as_items()) pairs.push_back(Value::list({k, v}, true));
      return in.make_list(std::move(pairs), line);
    }
    if (name == "keys" || name == "values") {
      ValueList out;
      for (const auto& [k, v] : self.as_items()) out.push_back(name == "keys" ? k : v);
      return in.make_list(std::move(out), line);
    }
    if (name == "get") {
      if (args.empty() || args.size() > 2) fail("get expected 1 or 2 arguments", line);
      const Value* v = self.find(args[0]);
      return v != nullptr ? *v : (args.size() > 1 ? args[1] : Value::none());
    }
    if (name == "copy") return Value::dict(self.as_items());
  }
  if (self.is_list()) {
    if (name == "count") {
      if (args.size() != 1) fail("count() takes exactly one argument", line);
      return Value::integer(std::count_if(self.as_list().begin(), self.as_list().end(),
                                          [&](const Value& x) { return equals(x, args[0]); }));
    }
    if (name == "index") {
      if (args.size() != 1) fail("index() takes exactly one argument", line);
      for (size_t i = 0; i < self.as_list().size(); ++i) {
        if (equals(self.as_list()[i], args[0])) return Value::integer(static_cast<int64_t>(i));
      }
      fail("value is not in list", line);
    }
    if (name == "copy") return in.make_list(self.as_list(), line);
  }
  fail(std::string(self.type_name()) + "." + name + "() is not supported by this chat template engine", line);
}

// ---- globals ---------------------------------------------------------------------------------

Value call_global(Interpreter& in, const std::string& name, const Args& args, const Kwargs& kwargs, int line) {
  if (name == "raise_exception") {
    const std::string message = args.empty() ? std::string() : to_str(args[0]);
    throw TemplateError(message, 0);  // the template's own message, as the client should see it
  }
  if (name == "range") {
    if (args.empty() || args.size() > 3 || !kwargs.empty()) fail("range expected 1 to 3 integer arguments", line);
    int64_t start = 0, stop = 0, step = 1;
    if (args.size() == 1) {
      stop = need_int(args[0], "range() argument", line);
    } else {
      start = need_int(args[0], "range() argument", line);
      stop = need_int(args[1], "range() argument", line);
      if (args.size() == 3) step = need_int(args[2], "range() argument", line);
    }
    if (step == 0) fail("range() arg 3 must not be zero", line);
    const Value none = Value::none();
    int64_t first = 0, count = 0;
    // The length of range(start, stop, step), with the sandbox's limit.
    if (step > 0 && stop > start) count = (stop - start + step - 1) / step;
    if (step < 0 && start > stop) count = (start - stop + (-step) - 1) / (-step);
    first = start;
    if (count > kMaxRange) {
      throw TemplateError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).", line, true);
    }
    ValueList items;
    items.reserve(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) items.push_back(Value::integer(first + i * step));
    return in.make_list(std::move(items), line);
  }
  if (name == "namespace" || name == "dict") {
    ValueItems items;
    if (!args.empty()) {
      if (args.size() > 1 || !args[0].is_dict()) fail(name + "() takes a mapping and keyword arguments", line);
      items = args[0].as_items();
    }
    for (const auto& [k, v] : kwargs) {
      bool replaced = false;
      for (auto& [ik, iv] : items) {
        if (ik.is_string() && ik.as_string() == k) {
          iv = v;
          replaced = true;
        }
      }
      if (!replaced) items.emplace_back(Value::string(k), v);
    }
    in.charge(items.size() * 2 * sizeof(Value), line);
    return name == "namespace" ? Value::name_space(std::move(items)) : Value::dict(std::move(items));
  }
  if (name == "strftime_now") {
    if (args.size() != 1) fail("strftime_now() takes exactly one argument", line);
    const std::string& format = need_string(args[0], "format", line);
    if (format.size() > 256) fail("strftime_now: format too long", line);
    const std::time_t now = in.now_unix() >= 0 ? static_cast<std::time_t>(in.now_unix()) : std::time(nullptr);
    std::tm tm_local{};
    localtime_r(&now, &tm_local);
    char buf[1024];
    const size_t n = format.empty() ? 0 : std::strftime(buf, sizeof(buf), format.c_str(), &tm_local);
    return in.make_string(std::string(buf, n), line);
  }
  fail("'" + name + "' is not callable", line);
}

}  // namespace flashserve::jinja
