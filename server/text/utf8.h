// UTF-8 helpers for the tokenizer: validation, code point encoding, and the lossy decoder that
// both decode() and the streaming detokenizer use, so that the two agree byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace flashserve::text {

// True when `s` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
// On false, *error_offset (when given) is the offset of the first ill-formed byte.
bool utf8_is_valid(std::string_view s, size_t* error_offset = nullptr);

// Appends the UTF-8 encoding of code point `cp` (must be a scalar value) to *out.
void append_utf8(uint32_t cp, std::string* out);

// Decodes the code point at s[*pos] of valid UTF-8 and advances *pos past it.
uint32_t next_code_point(std::string_view s, size_t* pos);

// Turns bytes into valid UTF-8 the way Rust's String::from_utf8_lossy does (and so Hugging
// Face tokenizers' ByteLevel decoder): every maximal ill-formed subpart becomes one U+FFFD
// (Unicode's "substitution of maximal subparts"). Incremental: feed() emits everything that
// later bytes cannot change and holds back a well-formed but incomplete tail (at most 3 bytes);
// finish() turns a held tail into one U+FFFD. feed(a); feed(b); finish() gives exactly what
// feed(a + b); finish() gives.
class Utf8LossyDecoder {
 public:
  void feed(std::string_view bytes, std::string* out);
  void finish(std::string* out);
  void reset() { held_len_ = 0; }
  size_t held_bytes() const { return held_len_; }

 private:
  void consume(std::string_view bytes, bool at_end, std::string* out);
  char held_[4] = {};
  size_t held_len_ = 0;
};

}  // namespace flashserve::text
