// One streamed OpenAI-compatible response, read as its server-sent events come, into the load
// test's RequestRecord: TTFT at the first chunk whose text is not empty ("text" of
// /v1/completions, "delta.content" of /v1/chat/completions), an inter-token latency between each
// later chunk with text and the one before, and the token counts from the usage chunk
// (stream_options.include_usage): the server's counts, since a chunk may carry several tokens
// or, holding back part of a UTF-8 character, none. A stream is complete at "data: [DONE]" with a
// usage chunk before it; an error object, a chunk that is not JSON, or a stream that stops early
// fail the request with a message saying which.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "client/serve_stats.h"
#include "client/sse.h"

namespace flashserve::client {

class OpenAiStream {
 public:
  explicit OpenAiStream(bool chat) : chat_(chat) {}

  // Bytes of the response body as read, t_s seconds after the request was sent.
  void feed(std::string_view bytes, double t_s);
  // The body is over (t_s after the send): fills the record's success, error, ttft_s, itl_s,
  // output_len and (from usage) prompt_len. e2el_s is t_s.
  void finish(double t_s, RequestRecord* r) const;

  bool failed() const { return !error_.empty(); }  // reading can stop
  bool done() const { return done_; }              // [DONE] seen
  const std::string& text() const { return text_; }

 private:
  void on_event(std::string_view data, double t_s);

  bool chat_;
  SseParser sse_;
  std::string error_;
  std::string text_;  // every chunk's text, in order
  bool done_ = false, usage_ = false;
  int32_t prompt_tokens_ = 0, completion_tokens_ = 0;
  int chunks_with_text_ = 0;
  double ttft_s_ = 0, last_s_ = 0;
  double first_choice_s_ = -1;  // the first chunk with a choice, text or not
  std::vector<double> itl_s_;
};

}  // namespace flashserve::client
