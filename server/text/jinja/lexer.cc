#include "server/text/jinja/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "server/text/jinja/value.h"

namespace flashserve::jinja {
namespace {

// \r\n and \r become \n; one trailing newline goes (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view in) {
  std::string s;
  s.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      s.push_back('\n');
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      s.push_back(in[i]);
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_newlines(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) root_step();
    push(TokenType::kEof, src_.size());
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& message, size_t at) const {
    const auto [line, column] = line_column(at);
    throw TemplateError(message, line, false, column);
  }

  std::pair<int, int> line_column(size_t at) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at);
    const size_t line_index = static_cast<size_t>(it - line_starts_.begin()) - 1;
    return {static_cast<int>(line_index) + 1, static_cast<int>(at - line_starts_[line_index]) + 1};
  }

  Token& push(TokenType type, size_t at, std::string value = {}) {
    Token t;
    t.type = type;
    t.value = std::move(value);
    const auto [line, column] = line_column(at);
    t.line = line;
    t.column = column;
    tokens_.push_back(std::move(t));
    return tokens_.back();
  }

  // Python whitespace (Unicode) starting at `p`: its byte length, 0 when none.
  size_t space_len(size_t p) const {
    size_t q = p;
    while (q < src_.size()) {
      size_t next = q;
      const char32_t cp = next_code_point(src_, &next);
      if (!is_py_space(cp)) break;
      q = next;
    }
    return q - p;
  }

  bool starts_with(size_t p, std::string_view s) const {
    return p + s.size() <= src_.size() && std::string_view(src_).substr(p, s.size()) == s;
  }

  // The text before a tag, with the tag's whitespace control applied; emits it as data.
  void emit_text(size_t begin, size_t end, char sign, bool is_variable) {
    std::string text = src_.substr(begin, end - begin);
    if (sign == '-') {
      text = py_strip(text, "", false, true, false);
    } else if (sign != '+' && !is_variable) {  // lstrip_blocks
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size()) {
        bool all_space = true;
        for (size_t i = l_pos; i < text.size();) {
          if (!is_py_space(next_code_point(text, &i))) {
            all_space = false;
            break;
          }
        }
        if (all_space) text.resize(l_pos);
      }
    }
    if (!text.empty()) push(TokenType::kData, begin, std::move(text));
  }

  // After `%}` or `#}` (kind '%' or '#') at `p` with modifier `mod` ('+', '-' or 0): where the
  // text continues. Sets line_starting_ from the last character the end tag consumed.
  size_t after_end_tag(size_t p, char mod) {
    size_t q = p + 2;
    if (mod == '-') {
      q += space_len(q);
    } else if (mod == 0 && q < src_.size() && src_[q] == '\n') {  // trim_blocks
      ++q;
    }
    line_starting_ = q > 0 && src_[q - 1] == '\n';
    return q;
  }

  // Matches `{%[-+]?\s*raw\s*(-%}\s*|%})` at p; returns the end or 0.
  size_t match_raw_begin(size_t p, char* sign) const {
    size_t q = p + 2;
    *sign = 0;
    if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) *sign = src_[q++];
    q += space_len(q);
    if (!starts_with(q, "raw")) return 0;
    q += 3;
    q += space_len(q);
    if (starts_with(q, "-%}")) return q + 3 + space_len(q + 3);
    if (starts_with(q, "%}")) return q + 2;
    return 0;
  }

  void root_step() {
    // The earliest `{{`, `{%` or `{#`.
    size_t t = src_.find('{', pos_);
    while (t != std::string::npos &&
           (t + 1 >= src_.size() || (src_[t + 1] != '{' && src_[t + 1] != '%' && src_[t + 1] != '#'))) {
      t = src_.find('{', t + 1);
    }
    if (t == std::string::npos) {
      push(TokenType::kData, pos_, src_.substr(pos_));
      pos_ = src_.size();
      return;
    }
    const char kind = src_[t + 1];
    char sign = 0;
    if (kind == '%') {
      const size_t raw_end = match_raw_begin(t, &sign);
      if (raw_end != 0) {
        emit_text(pos_, t, sign, false);
        line_starting_ = src_[raw_end - 1] == '\n';
        raw_body(raw_end);
        return;
      }
    }
    size_t q = t + 2;
    sign = 0;
    if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
    emit_text(pos_, t, sign, kind == '{');
    line_starting_ = false;  // the match ended with the tag's opener
    if (kind == '#') {
      comment_body(q);
    } else {
      push(kind == '{' ? TokenType::kVariableBegin : TokenType::kBlockBegin, t);
      tag_body(q, kind == '{');
    }
  }

  void comment_body(size_t content) {
    size_t q = src_.find("#}", content);
    if (q == std::string::npos) fail("Missing end of comment tag", content);
    char mod = 0;
    if (q > content && (src_[q - 1] == '-' || src_[q - 1] == '+')) mod = src_[q - 1];
    pos_ = after_end_tag(q, mod);
  }

  void raw_body(size_t content) {
    // The earliest `{%[-+]?\s*endraw\s*(+%}|-%}\s*|%}\n?)`.
    for (size_t t = src_.find("{%", content); t != std::string::npos; t = src_.find("{%", t + 1)) {
      size_t q = t + 2;
      char sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      q += space_len(q);
      if (!starts_with(q, "endraw")) continue;
      q += 6;
      q += space_len(q);
      char mod = 0;
      if (starts_with(q, "+%}") || starts_with(q, "-%}")) {
        mod = src_[q];
        ++q;
      } else if (!starts_with(q, "%}")) {
        continue;
      }
      // The raw text is data (OptionalLStrip: the endraw tag's sign and lstrip_blocks apply).
      emit_text(content, t, sign, false);
      pos_ = after_end_tag(q, mod);
      return;
    }
    fail("Missing end of raw directive", content);
  }

  void tag_body(size_t p, bool is_variable) {
    std::vector<char> balance;  // expected closing brackets
    while (true) {
      if (p >= src_.size()) {
        pos_ = p;
        return;  // the parser reports the missing end
      }
      if (balance.empty()) {
        if (is_variable) {
          if (starts_with(p, "-}}")) {
            push(TokenType::kVariableEnd, p);
            p += 3;
            p += space_len(p);
            line_starting_ = src_[p - 1] == '\n';
            pos_ = p;
            return;
          }
          if (starts_with(p, "}}")) {
            push(TokenType::kVariableEnd, p);
            line_starting_ = false;
            pos_ = p + 2;
            return;
          }
        } else {
          char mod = 0;
          if (starts_with(p, "+%}") || starts_with(p, "-%}")) mod = src_[p];
          if (mod != 0 || starts_with(p, "%}")) {
            push(TokenType::kBlockEnd, p);
            pos_ = after_end_tag(mod ? p + 1 : p, mod);
            return;
          }
        }
      }
      if (const size_t ws = space_len(p); ws > 0) {
        p += ws;
        continue;
      }
      const char c = src_[p];
      if (is_digit(c)) {
        p = number(p);
        continue;
      }
      if (is_name_start(c)) {
        size_t q = p + 1;
        while (q < src_.size() && is_name_char(src_[q])) ++q;
        push(TokenType::kName, p, src_.substr(p, q - p));
        p = q;
        continue;
      }
      if (c == '\'' || c == '"') {
        const size_t end = string_end(p);
        if (end != 0) {
          push(TokenType::kString, p, decode_string(p + 1, end - 1));
          p = end;
          continue;
        }
      }
      p = operator_token(p, &balance);
    }
  }

  // A string literal at p: the index past its closing quote, or 0 when unterminated.
  size_t string_end(size_t p) const {
    const char quote = src_[p];
    for (size_t q = p + 1; q < src_.size(); ++q) {
      if (src_[q] == '\\') {
        ++q;
      } else if (src_[q] == quote) {
        return q + 1;
      }
    }
    return 0;
  }

  // Python's unicode-escape decoding of a literal's body.
  std::string decode_string(size_t b, size_t e) const {
    std::string out;
    for (size_t i = b; i < e; ++i) {
      const char c = src_[i];
      if (c != '\\' || i + 1 >= e) {
        out.push_back(c);
        continue;
      }
      const char n = src_[++i];
      auto hex = [&](int digits) {
        uint32_t v = 0;
        for (int k = 1; k <= digits; ++k) {
          const int h = (i + k < e) ? hex_value(src_[i + k]) : -1;
          if (h < 0) fail("truncated escape in a string literal", i);
          v = v * 16 + static_cast<uint32_t>(h);
        }
        i += digits;
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) v = 0xFFFD;
        append_utf8(v, &out);
      };
      switch (n) {
        case '\n': break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x': hex(2); break;
        case 'u': hex(4); break;
        case 'U': hex(8); break;
        case 'N': fail("\\N{...} escapes are not supported", i); break;
        default:
          if (n >= '0' && n <= '7') {
            uint32_t v = static_cast<uint32_t>(n - '0');
            for (int k = 0; k < 2 && i + 1 < e && src_[i + 1] >= '0' && src_[i + 1] <= '7'; ++k) {
              v = v * 8 + static_cast<uint32_t>(src_[++i] - '0');
            }
            append_utf8(v, &out);
          } else {
            out.push_back('\\');
            out.push_back(n);
          }
      }
    }
    return out;
  }

  // Digits with single underscores between them, from p: the end (p when none).
  size_t digits(size_t p, bool (*ok)(char)) const {
    size_t q = p;
    if (q >= src_.size() || !ok(src_[q])) return p;
    ++q;
    while (q < src_.size()) {
      if (ok(src_[q])) {
        ++q;
      } else if (src_[q] == '_' && q + 1 < src_.size() && ok(src_[q + 1])) {
        q += 2;
      } else {
        break;
      }
    }
    return q;
  }

  size_t number(size_t p) {
    // float: digits ((. digits)? e[+-]? digits | . digits), not right after a '.'
    if (p == 0 || src_[p - 1] != '.') {
      const size_t int_end = digits(p, is_digit);
      size_t q = int_end;
      bool is_float = false;
      if (q < src_.size() && src_[q] == '.') {
        const size_t frac = digits(q + 1, is_digit);
        if (frac > q + 1) {
          q = frac;
          is_float = true;
        }
      }
      if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
        size_t r = q + 1;
        if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) ++r;
        const size_t ex = digits(r, is_digit);
        if (ex > r) {
          q = ex;
          is_float = true;
        }
      }
      if (is_float) {
        std::string text;
        for (size_t i = p; i < q; ++i) {
          if (src_[i] != '_') text.push_back(src_[i]);
        }
        push(TokenType::kFloat, p).float_value = std::strtod(text.c_str(), nullptr);
        return q;
      }
    }
    // integer: 0b / 0o / 0x, [1-9] digits, or zeros
    int base = 10;
    size_t q = p;
    if (src_[p] == '0' && p + 1 < src_.size()) {
      const char x = static_cast<char>(src_[p + 1] | 0x20);
      auto prefixed = [&](int b, bool (*ok)(char)) {
        size_t r = p + 2;
        if (r < src_.size() && src_[r] == '_') ++r;
        const size_t end = digits(r, ok);
        if (end > r) {
          base = b;
          q = end;
        }
      };
      if (x == 'b') prefixed(2, [](char c) { return c == '0' || c == '1'; });
      if (x == 'o') prefixed(8, [](char c) { return c >= '0' && c <= '7'; });
      if (x == 'x') prefixed(16, [](char c) { return hex_value(c) >= 0; });
    }
    if (q == p) {
      if (src_[p] == '0') {
        q = digits(p, [](char c) { return c == '0'; });
      } else {
        q = digits(p, is_digit);
      }
    }
    std::string text;
    for (size_t i = (base == 10 ? p : p + 2); i < q; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text.c_str(), &end, base);
    if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) {
      fail("integer literal too large", p);
    }
    push(TokenType::kInteger, p).int_value = static_cast<int64_t>(v);
    return q;
  }

  size_t operator_token(size_t p, std::vector<char>* balance) {
    static constexpr const char* kTwo[] = {"**", "//", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (starts_with(p, op)) {
        push(TokenType::kOperator, p, op);
        return p + 2;
      }
    }
    const char c = src_[p];
    if (std::strchr("+-/*%~[](){}><=.:|,;", c) == nullptr || c == 0) {
      size_t next = p;
      std::string shown;
      append_utf8(next_code_point(src_, &next), &shown);
      fail("unexpected char '" + shown + "'", p);
    }
    if (c == '(') balance->push_back(')');
    if (c == '[') balance->push_back(']');
    if (c == '{') balance->push_back('}');
    if (c == ')' || c == ']' || c == '}') {
      if (balance->empty()) fail(std::string("unexpected '") + c + "'", p);
      if (balance->back() != c) fail(std::string("unexpected '") + c + "', expected '" + balance->back() + "'", p);
      balance->pop_back();
    }
    push(TokenType::kOperator, p, std::string(1, c));
    return p + 1;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace flashserve::jinja
