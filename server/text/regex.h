// A compiled PCRE2 pattern for the pre-tokenizers: UTF-8 with Unicode properties (UTF + UCP),
// JIT-compiled once, matched through per-thread match data (no allocation per match).
// Thread-safe: one Regex serves concurrent callers.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace flashserve::text {

class Regex {
 public:
  // Compiles `pattern` as Hugging Face tokenizers (Oniguruma) reads it: `\s` is Unicode
  // White_Space, which PCRE2's \s with UCP is not quite (see translate_onig_pattern).
  static Status compile(std::string_view pattern, std::shared_ptr<const Regex>* out);
  // A regex that matches `literal` exactly (Split's {"String": ...} patterns).
  static Status literal(std::string_view literal, std::shared_ptr<const Regex>* out);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Finds the first match in subject[start..) (subject is the whole string the pattern sees:
  // lookarounds stop at its ends): *found, and [*begin, *end) when found. An error status when
  // PCRE2 fails (match limit, JIT stack). `subject` must be valid UTF-8 (not checked again).
  Status find(std::string_view subject, size_t start, size_t* begin, size_t* end, bool* found) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

// Rewrites an Oniguruma pattern for PCRE2: \s and \S become explicit classes of Unicode
// White_Space (inside a class, \s its members). Everything else these pre-tokenizers use
// (\p{L}, \p{N}, (?i:...), lookahead, {1,3}) reads the same in both.
std::string translate_onig_pattern(std::string_view pattern);

}  // namespace flashserve::text
