// flashserve_bench's reading of an OpenAI-compatible stream: the server-sent-events parser
// (events split across reads at every byte, "\n", "\r\n" and "\r" line ends, a "\r\n" split
// between two reads, comments, multi-line data, other fields, an unfinished event) and the
// chunks' accounting (TTFT at the first chunk with text, ITL between chunks with text, counts
// from usage, [DONE], the ways a stream fails).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "client/openai_stream.h"
#include "client/sse.h"

namespace flashserve::client {
namespace {

std::vector<std::string> events_of(const std::vector<std::string>& reads) {
  SseParser p;
  std::vector<std::string> out;
  for (const auto& r : reads) p.feed(r, [&](std::string_view d) { out.emplace_back(d); });
  return out;
}

// A stream with every rule in it, and the events it holds.
const std::string kStream =
    ": a comment first\r\n"
    "data: {\"a\": 1}\r\n"
    "\r\n"
    "event: message\n"
    "id: 7\n"
    "data:no space\n"
    "data:  two spaces\n"
    "data\n"
    "retry: 10\n"
    "\n"
    ": only a comment, no event\n"
    "\n"
    "id: 8\n"
    "\n"
    "data: cr ends\r"
    "\r"
    "data: [DONE]\n"
    "\n"
    "data: unfinished";
const std::vector<std::string> kEvents = {"{\"a\": 1}", "no space\n two spaces\n", "cr ends", "[DONE]"};

TEST(SseParser, EventsOfOneRead) {
  SseParser p;
  std::vector<std::string> got;
  p.feed(kStream, [&](std::string_view d) { got.emplace_back(d); });
  EXPECT_EQ(got, kEvents);
  EXPECT_TRUE(p.pending());  // "data: unfinished" has no end: held, never an event
}

TEST(SseParser, SameEventsWhereverTheReadsSplit) {
  std::vector<std::string> bytes;
  for (char c : kStream) bytes.emplace_back(1, c);
  EXPECT_EQ(events_of(bytes), kEvents) << "one byte a read";
  for (size_t i = 0; i <= kStream.size(); ++i)
    for (size_t j = i; j <= kStream.size(); j += 7)
      ASSERT_EQ(events_of({kStream.substr(0, i), kStream.substr(i, j - i), kStream.substr(j)}), kEvents)
          << "reads split at " << i << " and " << j;
}

TEST(SseParser, CrLfSplitBetweenReadsIsOneLineEnd) {
  // Read as two line ends, the "\n" would be an empty line: the event would end after "a".
  EXPECT_EQ(events_of({"data: a\r", "\ndata: b\r", "\n\r", "\n"}), (std::vector<std::string>{"a\nb"}));
  // A "\r" alone ends a line too, and the next read's first byte is kept when it is no "\n".
  EXPECT_EQ(events_of({"data: a\r", "data: b\r", "\r"}), (std::vector<std::string>{"a\nb"}));
  EXPECT_EQ(events_of({"data: a\n\n\n\ndata: b\n\n"}), (std::vector<std::string>{"a", "b"}));
}

double kT = 0;  // unused timestamp for feeds whose timing does not matter

RequestRecord finished(const OpenAiStream& s, double t = 1.0) {
  RequestRecord r;
  s.finish(t, &r);
  return r;
}

std::string completion_chunk(const std::string& text, const char* finish = nullptr) {
  return std::string("data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"") +
         text + "\",\"logprobs\":null,\"finish_reason\":" + (finish ? std::string("\"") + finish + "\"" : "null") +
         "}],\"usage\":null}\n\n";
}
const std::string kUsage =
    "data: {\"id\":\"cmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":5,"
    "\"total_tokens\":17}}\n\n";

TEST(OpenAiStream, CompletionTimingsAndUsage) {
  OpenAiStream s(/*chat=*/false);
  s.feed(": keep-alive\n\n", 0.1);
  s.feed(completion_chunk(""), 0.2);  // no text yet (a held-back UTF-8 byte): not the first token
  s.feed(completion_chunk("Hel"), 0.5);
  s.feed(completion_chunk("lo"), 0.75);
  s.feed(completion_chunk(" w"), 0.8);
  s.feed(completion_chunk("", "length"), 0.9);  // the final chunk, no text: no ITL
  s.feed(kUsage, 0.9);
  s.feed("data: [DONE]\n\n", 0.91);
  EXPECT_TRUE(s.done());
  const RequestRecord r = finished(s, 0.95);
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.5);
  ASSERT_EQ(r.itl_s.size(), 2u);
  EXPECT_DOUBLE_EQ(r.itl_s[0], 0.25);
  EXPECT_NEAR(r.itl_s[1], 0.05, 1e-12);
  EXPECT_EQ(r.output_len, 5);   // usage, not the 3 chunks with text
  EXPECT_EQ(r.prompt_len, 12);  // usage
  EXPECT_DOUBLE_EQ(r.e2el_s, 0.95);
  EXPECT_EQ(s.text(), "Hello w");
}

TEST(OpenAiStream, ChatDeltaContent) {
  OpenAiStream s(/*chat=*/true);
  auto chunk = [](const std::string& delta) {
    return "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":" + delta +
           ",\"finish_reason\":null}]}\n\n";
  };
  s.feed(chunk(R"({"role":"assistant","content":""})"), 0.1);  // the role opens the message: no token
  s.feed(chunk(R"({"content":"Hi"})"), 0.3);
  s.feed(chunk(R"({})"), 0.35);
  s.feed(chunk(R"({"content":null})"), 0.36);
  s.feed(chunk(R"({"content":" there \"q\" \u00e9"})"), 0.4);
  s.feed(kUsage + "data: [DONE]\n\n", 0.5);
  const RequestRecord r = finished(s);
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.3);
  ASSERT_EQ(r.itl_s.size(), 1u);
  EXPECT_NEAR(r.itl_s[0], 0.1, 1e-12);
  EXPECT_EQ(s.text(), "Hi there \"q\" \xc3\xa9");
  // The same body read by the completions reader has no "text": no token timings, but the
  // counts and [DONE] still make it a success; the first chunk stands in for the TTFT.
  OpenAiStream c(/*chat=*/false);
  c.feed(chunk(R"({"content":"Hi"})") + kUsage + "data: [DONE]\n\n", 0.2);
  const RequestRecord rc = finished(c);
  EXPECT_TRUE(rc.success);
  EXPECT_DOUBLE_EQ(rc.ttft_s, 0.2);
  EXPECT_TRUE(rc.itl_s.empty());
}

TEST(OpenAiStream, ByteAtATimeGivesTheSameRecord) {
  const std::string body = completion_chunk("a") + ": c\r\n\r\n" + completion_chunk("b") + kUsage + "data: [DONE]\r\n\r\n";
  OpenAiStream whole(false), bytes(false);
  whole.feed(body, kT);
  for (char ch : body) bytes.feed(std::string_view(&ch, 1), kT);
  const RequestRecord a = finished(whole), b = finished(bytes);
  ASSERT_TRUE(a.success && b.success) << a.error << " / " << b.error;
  EXPECT_EQ(a.output_len, b.output_len);
  EXPECT_EQ(a.itl_s.size(), 1u);
  EXPECT_EQ(b.itl_s.size(), 1u);
  EXPECT_EQ(whole.text(), "ab");
  EXPECT_EQ(bytes.text(), "ab");
}

TEST(OpenAiStream, FailuresSayWhy) {
  struct Case {
    std::string body, message;
  };
  const std::vector<Case> cases = {
      {completion_chunk("a") + kUsage, "ended before data: [DONE]"},
      {completion_chunk("a") + "data: [DONE]\n\n", "no usage chunk"},
      {completion_chunk("a") + kUsage + "data: [DONE]", "ended before data: [DONE]"},  // no blank line
      {"data: {\"error\":{\"message\":\"engine failed\",\"type\":\"server_error\"}}\n\n", "engine failed"},
      {"data: {\"object\":\"error\",\"message\":\"old vLLM form\"}\n\n", "old vLLM form"},
      {"data: {not json\n\n" + kUsage + "data: [DONE]\n\n", "not a JSON object: {not json"},
      {"data: [1, 2]\n\n", "not a JSON object"},
      {"data: {\"choices\":[{\"text\":5}]}\n\n", "text is not a string"},
      {"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":\"12\",\"completion_tokens\":5}}\n\n", "integer"},
      {"", "ended before data: [DONE]"},
      {"{\"choices\":[{\"text\":\"a JSON body, not a stream\"}]}", "ended before data: [DONE]"},
  };
  for (const auto& c : cases) {
    OpenAiStream s(false);
    s.feed(c.body, kT);
    const RequestRecord r = finished(s);
    EXPECT_FALSE(r.success) << c.body;
    EXPECT_EQ(r.error_space, ErrorSpace::kStream) << c.body;
    EXPECT_NE(r.error.find(c.message), std::string::npos) << "body: " << c.body << "\nerror: " << r.error;
  }
  // Whatever comes after [DONE] or after a failure changes nothing.
  OpenAiStream s(false);
  s.feed(completion_chunk("a") + kUsage + "data: [DONE]\n\ndata: {\"error\":\"late\"}\n\n", kT);
  EXPECT_TRUE(finished(s).success);
  OpenAiStream f(false);
  f.feed("data: {\"error\":\"first\"}\n\n" + completion_chunk("a") + kUsage + "data: [DONE]\n\n", kT);
  EXPECT_TRUE(f.failed());
  EXPECT_NE(finished(f).error.find("first"), std::string::npos);
}

}  // namespace
}  // namespace flashserve::client
