#include "server/text/jinja/py_str.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "server/text/jinja/value.h"

namespace flashserve::jinja {

std::vector<std::string> py_split(const std::string& s, const std::string* sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep == nullptr) {
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
    for (const auto& [b, e] : words) parts.push_back(encode_utf8(cps, b, e));
    return parts;
  }
  const std::string& sp = *sep;
  if (sp.empty()) return {s};  // the caller rejects an empty separator
  std::vector<std::string>& pieces = parts;
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
  return parts;
}

// Python's str.splitlines() line boundaries.
static bool is_line_break(char32_t c) {
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

}  // namespace flashserve::jinja
