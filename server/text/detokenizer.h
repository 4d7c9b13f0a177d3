// Streaming detokenizer: ids in one at a time, text deltas out, for streaming responses.
// A delta never ends inside a UTF-8 character: bytes of a character split across ids (an
// emoji as four byte tokens) are held until the character is complete. Bytes that cannot
// become a character turn into U+FFFD exactly where decode() puts them, so the concatenation
// of every delta and finish() equals Tokenizer::decode of all the ids.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "server/text/tokenizer.h"
#include "server/text/utf8.h"

namespace flashserve::text {

class StreamingDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
      : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

  // Adds one id; appends the text it completes to *delta (often nothing, or several
  // characters at once). OUT_OF_RANGE for an id outside the vocabulary (nothing changes).
  Status add(int32_t id, std::string* delta);
  // The end of the stream: a held incomplete character becomes U+FFFD.
  void finish(std::string* delta);
  // Ready for a new stream.
  void reset() { decoder_.reset(); }
  // Bytes held back waiting for the rest of a character (0..3).
  size_t held_bytes() const { return decoder_.held_bytes(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  Utf8LossyDecoder decoder_;
};

}  // namespace flashserve::text
