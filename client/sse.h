// Server-sent events as the load-test client reads an OpenAI-compatible stream (the WHATWG
// event-stream rules): bytes come in reads of any size; a line ends at "\n", "\r\n" or "\r"
// (a "\r\n" split across two reads is one end); "field: value" drops one space after the
// colon; a line starting with ':' is a comment; "data" lines of one event join with "\n"; an
// empty line ends the event, and an event without data is no event. Fields other than data
// (event, id, retry) are read and ignored. "data: [DONE]" is OpenAI's end mark: an event like
// any other here, recognized by the reader of the events.
#pragma once

#include <string>
#include <string_view>

namespace flashserve::client {

class SseParser {
 public:
  // Calls on_event(std::string_view data) for each event completed by these bytes.
  template <typename OnEvent>
  void feed(std::string_view bytes, OnEvent&& on_event) {
    for (const char ch : bytes) {
      if (skip_lf_) {  // the "\n" of a "\r\n" whose "\r" ended the line
        skip_lf_ = false;
        if (ch == '\n') continue;
      }
      if (ch == '\r' || ch == '\n') {
        skip_lf_ = ch == '\r';
        end_line(on_event);
      } else {
        line_ += ch;
      }
    }
  }

  // Bytes of an unfinished line or event are held (at the end of a stream they are dropped, as
  // the rules say).
  bool pending() const { return !line_.empty() || has_data_; }

 private:
  template <typename OnEvent>
  void end_line(OnEvent& on_event) {
    if (line_.empty()) {  // the event ends
      if (has_data_) on_event(std::string_view(data_));
      data_.clear();
      has_data_ = false;
      return;
    }
    if (line_[0] != ':') {
      const size_t colon = line_.find(':');
      std::string_view field(line_), value;
      if (colon != std::string::npos) {
        field = std::string_view(line_).substr(0, colon);
        value = std::string_view(line_).substr(colon + 1);
        if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
      }
      if (field == "data") {
        if (has_data_) data_ += '\n';
        data_.append(value);
        has_data_ = true;
      }
    }
    line_.clear();
  }

  std::string line_;  // the line being read, without its end
  std::string data_;  // the event's data lines so far
  bool has_data_ = false;
  bool skip_lf_ = false;
};

}  // namespace flashserve::client
