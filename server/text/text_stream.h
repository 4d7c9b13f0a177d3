// Generated ids -> text deltas for one streaming response, with stop strings. A delta never
// ends inside a UTF-8 character (StreamingDetokenizer), never shows text that may still turn
// out to begin a stop string, and once a stop string appears the text ends right before it:
// the stop text is not returned, even when it was split across tokens. Concatenated, the
// deltas equal decode(ids) cut at the first stop string. With min_tokens, as in vLLM, only a
// stop string that completes at the min_tokens-th generated id or later counts (an earlier one
// stays in the text).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/text/detokenizer.h"
#include "server/text/tokenizer.h"

namespace flashserve::text {

// Limits on a request's stop strings (they come from clients).
inline constexpr int kMaxStopStrings = 16;
inline constexpr size_t kMaxStopStringBytes = 256;

// Stop strings a client sent: at most kMaxStopStrings, each non-empty, at most
// kMaxStopStringBytes and valid UTF-8; INVALID_ARGUMENT naming the first that is not.
Status validate_stop_strings(const std::vector<std::string>& stop);

class TextStream {
 public:
  // `tokenizer` must outlive this object; `stop` validated (validate_stop_strings); min_tokens:
  // the request's (stop strings are not looked for before that many ids).
  TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop, bool skip_special_tokens,
             int64_t min_tokens = 0);

  // Adds generated ids in order; appends the text that is now final to *delta. When a stop
  // string completes, *stopped becomes true, *used is how many of `ids` it took (the id that
  // completed it included), and later calls add nothing; else *used = ids.size().
  // OUT_OF_RANGE for an id outside the vocabulary.
  Status add(std::span<const int32_t> ids, std::string* delta, bool* stopped, size_t* used);
  // The end of the stream (no stop string): the text held back, and an incomplete character as
  // U+FFFD. Nothing after a stop.
  void finish(std::string* delta);
  bool stopped() const { return stopped_; }

 private:
  // Moves pending text that can no longer begin a stop string to *delta.
  void release(std::string* delta);

  const Tokenizer* tokenizer_;
  StreamingDetokenizer detok_;
  std::vector<std::string> stop_;
  size_t max_stop_ = 0;   // longest stop string, bytes
  std::string pending_;   // decoded, not yet returned: may begin a stop string
  bool stopped_ = false;
  int64_t min_tokens_ = 0;
  int64_t generated_ = 0;  // ids added so far
};

}  // namespace flashserve::text
