#include "server/text/utf8.h"

namespace flashserve::text {
namespace {

// The length of the sequence that lead byte `b` starts, or 0 for a byte that starts none
// (a continuation byte, C0/C1, F5..FF).
inline int sequence_length(uint8_t b) {
  if (b < 0x80) return 1;
  if (b < 0xC2) return 0;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  if (b < 0xF5) return 4;
  return 0;
}

// The allowed range of the second byte after lead byte `lead` (Unicode Table 3-7).
inline bool second_byte_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

inline bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Length of the well-formed prefix of the sequence at s[0..n) that starts with a valid lead:
// returns the number of bytes that form a valid (possibly incomplete) prefix.
inline int valid_prefix(const uint8_t* s, size_t n, int len) {
  int k = 1;
  if (n < 2) return k;
  if (!second_byte_ok(s[0], s[1])) return k;
  k = 2;
  for (; k < len && static_cast<size_t>(k) < n; ++k) {
    if (!is_continuation(s[k])) return k;
  }
  return k;
}

const char kReplacement[] = "\xEF\xBF\xBD";

}  // namespace

bool utf8_is_valid(std::string_view s, size_t* error_offset) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      __builtin_memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const int len = sequence_length(p[i]);
    if (len == 0 || valid_prefix(p + i, n - i, len) != len) {
      if (error_offset) *error_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t next_code_point(std::string_view s, size_t* pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + *pos;
  const int len = sequence_length(p[0]);
  uint32_t cp;
  switch (len) {
    case 2: cp = ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu); break;
    case 3: cp = ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu); break;
    case 4:
      cp = ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
      break;
    default: cp = p[0]; break;
  }
  *pos += len > 0 ? len : 1;
  return cp;
}

void Utf8LossyDecoder::consume(std::string_view bytes, bool at_end, std::string* out) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b = p[i];
    if (b < 0x80) {
      out->push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    const int len = sequence_length(b);
    if (len == 0) {  // a byte that starts nothing: one replacement of its own
      out->append(kReplacement);
      ++i;
      continue;
    }
    const int k = valid_prefix(p + i, n - i, len);
    if (k == len) {
      out->append(bytes.data() + i, len);
      i += len;
    } else if (i + k == n && !at_end) {  // well-formed so far but cut off: wait for more
      __builtin_memcpy(held_, p + i, k);
      held_len_ = k;
      return;
    } else {  // a maximal ill-formed subpart of k bytes
      out->append(kReplacement);
      i += k;
    }
  }
}

void Utf8LossyDecoder::feed(std::string_view bytes, std::string* out) {
  if (held_len_ == 0) {
    consume(bytes, false, out);
    return;
  }
  // Complete the held tail with the first few new bytes, then go on with the rest.
  char buf[8];
  const size_t take = bytes.size() < 4 ? bytes.size() : 4;
  const size_t had = held_len_;
  __builtin_memcpy(buf, held_, had);
  __builtin_memcpy(buf + had, bytes.data(), take);
  held_len_ = 0;
  // Decode just the held sequence: its length is fixed by its lead byte.
  const auto* p = reinterpret_cast<const uint8_t*>(buf);
  const int len = sequence_length(p[0]);
  const int k = valid_prefix(p, had + take, len);
  if (k == len) {
    out->append(buf, len);
    consume(bytes.substr(len - had), false, out);
  } else if (static_cast<size_t>(k) == had + take) {  // still incomplete
    __builtin_memcpy(held_, buf, k);
    held_len_ = k;
  } else {
    out->append(kReplacement);
    consume(bytes.substr(k - had), false, out);
  }
}

void Utf8LossyDecoder::finish(std::string* out) {
  if (held_len_ != 0) out->append(kReplacement);
  held_len_ = 0;
}

}  // namespace flashserve::text
