#include "server/text/added_tokens.h"

#include <memory>

#include "server/text/regex.h"
#include "server/text/utf8.h"

namespace flashserve::text {
namespace {

// The code point that ends text[0..end) (valid UTF-8, end > 0).
uint32_t code_point_before(std::string_view text, size_t end) {
  size_t b = end - 1;
  while (b > 0 && (static_cast<uint8_t>(text[b]) & 0xC0) == 0x80) --b;
  return next_code_point(text, &b);
}

// A word character as regex's \w with Unicode (letters, marks, digits, connector punctuation).
bool is_word_char(uint32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  static std::shared_ptr<const Regex> word;
  static const Status status = Regex::compile(R"(^[\p{L}\p{M}\p{Nd}\p{Pc}]$)", &word);
  if (!status.ok()) return false;
  std::string s;
  append_utf8(cp, &s);
  size_t b = 0, e = 0;
  bool found = false;
  return word->find(s, 0, &b, &e, &found).ok() && found;
}

}  // namespace

bool is_unicode_whitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

void AddedTokenMatcher::build(const std::vector<AddedToken>& tokens) {
  tokens_.clear();
  nodes_.assign(1, Node{});
  for (bool& b : first_byte_) b = false;
  for (const AddedToken& t : tokens) {
    if (t.content.empty()) continue;
    int32_t node = 0;
    for (char c : t.content) {
      const uint8_t b = static_cast<uint8_t>(c);
      int32_t child = -1;
      for (const auto& [byte, n] : nodes_[node].children) {
        if (byte == b) child = n;
      }
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_[node].children.emplace_back(b, child);
        nodes_.push_back(Node{});
      }
      node = child;
    }
    if (nodes_[node].token < 0) {  // the first of two tokens with the same text wins
      nodes_[node].token = static_cast<int32_t>(tokens_.size());
      tokens_.push_back(t);
    }
    first_byte_[static_cast<uint8_t>(t.content[0])] = true;
  }
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>* out) const {
  const size_t n = text.size();
  size_t start_offset = 0;  // end of the last segment emitted
  size_t pos = 0;
  auto push_plain = [&](size_t b, size_t e) {
    if (b < e) out->push_back({static_cast<uint32_t>(b), static_cast<uint32_t>(e), -1});
  };
  while (pos < n) {
    if (!first_byte_[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    // The longest token that starts at pos.
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t i = pos; i < n; ++i) {
      int32_t child = -1;
      for (const auto& [byte, c] : nodes_[node].children) {
        if (byte == static_cast<uint8_t>(text[i])) child = c;
      }
      if (child < 0) break;
      node = child;
      if (nodes_[node].token >= 0) {
        best = nodes_[node].token;
        best_end = i + 1;
      }
    }
    if (best < 0) {
      ++pos;
      continue;
    }
    const AddedToken& t = tokens_[best];
    size_t start = pos, stop = best_end;
    if (t.single_word) {
      const bool word_before = start > 0 && is_word_char(code_point_before(text, start));
      size_t after = stop;
      const bool word_after = stop < n && is_word_char(next_code_point(text, &after));
      if (word_before || word_after) {  // not a match; the scan resumes after it
        pos = stop;
        continue;
      }
    }
    if (t.lstrip) {
      size_t b = start;
      while (b > start_offset && is_unicode_whitespace(code_point_before(text, b))) {
        --b;
        while (b > 0 && (static_cast<uint8_t>(text[b]) & 0xC0) == 0x80) --b;
      }
      start = b;
    }
    if (t.rstrip) {
      while (stop < n) {
        size_t next = stop;
        if (!is_unicode_whitespace(next_code_point(text, &next))) break;
        stop = next;
      }
    }
    push_plain(start_offset, start);
    out->push_back({static_cast<uint32_t>(start), static_cast<uint32_t>(stop), t.id});
    start_offset = stop;
    pos = stop;
  }
  push_plain(start_offset, n);
}

}  // namespace flashserve::text
