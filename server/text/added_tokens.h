// Cutting added tokens out of text before pre-tokenization, as Hugging Face's AddedVocabulary
// does: at the leftmost position where any token matches, the longest one; a single_word token
// only where no word character touches it (else that text stays plain and the scan goes on
// after it); lstrip/rstrip tokens take the whitespace beside them.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "server/text/tokenizer.h"

namespace flashserve::text {

struct Segment {
  uint32_t begin = 0, end = 0;  // byte range in the text
  int32_t id = -1;              // the added token's id, -1 for plain text
};

class AddedTokenMatcher {
 public:
  // The tokens to look for (ids and flags as given).
  void build(const std::vector<AddedToken>& tokens);
  bool empty() const { return tokens_.empty(); }
  // Appends the segments of `text` (in order, covering it; empty plain segments left out).
  void split(std::string_view text, std::vector<Segment>* out) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // byte -> node
    int32_t token = -1;                                 // index into tokens_ when a token ends here
  };
  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

// Rust's char::is_whitespace (Unicode White_Space).
bool is_unicode_whitespace(uint32_t cp);

}  // namespace flashserve::text
