// Filters, tests, methods and globals, each as jinja2 3.1 (jinja2/filters.py, tests.py) and
// Python's str/list/dict methods define it; `tojson` and `strftime_now` as transformers adds them.
#include "server/text/jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <string>

#include "server/text/jinja/interpreter.h"

namespace flashserve::jinja {
namespace {

[[noreturn]] void fail(const std::string& message, int line) { throw TemplateError(message, line); }

// Positional-or-keyword argument `index`/`name` of a call; nullptr when absent.
const Value* arg(const Args& args, const Kwargs& kwargs, size_t index, std::string_view name) {
  if (index < args.size()) return &args[index];
  for (const auto& [k, v] : kwargs) {
    if (k == name) return &v;
  }
  return nullptr;
}

void check_arity(const std::string& what, const Args& args, const Kwargs& kwargs, size_t max_positional,
                 std::initializer_list<std::string_view> keywords, int line) {
  if (args.size() > max_positional) fail(what + "() takes at most " + std::to_string(max_positional) + " arguments", line);
  for (const auto& [k, v] : kwargs) {
    if (std::find(keywords.begin(), keywords.end(), k) == keywords.end()) {
      fail(what + "() got an unexpected keyword argument '" + k + "'", line);
    }
  }
}

const std::string& need_string(const Value& v, const std::string& what, int line) {
  if (!v.is_string()) fail(what + " must be str, not " + v.type_name(), line);
  return v.as_string();
}

int64_t need_int(const Value& v, const std::string& what, int line) {
  if (!v.is_int() && !v.is_bool()) fail(what + " must be an integer, not " + std::string(v.type_name()), line);
  return v.as_int();
}

bool opt_bool(const Value* v, bool fallback) { return v == nullptr ? fallback : v->truthy(); }

// Python's str.split(sep, maxsplit) (sep null: runs of whitespace) and rsplit.
ValueList py_split(Interpreter& in, const std::string& s, const Value* sep, int64_t maxsplit, bool from_right,
                   int line) {
  ValueList parts;
  if (sep == nullptr || sep->is_none()) {
    const std::vector<char32_t> cps = decode_utf8(s);
    std::vector<std::pair<size_t, size_t>> words;
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && is_py_space(cps[i])) ++i;
      if (i == cps.size()) break;
      size_t j = i;
      while (j < cps.size() && !is_py_space(cps[j])) ++j;
      words.emplace_back(i, j);
      i = j;
    }
    if (maxsplit >= 0 && static_cast<int64_t>(words.size()) > maxsplit + 1) {
      // The unsplit rest keeps its inner whitespace (and loses only the outer run).
      if (!from_right) {
        // Python keeps the rest's trailing whitespace ('a  b  '.split(None, 1) == ['a', 'b  ']).
        std::vector<std::pair<size_t, size_t>> kept(words.begin(), words.begin() + maxsplit);
        kept.emplace_back(words[maxsplit].first, cps.size());
        words = std::move(kept);
      } else {
        const size_t keep_from = words.size() - static_cast<size_t>(maxsplit);
        std::vector<std::pair<size_t, size_t>> kept;
        kept.emplace_back(0, words[keep_from - 1].second);
        kept.insert(kept.end(), words.begin() + keep_from, words.end());
        words = std::move(kept);
      }
    }
    for (const auto& [b, e] : words) parts.push_back(in.make_string(encode_utf8(cps, b, e), line));
    return parts;
  }
  const std::string& sp = need_string(*sep, "sep", line);
  if (sp.empty()) fail("empty separator", line);
  std::vector<std::string> pieces;
  if (!from_right) {
    size_t start = 0;
    while (true) {
      const size_t hit = (maxsplit < 0 || static_cast<int64_t>(pieces.size()) < maxsplit) ? s.find(sp, start)
                                                                                          : std::string::npos;
      if (hit == std::string::npos) {
        pieces.push_back(s.substr(start));
        break;
      }
      pieces.push_back(s.substr(start, hit - start));
      start = hit + sp.size();
    }
  } else {
    size_t end = s.size();
    while (true) {
      size_t hit = std::string::npos;
      if ((maxsplit < 0 || static_cast<int64_t>(pieces.size()) < maxsplit) && end >= sp.size()) {
        hit = s.rfind(sp, end - sp.size());
      }
      if (hit == std::string::npos) {
        pieces.push_back(s.substr(0, end));
        break;
      }
      pieces.push_back(s.substr(hit + sp.size(), end - hit - sp.size()));
      end = hit;
    }
    std::reverse(pieces.begin(), pieces.end());
  }
  for (auto& p : pieces) parts.push_back(in.make_string(std::move(p), line));
  return parts;
}

// Python's str.splitlines() line boundaries.
bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

std::vector<std::string> py_splitlines(const std::string& s) {
  const std::vector<char32_t> cps = decode_utf8(s);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (!is_line_break(cps[i])) continue;
    lines.push_back(encode_utf8(cps, start, i));
    if (cps[i] == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < cps.size()) lines.push_back(encode_utf8(cps, start, cps.size()));
  return lines;
}

std::string py_capitalize(const std::string& s) {
  const std::vector<char32_t> cps = decode_utf8(s);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) append_utf8(i == 0 ? to_upper_cp(cps[i]) : to_lower_cp(cps[i]), &out);
  return out;
}

// Python's str.title(): a cased character after an uncased one is upper-cased, others lowered.
std::string py_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : decode_utf8(s)) {
    const bool cased = is_alpha_cp(c);
    append_utf8(cased ? (prev_cased ? to_lower_cp(c) : to_upper_cp(c)) : c, &out);
    prev_cased = cased;
  }
  return out;
}

// jinja2's title filter: words begin after runs of [-\s({\[<]; each word's first character
// upper-cased, the rest lowered.
std::string jinja_title(const std::string& s) {
  std::string out;
  bool word_start = true;
  for (char32_t c : decode_utf8(s)) {
    const bool sep = is_py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      append_utf8(c, &out);
      word_start = true;
    } else {
      append_utf8(word_start ? to_upper_cp(c) : to_lower_cp(c), &out);
      word_start = false;
    }
  }
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `rep` before every character and at the end
    const std::vector<char32_t> cps = decode_utf8(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += rep;
        ++done;
      }
      if (i < cps.size()) append_utf8(cps[i], &out);
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, start);
    if (hit == std::string::npos) break;
    out.append(s, start, hit - start);
    out += rep;
    start = hit + old.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

// A code point index of a byte offset.
int64_t cp_index(const std::string& s, size_t byte_offset) {
  return static_cast<int64_t>(count_code_points(std::string_view(s).substr(0, byte_offset)));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

// Python's float(str) for the forms templates meet; false when it is not a number.
bool parse_float(const std::string& s, double* out) {
  const std::string t = py_strip(s, "", true, true, false);
  if (t.empty()) return false;
  std::string clean;
  for (char c : t) {
    if (c != '_') clean.push_back(c);
  }
  char* end = nullptr;
  *out = std::strtod(clean.c_str(), &end);
  return end != nullptr && *end == '\0';
}

// json.dumps(ensure_ascii=True) escaping of non-ASCII text in an already-dumped document.
std::string ascii_escape(const std::string& json) {
  std::string out;
  for (char32_t c : decode_utf8(json)) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      continue;
    }
    char buf[16];
    if (c >= 0x10000) {
      const char32_t v = c - 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                    static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
    } else {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
    }
    out += buf;
  }
  return out;
}

Value tojson(Interpreter& in, const Value& v, const Args& args, const Kwargs& kwargs, int line) {
  // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  check_arity("tojson", args, kwargs, 4, {"ensure_ascii", "indent", "separators", "sort_keys"}, line);
  const Value* ensure_ascii = arg(args, kwargs, 0, "ensure_ascii");
  const Value* indent_v = arg(args, kwargs, 1, "indent");
  const Value* separators = arg(args, kwargs, 2, "separators");
  const bool sort_keys = opt_bool(arg(args, kwargs, 3, "sort_keys"), false);
  int indent = -1;
  std::string indent_str;
  if (indent_v != nullptr && !indent_v->is_none()) {
    if (indent_v->is_string()) {
      indent_str = indent_v->as_string();
      if (indent_str.empty()) indent = 0;
    } else {
      indent = static_cast<int>(std::clamp<int64_t>(need_int(*indent_v, "indent", line), 0, 64));
    }
  }
  std::string out;
  append_json(v, indent, indent_str, sort_keys, &out);
  if (separators != nullptr && !separators->is_none()) {
    // Custom separators: dump again with them (rare; only ", "/": " variants are meaningful).
    if (!separators->is_list() || separators->as_list().size() != 2 || !separators->as_list()[0].is_string() ||
        !separators->as_list()[1].is_string()) {
      fail("tojson: separators must be a pair of strings", line);
    }
    const std::string& item_sep = separators->as_list()[0].as_string();
    const std::string& key_sep = separators->as_list()[1].as_string();
    const bool pretty = indent >= 0 || !indent_str.empty();
    // Re-serialize with the separators by rewriting the default ones outside strings.
    std::string rewritten;
    bool in_string = false;
    for (size_t i = 0; i < out.size(); ++i) {
      const char c = out[i];
      if (in_string) {
        rewritten.push_back(c);
        if (c == '\\' && i + 1 < out.size()) {
          rewritten.push_back(out[++i]);
        } else if (c == '"') {
          in_string = false;
        }
        continue;
      }
      if (c == '"') {
        in_string = true;
        rewritten.push_back(c);
      } else if (c == ',') {
        rewritten += item_sep;
        if (!pretty && i + 1 < out.size() && out[i + 1] == ' ') ++i;
      } else if (c == ':' && i + 1 < out.size() && out[i + 1] == ' ') {
        rewritten += key_sep;
        ++i;
      } else {
        rewritten.push_back(c);
      }
    }
    out = std::move(rewritten);
  }
  if (opt_bool(ensure_ascii, false)) out = ascii_escape(out);
  return in.make_string(std::move(out), line);
}

// Attribute lookup for filters with attribute=: "a.b" walks, integers index.
Value attribute_of(Interpreter& in, const Value& item, const std::string& path, int line) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    char* end = nullptr;
    const long long idx = std::strtoll(part.c_str(), &end, 10);
    if (!part.empty() && end != nullptr && *end == '\0') {
      v = in.getitem(v, Value::integer(idx), line);
    } else {
      v = in.getitem(v, Value::string(part), line);
    }
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(py_lower(v.as_string()));
  return v;
}

Value select_or_reject(Interpreter& in, const Value& seq, const Args& args, const Kwargs& kwargs, bool select,
                       bool by_attr, int line) {
  ValueList out;
  size_t next = 0;
  std::string attribute;
  if (by_attr) {
    if (args.empty() || !args[0].is_string()) fail("selectattr/rejectattr need an attribute name", line);
    attribute = args[0].as_string();
    next = 1;
  }
  std::string test_name;
  if (next < args.size()) {
    test_name = need_string(args[next], "test name", line);
    ++next;
  }
  const Args test_args(args.begin() + static_cast<std::ptrdiff_t>(std::min(next, args.size())), args.end());
  for (const Value& item : in.iterate(seq, line)) {
    const Value subject = by_attr ? attribute_of(in, item, attribute, line) : item;
    const bool ok = test_name.empty() ? subject.truthy() : in.test(test_name, subject, test_args, kwargs, line);
    if (ok == select) out.push_back(item);
  }
  return in.make_list(std::move(out), line);
}

}  // namespace

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

// ---- filters ---------------------------------------------------------------------------------

Value call_filter(Interpreter& in, const std::string& name, const Value& v, const Args& args, const Kwargs& kwargs,
                  int line) {
  auto str_of = [&](const Value& x) { return to_str(x); };
  if (name == "tojson") return tojson(in, v, args, kwargs, line);
  if (name == "trim") {
    const Value* chars = arg(args, kwargs, 0, "chars");
    const bool have = chars != nullptr && !chars->is_none();
    return in.make_string(py_strip(str_of(v), have ? need_string(*chars, "chars", line) : "", true, true, have), line);
  }
  if (name == "length" || name == "count") return Value::integer(py_len(v, line));
  if (name == "upper") return in.make_string(py_upper(str_of(v)), line);
  if (name == "lower") return in.make_string(py_lower(str_of(v)), line);
  if (name == "capitalize") return in.make_string(py_capitalize(str_of(v)), line);
  if (name == "title") return in.make_string(jinja_title(str_of(v)), line);
  if (name == "string") return v.is_string() ? v : in.make_string(str_of(v), line);
  if (name == "safe") return v.is_string() ? v : in.make_string(str_of(v), line);
  if (name == "e" || name == "escape" || name == "forceescape") return in.make_string(html_escape(str_of(v)), line);
  if (name == "default" || name == "d") {
    const Value* dflt = arg(args, kwargs, 0, "default_value");
    const bool boolean = opt_bool(arg(args, kwargs, 1, "boolean"), false);
    if (v.is_undefined() || (boolean && !v.truthy())) return dflt != nullptr ? *dflt : Value::string("");
    return v;
  }
  if (name == "first") {
    if (v.is_undefined()) return Value::undefined("No first item, sequence was empty.");
    const ValueList items = in.iterate(v, line);
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
  }
  if (name == "last") {
    if (v.is_undefined()) return Value::undefined("No last item, sequence was empty.");
    if (!v.is_string() && !v.is_list() && !v.is_dict()) {
      fail(std::string("'") + v.type_name() + "' object is not reversible", line);
    }
    const ValueList items = in.iterate(v, line);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
  }
  if (name == "join") {
    const Value* sep = arg(args, kwargs, 0, "d");
    const Value* attribute = arg(args, kwargs, 1, "attribute");
    const std::string d = sep != nullptr ? str_of(*sep) : "";
    std::string out;
    bool first = true;
    for (const Value& item : in.iterate(v, line)) {
      if (!first) out += d;
      first = false;
      append_str(attribute != nullptr ? attribute_of(in, item, str_of(*attribute), line) : item, &out);
      in.charge(0, line);
    }
    return in.make_string(std::move(out), line);
  }
  if (name == "replace") {
    if (args.size() < 2) fail("replace() needs old and new", line);
    const Value* count = arg(args, kwargs, 2, "count");
    const int64_t n = (count == nullptr || count->is_none()) ? -1 : need_int(*count, "count", line);
    return in.make_string(py_replace(str_of(v), str_of(args[0]), str_of(args[1]), n), line);
  }
  if (name == "list") return in.make_list(in.iterate(v, line), line);
  if (name == "items") {
    if (v.is_undefined()) return in.make_list({}, line);
    if (!v.is_dict()) fail("Can only get item pairs from a mapping.", line);
    ValueList pairs;
    for (const auto& [k, val] : v.as_items()) pairs.push_back(Value::list({k, val}, true));
    return in.make_list(std::move(pairs), line);
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::vector<char32_t> cps = decode_utf8(v.as_string());
      std::reverse(cps.begin(), cps.end());
      return in.make_string(encode_utf8(cps, 0, cps.size()), line);
    }
    ValueList items = in.iterate(v, line);
    std::reverse(items.begin(), items.end());
    return in.make_list(std::move(items), line);
  }
  if (name == "abs") {
    if (v.is_float()) return Value::number(std::fabs(v.as_double()));
    if (v.is_int() || v.is_bool()) {
      if (v.as_int() == INT64_MIN) fail("integer overflow", line);
      return Value::integer(std::llabs(v.as_int()));
    }
    fail(std::string("bad operand type for abs(): '") + v.type_name() + "'", line);
  }
  if (name == "int") {
    const Value* dflt = arg(args, kwargs, 0, "default");
    const Value fallback = dflt != nullptr ? *dflt : Value::integer(0);
    if (v.is_undefined()) fail(v.undefined_hint(), line);
    const Value* base_v = arg(args, kwargs, 1, "base");
    const int base = base_v != nullptr ? static_cast<int>(need_int(*base_v, "base", line)) : 10;
    if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
    if (v.is_float()) {
      const double d = v.as_double();
      if (!std::isfinite(d) || std::fabs(d) > 9.2e18) return fallback;
      return Value::integer(static_cast<int64_t>(d));
    }
    if (v.is_string()) {
      const std::string t = py_strip(v.as_string(), "", true, true, false);
      char* end = nullptr;
      errno = 0;
      const long long x = std::strtoll(t.c_str(), &end, base);
      if (!t.empty() && end != nullptr && *end == '\0' && errno == 0) return Value::integer(x);
      double d = 0;
      if (parse_float(t, &d) && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value::integer(static_cast<int64_t>(d));
    }
    return fallback;
  }
  if (name == "float") {
    const Value* dflt = arg(args, kwargs, 0, "default");
    const Value fallback = dflt != nullptr ? *dflt : Value::number(0.0);
    if (v.is_undefined()) fail(v.undefined_hint(), line);
    if (v.is_number()) return Value::number(v.as_double());
    double d = 0;
    if (v.is_string() && parse_float(v.as_string(), &d)) return Value::number(d);
    return fallback;
  }
  if (name == "round") {
    const Value* precision_v = arg(args, kwargs, 0, "precision");
    const Value* method_v = arg(args, kwargs, 1, "method");
    const int64_t precision = precision_v != nullptr ? need_int(*precision_v, "precision", line) : 0;
    const std::string method = method_v != nullptr ? str_of(*method_v) : "common";
    if (!v.is_number()) fail("round: a number is needed", line);
    if (method != "common" && method != "ceil" && method != "floor") fail("method must be common, ceil or floor", line);
    if (method == "common" && (v.is_int() || v.is_bool())) return Value::integer(v.as_int());
    const double x = v.as_double();
    if (!std::isfinite(x)) return Value::number(x);
    if (method == "common" && precision >= 0 && precision <= 300) {
      // Python's round() rounds the exact binary value half to even; so does printf.
      char buf[512];
      std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::min<int64_t>(precision, 100)), x);
      return Value::number(std::strtod(buf, nullptr));
    }
    const double scale = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(precision, -300, 300)));
    const double scaled = x * scale;
    const double r = method == "ceil" ? std::ceil(scaled) : method == "floor" ? std::floor(scaled) : std::nearbyint(scaled);
    return Value::number(r / scale);
  }
  if (name == "indent") {
    if (!v.is_string()) {
      fail(std::string("unsupported operand type(s) for +=: '") + v.type_name() + "' and 'str'", line);
    }
    const Value* width_v = arg(args, kwargs, 0, "width");
    const bool first = opt_bool(arg(args, kwargs, 1, "first"), false);
    const bool blank = opt_bool(arg(args, kwargs, 2, "blank"), false);
    std::string indention = "    ";
    if (width_v != nullptr) {
      indention = width_v->is_string()
                      ? width_v->as_string()
                      : std::string(static_cast<size_t>(std::clamp<int64_t>(need_int(*width_v, "width", line), 0, 1024)),
                                    ' ');
    }
    const std::vector<std::string> lines = py_splitlines(str_of(v) + "\n");
    std::string rv;
    if (blank) {
      for (size_t i = 0; i < lines.size(); ++i) {
        if (i) rv += "\n" + indention;
        rv += lines[i];
      }
    } else if (!lines.empty()) {
      rv = lines[0];
      for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? std::string() : indention) + lines[i];
    }
    if (first) rv = indention + rv;
    return in.make_string(std::move(rv), line);
  }
  if (name == "map") {
    ValueList out;
    const Value* attribute = arg({}, kwargs, 0, "attribute");
    if (attribute != nullptr) {
      const Value* dflt = arg({}, kwargs, 0, "default");
      for (const Value& item : in.iterate(v, line)) {
        Value x = attribute_of(in, item, str_of(*attribute), line);
        if (x.is_undefined() && dflt != nullptr) x = *dflt;
        out.push_back(std::move(x));
      }
      return in.make_list(std::move(out), line);
    }
    if (args.empty()) fail("map: a filter name or attribute= is needed", line);
    const std::string filter_name = need_string(args[0], "filter name", line);
    const Args rest(args.begin() + 1, args.end());
    for (const Value& item : in.iterate(v, line)) out.push_back(in.filter(filter_name, item, rest, kwargs, line));
    return in.make_list(std::move(out), line);
  }
  if (name == "select" || name == "reject") return select_or_reject(in, v, args, kwargs, name == "select", false, line);
  if (name == "selectattr" || name == "rejectattr") {
    return select_or_reject(in, v, args, kwargs, name == "selectattr", true, line);
  }
  if (name == "sort" || name == "unique" || name == "min" || name == "max") {
    const bool is_sort = name == "sort";
    const bool reverse = is_sort && opt_bool(arg(args, kwargs, 0, "reverse"), false);
    const bool case_sensitive = opt_bool(arg(args, kwargs, is_sort ? 1 : 0, "case_sensitive"), false);
    const Value* attribute = arg(args, kwargs, is_sort ? 2 : 1, "attribute");
    ValueList items = in.iterate(v, line);
    auto key = [&](const Value& item) {
      return sort_key(attribute != nullptr ? attribute_of(in, item, str_of(*attribute), line) : item, case_sensitive);
    };
    if (name == "unique") {
      ValueList out, seen;
      for (const Value& item : items) {
        const Value k = key(item);
        if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
          seen.push_back(k);
          out.push_back(item);
        }
      }
      return in.make_list(std::move(out), line);
    }
    std::vector<std::pair<Value, Value>> keyed;
    for (const Value& item : items) keyed.emplace_back(key(item), item);
    if (!is_sort) {
      if (keyed.empty()) return Value::undefined("No aggregated item, sequence was empty.");
      size_t best = 0;
      for (size_t i = 1; i < keyed.size(); ++i) {
        const bool better = name == "min" ? less_than(keyed[i].first, keyed[best].first, line)
                                          : less_than(keyed[best].first, keyed[i].first, line);
        if (better) best = i;
      }
      return keyed[best].second;
    }
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
      return reverse ? less_than(b.first, a.first, line) : less_than(a.first, b.first, line);
    });
    ValueList out;
    for (auto& [k, item] : keyed) out.push_back(std::move(item));
    return in.make_list(std::move(out), line);
  }
  if (name == "dictsort") {
    if (!v.is_dict()) fail("dictsort: a mapping is needed", line);
    const bool case_sensitive = opt_bool(arg(args, kwargs, 0, "case_sensitive"), false);
    const Value* by_v = arg(args, kwargs, 1, "by");
    const bool by_value = by_v != nullptr && str_of(*by_v) == "value";
    const bool reverse = opt_bool(arg(args, kwargs, 2, "reverse"), false);
    ValueList pairs;
    for (const auto& [k, val] : v.as_items()) pairs.push_back(Value::list({k, val}, true));
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
      const Value ka = sort_key(a.as_list()[by_value ? 1 : 0], case_sensitive);
      const Value kb = sort_key(b.as_list()[by_value ? 1 : 0], case_sensitive);
      return reverse ? less_than(kb, ka, line) : less_than(ka, kb, line);
    });
    return in.make_list(std::move(pairs), line);
  }
  if (name == "sum") {
    const Value* attribute = arg(args, kwargs, 0, "attribute");
    const Value* start = arg(args, kwargs, 1, "start");
    Value total = start != nullptr ? *start : Value::integer(0);
    for (const Value& item : in.iterate(v, line)) {
      const Value x = attribute != nullptr ? attribute_of(in, item, str_of(*attribute), line) : item;
      if (!x.is_number() || !total.is_number()) fail("sum: numbers are needed", line);
      if (x.is_float() || total.is_float()) {
        total = Value::number(total.as_double() + x.as_double());
      } else {
        int64_t r = 0;
        if (__builtin_add_overflow(total.as_int(), x.as_int(), &r)) fail("integer overflow", line);
        total = Value::integer(r);
      }
    }
    return total;
  }
  if (name == "attr") {
    if (args.empty()) fail("attr() needs a name", line);
    return in.getattr(v, str_of(args[0]), line);
  }
  if (name == "batch") {
    const Value* count_v = arg(args, kwargs, 0, "linecount");
    if (count_v == nullptr) fail("batch() needs a line count", line);
    const int64_t n = need_int(*count_v, "linecount", line);
    if (n <= 0) fail("batch(): the line count must be positive", line);
    const Value* fill = arg(args, kwargs, 1, "fill_with");
    ValueList out, row;
    for (const Value& item : in.iterate(v, line)) {
      row.push_back(item);
      if (static_cast<int64_t>(row.size()) == n) {
        out.push_back(in.make_list(std::move(row), line));
        row.clear();
      }
    }
    if (!row.empty()) {
      while (fill != nullptr && !fill->is_none() && static_cast<int64_t>(row.size()) < n) row.push_back(*fill);
      out.push_back(in.make_list(std::move(row), line));
    }
    return in.make_list(std::move(out), line);
  }
  if (name == "wordcount") {  // len(re.findall(r"\w+", str(value)))
    int64_t words = 0;
    bool in_word = false;
    for (char32_t c : decode_utf8(str_of(v))) {
      const bool w = is_alpha_cp(c) || (c >= '0' && c <= '9') || c == '_' || (c >= 0x4E00 && c <= 0x9FFF);
      if (w && !in_word) ++words;
      in_word = w;
    }
    return Value::integer(words);
  }
  if (is_known_filter(name)) fail("filter '" + name + "' is not supported by this chat template engine", line);
  fail("No filter named '" + name + "'.", line);
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
      const Value* maxsplit = arg(args, kwargs, 1, "maxsplit");
      return in.make_list(py_split(in, s, arg(args, kwargs, 0, "sep"),
                                   maxsplit != nullptr ? need_int(*maxsplit, "maxsplit", line) : -1, name == "rsplit",
                                   line),
                          line);
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
