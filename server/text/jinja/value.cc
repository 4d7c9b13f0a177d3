#include "server/text/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "server/text/jinja/callable.h"

namespace flashserve::jinja {

// ---- construction ----------------------------------------------------------------------------

Value Value::undefined(std::string hint) {
  Value v;
  v.hint_ = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  v.int_ = b ? 1 : 0;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}
Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.float_ = f;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.str_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
namespace {
// A container's depth and whether it holds a namespace, from one of its items.
void take_item(int item_depth, bool item_holds, int* depth, bool* holds) {
  *depth = std::max(*depth, 1 + item_depth);
  *holds = *holds || item_holds;
}
void check_depth(int depth) {
  if (depth > kMaxValueDepth)
    throw TemplateError("a list or dict nested more than " + std::to_string(kMaxValueDepth) + " levels deep", 0, true);
}
}  // namespace

Value Value::list(ValueList items, bool is_tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.tuple_ = is_tuple;
  int depth = 1;
  bool holds = false;
  for (const Value& x : items) take_item(x.depth_, x.holds_namespace(), &depth, &holds);
  check_depth(depth);
  v.depth_ = static_cast<uint8_t>(depth);
  v.holds_ns_ = holds;
  v.list_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}
Value Value::dict(ValueItems items) {
  Value v;
  v.kind_ = Kind::kDict;
  int depth = 1;
  bool holds = false;
  for (const auto& [k, x] : items) {
    take_item(k.depth_, k.holds_namespace(), &depth, &holds);
    take_item(x.depth_, x.holds_namespace(), &depth, &holds);
  }
  check_depth(depth);
  v.depth_ = static_cast<uint8_t>(depth);
  v.holds_ns_ = holds;
  v.items_ = std::make_shared<ValueItems>(std::move(items));
  return v;
}
Value Value::name_space(ValueItems items) {
  for (const auto& [k, x] : items)
    if (x.holds_namespace()) throw TemplateError("a namespace cannot hold a namespace", 0);
  Value v = dict(std::move(items));
  v.kind_ = Kind::kNamespace;
  v.depth_ = 0;
  v.holds_ns_ = false;
  return v;
}
Value Value::callable(std::shared_ptr<const Callable> fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.fn_ = std::move(fn);
  return v;
}

double Value::as_double() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_); }

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return bool_;
    case Kind::kInt: return int_ != 0;
    case Kind::kFloat: return float_ != 0.0;
    case Kind::kString: return !str_->empty();
    case Kind::kList: return !list_->empty();
    case Kind::kDict: return !items_->empty();
    case Kind::kNamespace:
    case Kind::kCallable: return true;
  }
  return false;
}

const Value* Value::find(const Value& key) const {
  if (!is_mapping()) return nullptr;
  for (const auto& [k, v] : *items_) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* Value::find(std::string_view key) const {
  if (!is_mapping()) return nullptr;
  for (const auto& [k, v] : *items_) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return tuple_ ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kCallable: return "function";
  }
  return "object";
}

// ---- UTF-8 -----------------------------------------------------------------------------------

char32_t next_code_point(std::string_view s, size_t* pos) {
  const size_t i = *pos;
  const auto b0 = static_cast<unsigned char>(s[i]);
  int len = 0;
  char32_t cp = 0;
  if (b0 < 0x80) {
    *pos = i + 1;
    return b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
  }
  bool ok = len > 0 && i + len <= s.size();
  for (int k = 1; ok && k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) ok = false;
    cp = (cp << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8 either.
  if (ok && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
             cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) {
    ok = false;
  }
  if (!ok) {
    *pos = i + 1;
    return b0;  // the byte stands for itself
  }
  *pos = i + len;
  return cp;
}

std::vector<char32_t> decode_utf8(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) out.push_back(next_code_point(s, &i));
  return out;
}

std::string encode_utf8(const std::vector<char32_t>& cps, size_t begin, size_t end) {
  std::string out;
  out.reserve(end > begin ? end - begin : 0);
  for (size_t i = begin; i < end; ++i) append_utf8(cps[i], &out);
  return out;
}

size_t count_code_points(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) next_code_point(s, &i);
  return n;
}

bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

std::string py_strip(std::string_view s, std::string_view chars, bool left, bool right, bool have_chars) {
  const std::vector<char32_t> cps = decode_utf8(s);
  std::vector<char32_t> set;
  if (have_chars) set = decode_utf8(chars);
  auto strip_this = [&](char32_t c) {
    return have_chars ? std::find(set.begin(), set.end(), c) != set.end() : is_py_space(c);
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip_this(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip_this(cps[e - 1])) --e;
  }
  if (b == 0 && e == cps.size()) return std::string(s);
  return encode_utf8(cps, b, e);
}

char32_t to_upper_cp(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x131) return 'I';
    if (c == 0x17F) return 'S';
    const bool odd_lower = (c <= 0x137) || (c >= 0x14A && c <= 0x177);
    const bool even_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_lower && (c & 1)) return c - 1;
    if (even_lower && !(c & 1)) return c - 1;
    return c;
  }
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (c >= 0x3CD && c <= 0x3CE) return c - 63;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF)) && (c & 1)) return c - 1;
  if (c >= 0x561 && c <= 0x586) return c - 48;
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 32;
  return c;
}

char32_t to_lower_cp(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x130) return 'i';
    const bool even_upper = (c <= 0x137) || (c >= 0x14A && c <= 0x177);
    const bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (even_upper && !(c & 1)) return c + 1;
    if (odd_upper && (c & 1)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c >= 0x38E && c <= 0x38F) return c + 63;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF)) && !(c & 1)) return c + 1;
  if (c >= 0x531 && c <= 0x556) return c + 48;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 32;
  return c;
}

bool is_alpha_cp(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return to_upper_cp(c) != c || to_lower_cp(c) != c || c == 0xDF;
}

static std::string map_case(std::string_view s, char32_t (*f)(char32_t)) {
  bool ascii = std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  if (ascii) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(f(static_cast<unsigned char>(c)));
    return out;
  }
  std::string out;
  out.reserve(s.size());
  for (char32_t c : decode_utf8(s)) append_utf8(f(c), &out);
  return out;
}
std::string py_upper(std::string_view s) { return map_case(s, to_upper_cp); }
std::string py_lower(std::string_view s) { return map_case(s, to_lower_cp); }

// ---- printing --------------------------------------------------------------------------------

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0.0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e_pos; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  const int exp10 = std::stoi(sci.substr(e_pos + 1));
  const int decpt = exp10 + 1;  // digits d1 d2 ... times 10^(decpt - len)
  std::string out = sign;
  if (decpt > -4 && decpt <= 16) {
    const int n = static_cast<int>(digits.size());
    if (decpt <= 0) {
      out += "0." + std::string(-decpt, '0') + digits;
    } else if (decpt >= n) {
      out += digits + std::string(decpt - n, '0') + ".0";
    } else {
      out += digits.substr(0, decpt) + "." + digits.substr(decpt);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
  return out + ebuf;
}

// Python's str.isprintable() for non-ASCII code points, as far as the common categories go
// (Cc, Cf, Zs, Zl, Zp, Co, Cs, noncharacters).
static bool is_printable_cp(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  if (c <= 0xA0 || c == 0xAD) return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x180E || c == 0x1680) {
    return false;
  }
  if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x2064) ||
      (c >= 0x2066 && c <= 0x206F) || c == 0x3000) {
    return false;
  }
  if ((c >= 0xD800 && c <= 0xF8FF) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) || c == 0xFFFE || c == 0xFFFF) {
    return false;
  }
  if (c >= 0xE0000 || c == 0x110BD || (c >= 0x1D173 && c <= 0x1D17A)) return false;
  return true;
}

static void append_string_repr(const std::string& s, std::string* out) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  out->push_back(quote);
  for (char32_t c : decode_utf8(s)) {
    char buf[16];
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c == '\t') {
      *out += "\\t";
    } else if (c == '\n') {
      *out += "\\n";
    } else if (c == '\r') {
      *out += "\\r";
    } else if (is_printable_cp(c)) {
      append_utf8(c, out);
    } else {
      if (c <= 0xFF) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      } else if (c <= 0xFFFF) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      }
      *out += buf;
    }
  }
  out->push_back(quote);
}

void append_repr(const Value& v, std::string* out) {
  switch (v.kind()) {
    case Value::Kind::kString: append_string_repr(v.as_string(), out); return;
    case Value::Kind::kUndefined: return;  // repr(Undefined) is "Undefined"; str() is what prints
    case Value::Kind::kList: {
      const auto& items = v.as_list();
      out->push_back(v.is_tuple() ? '(' : '[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) *out += ", ";
        append_repr(items[i], out);
      }
      if (v.is_tuple() && items.size() == 1) out->push_back(',');
      out->push_back(v.is_tuple() ? ')' : ']');
      return;
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      if (v.is_namespace()) *out += "<Namespace ";
      out->push_back('{');
      bool first = true;
      for (const auto& [k, val] : v.as_items()) {
        if (!first) *out += ", ";
        first = false;
        append_repr(k, out);
        *out += ": ";
        append_repr(val, out);
      }
      out->push_back('}');
      if (v.is_namespace()) out->push_back('>');
      return;
    }
    default: append_str(v, out);
  }
}

void append_str(const Value& v, std::string* out) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return;
    case Value::Kind::kNone: *out += "None"; return;
    case Value::Kind::kBool: *out += v.as_bool() ? "True" : "False"; return;
    case Value::Kind::kInt: *out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: *out += float_repr(v.as_double()); return;
    case Value::Kind::kString: *out += v.as_string(); return;
    case Value::Kind::kCallable: *out += "<function " + v.as_callable().name + ">"; return;
    default: append_repr(v, out);
  }
}

std::string to_str(const Value& v) {
  if (v.is_string()) return v.as_string();
  std::string s;
  append_str(v, &s);
  return s;
}

// ---- json ------------------------------------------------------------------------------------

static void append_json_string(const std::string& s, std::string* out) {
  out->push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

static void json_rec(const Value& v, int indent, const std::string& indent_str, bool sort_keys, int depth,
                     std::string* out) {
  if (depth > 200) throw TemplateError("tojson: nesting too deep", 0, true);
  const bool pretty = indent >= 0 || !indent_str.empty();
  auto newline = [&](int level) {
    out->push_back('\n');
    for (int i = 0; i < level; ++i) {
      if (!indent_str.empty()) {
        *out += indent_str;
      } else {
        out->append(static_cast<size_t>(indent), ' ');
      }
    }
  };
  const char* item_sep = pretty ? "," : ", ";
  switch (v.kind()) {
    case Value::Kind::kNone: *out += "null"; return;
    case Value::Kind::kBool: *out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: *out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: {
      const double d = v.as_double();
      if (std::isnan(d)) {
        *out += "NaN";
      } else if (std::isinf(d)) {
        *out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        *out += float_repr(d);
      }
      return;
    }
    case Value::Kind::kString: append_json_string(v.as_string(), out); return;
    case Value::Kind::kList: {
      const auto& items = v.as_list();
      if (items.empty()) {
        *out += "[]";
        return;
      }
      out->push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) *out += item_sep;
        if (pretty) newline(depth + 1);
        json_rec(items[i], indent, indent_str, sort_keys, depth + 1, out);
      }
      if (pretty) newline(depth);
      out->push_back(']');
      return;
    }
    case Value::Kind::kDict: {
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [k, val] : v.as_items()) {
        std::string key;
        if (k.is_string()) {
          key = k.as_string();
        } else if (k.is_none()) {
          key = "null";
        } else if (k.is_bool()) {
          key = k.as_bool() ? "true" : "false";
        } else if (k.is_int() || k.is_float()) {
          json_rec(k, -1, "", false, depth + 1, &key);
        } else {
          throw TemplateError(std::string("tojson: keys must be str, int, float, bool or None, not ") +
                                  k.type_name(), 0);
        }
        entries.emplace_back(std::move(key), &val);
      }
      if (entries.empty()) {
        *out += "{}";
        return;
      }
      if (sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      out->push_back('{');
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) *out += item_sep;
        if (pretty) newline(depth + 1);
        append_json_string(entries[i].first, out);
        *out += ": ";
        json_rec(*entries[i].second, indent, indent_str, sort_keys, depth + 1, out);
      }
      if (pretty) newline(depth);
      out->push_back('}');
      return;
    }
    default:
      throw TemplateError(std::string("tojson: Object of type ") + v.type_name() + " is not JSON serializable", 0);
  }
}

void append_json(const Value& v, int indent, const std::string& indent_str, bool sort_keys, std::string* out) {
  json_rec(v, indent, indent_str, sort_keys, 0, out);
}

// ---- comparison ------------------------------------------------------------------------------

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (a.as_items().size() != b.as_items().size()) return false;
      for (const auto& [k, v] : a.as_items()) {
        const Value* other = b.find(k);
        if (other == nullptr || !equals(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace: return &a.as_items() == &b.as_items();
    case Value::Kind::kCallable: return &a.as_callable() == &b.as_callable();
    default: return false;
  }
}

bool less_than(const Value& a, const Value& b, int line) {
  if (a.is_undefined() || b.is_undefined()) {
    throw TemplateError(a.is_undefined() ? a.undefined_hint() : b.undefined_hint(), line);
  }
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.as_list();
    const auto& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return less_than(x[i], y[i], line);
    }
    return x.size() < y.size();
  }
  throw TemplateError(std::string("'<' not supported between instances of '") + a.type_name() + "' and '" +
                          b.type_name() + "'",
                      line);
}

}  // namespace flashserve::jinja
