// The filters, as jinja2 3.1's jinja2/filters.py defines them; `tojson` as transformers
// overrides it (json.dumps with ensure_ascii=False, indent, separators, sort_keys).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "server/text/jinja/builtin_args.h"
#include "server/text/jinja/builtins.h"
#include "server/text/jinja/interpreter.h"
#include "server/text/jinja/py_str.h"

namespace flashserve::jinja {
namespace {

using namespace builtin_args;  // NOLINT: the helpers are this file's vocabulary

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


}  // namespace flashserve::jinja
