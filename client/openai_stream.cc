#include "client/openai_stream.h"

#include <nlohmann/json.hpp>

namespace flashserve::client {

namespace {

using json = nlohmann::json;

std::string clipped(std::string_view s, size_t n = 300) {
  return s.size() <= n ? std::string(s) : std::string(s.substr(0, n)) + "...";
}

// The message of an error object: OpenAI's {"error": {"message": ...}} (or a bare string), and
// the older vLLM form {"object": "error", "message": ...}. Empty when the chunk is no error.
std::string error_of(const json& j) {
  const json* e = nullptr;
  if (j.contains("error") && !j["error"].is_null()) e = &j["error"];
  else if (j.value("object", "") == "error") e = &j;
  if (e == nullptr) return {};
  if (e->is_string()) return e->get<std::string>();
  if (e->is_object() && e->contains("message") && (*e)["message"].is_string()) return (*e)["message"];
  return e->dump();
}

}  // namespace

void OpenAiStream::feed(std::string_view bytes, double t_s) {
  sse_.feed(bytes, [&](std::string_view data) { on_event(data, t_s); });
}

void OpenAiStream::on_event(std::string_view data, double t_s) {
  if (done_ || failed()) return;
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  const json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    error_ = "a stream chunk that is not a JSON object: " + clipped(data);
    return;
  }
  if (std::string e = error_of(j); !e.empty()) {
    error_ = "the server's error in the stream: " + clipped(e);
    return;
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const json& u = j["usage"];
    if (!u.contains("prompt_tokens") || !u["prompt_tokens"].is_number_integer() || !u.contains("completion_tokens") ||
        !u["completion_tokens"].is_number_integer()) {
      error_ = "a usage chunk without integer prompt_tokens and completion_tokens: " + clipped(data);
      return;
    }
    prompt_tokens_ = u["prompt_tokens"].get<int32_t>();
    completion_tokens_ = u["completion_tokens"].get<int32_t>();
    usage_ = true;
  }
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
  const json& c = j["choices"][0];
  const json* t = nullptr;
  if (chat_) {
    if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content")) t = &c["delta"]["content"];
  } else if (c.contains("text")) {
    t = &c["text"];
  }
  if (first_choice_s_ < 0) first_choice_s_ = t_s;
  if (t == nullptr || t->is_null()) return;
  if (!t->is_string()) {
    error_ = std::string("a chunk whose ") + (chat_ ? "delta.content" : "text") + " is not a string: " + clipped(data);
    return;
  }
  const std::string& s = t->get_ref<const std::string&>();
  if (s.empty()) return;
  text_ += s;
  if (chunks_with_text_++ == 0) ttft_s_ = t_s;
  else itl_s_.push_back(t_s - last_s_);
  last_s_ = t_s;
}

void OpenAiStream::finish(double t_s, RequestRecord* r) const {
  r->e2el_s = t_s;
  r->success = false;
  r->error_space = ErrorSpace::kStream;
  if (failed()) r->error = error_;
  else if (!done_) r->error = "the stream ended before data: [DONE]";
  else if (!usage_) r->error = "no usage chunk before data: [DONE] (stream_options.include_usage not honoured)";
  if (!r->error.empty()) return;
  r->success = true;
  r->error_space = ErrorSpace::kNone;
  r->prompt_len = prompt_tokens_;
  r->output_len = completion_tokens_;
  // No chunk with text (every token special, or none generated): the first chunk stands for it.
  r->ttft_s = chunks_with_text_ > 0 ? ttft_s_ : first_choice_s_ >= 0 ? first_choice_s_ : t_s;
  r->itl_s = itl_s_;
}

}  // namespace flashserve::client
