#include "server/http/openai.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <ctime>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>
#include <vector>

#include "server/generation.h"
#include "server/grpc/metrics.h"
#include "server/text/utf8.h"

namespace flashserve::server {

using json = nlohmann::json;

namespace {

constexpr int kMaxN = 16;          // choices a prompt
constexpr int kMaxChoices = 64;    // prompts x n a request
constexpr int kMaxPrompts = 64;    // prompts in one completions request
constexpr double kPollS = 0.05;    // how often a waiting handler checks that its client is there
constexpr float kLogprobFloor = -9999.f;  // -inf as a number JSON can hold (vLLM's choice)

// A field a request got wrong: 400 naming it (its "param").
struct BadField : std::runtime_error {
  BadField(std::string p, const std::string& m) : std::runtime_error(m), param(std::move(p)) {}
  std::string param;
};
// Any other answer than 200 a handler decides on while it reads or starts a request.
struct Refusal : std::runtime_error {
  Refusal(int s, const std::string& m, std::string c = {}) : std::runtime_error(m), status(s), code(std::move(c)) {}
  int status;
  std::string code;
};

int http_status_of(const Status& st) {
  switch (st.code()) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnsupported: return 400;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kInternal: return 500;
  }
  return 500;
}

const char* error_type_of(int status) {
  switch (status) {
    case 400:
    case 405:
    case 413: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable_error";
    default: return "server_error";
  }
}

std::string dumped(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json error_json(int status, const std::string& message, const std::string& param, const std::string& code) {
  return {{"error",
           {{"message", message},
            {"type", error_type_of(status)},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

void write_error(httplib::Response& res, int status, const std::string& message, const std::string& param = {},
                 const std::string& code = {}) {
  res.status = status;
  res.set_content(dumped(error_json(status, message, param, code)), "application/json");
}

// Reads a request body's fields: absent or null leaves the default; a wrong type or value is a
// BadField naming the field.
class Fields {
 public:
  explicit Fields(const json& body) : b_(body) {}

  const json* find(const char* k) const {
    const auto it = b_.find(k);
    return it == b_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const char* k) const { return find(k) != nullptr; }

  template <typename T>
  void integer(const char* k, int64_t lo, int64_t hi, T* v) const {
    if (const json* j = find(k)) *v = static_cast<T>(as_integer(*j, k, lo, hi));
  }
  void number(const char* k, double lo, double hi, float* v) const {
    if (const json* j = find(k)) {
      if (!j->is_number()) throw BadField(k, std::string(k) + " must be a number");
      const double d = j->get<double>();
      if (!(d >= lo && d <= hi))
        throw BadField(k, std::string(k) + " must be in [" + fmt_num(lo) + ", " + fmt_num(hi) + "], not " + j->dump());
      *v = static_cast<float>(d);
    }
  }
  void boolean(const char* k, bool* v) const {
    if (const json* j = find(k)) {
      if (!j->is_boolean()) throw BadField(k, std::string(k) + " must be true or false");
      *v = j->get<bool>();
    }
  }
  void string(const char* k, std::string* v) const {
    if (const json* j = find(k)) {
      if (!j->is_string()) throw BadField(k, std::string(k) + " must be a string");
      *v = j->get<std::string>();
    }
  }

  static int64_t as_integer(const json& j, const std::string& name, int64_t lo, int64_t hi) {
    const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    if (!j.is_number_integer()) throw BadField(name, name + " must be an integer in " + range);
    // Unsigned past INT64_MAX, or out of range either way.
    if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(hi))
      throw BadField(name, name + " must be an integer in " + range + ", not " + j.dump());
    const int64_t v = j.get<int64_t>();
    if (v < lo || v > hi) throw BadField(name, name + " must be an integer in " + range + ", not " + j.dump());
    return v;
  }

 private:
  static std::string fmt_num(double d) {
    std::string s = std::to_string(d);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  const json& b_;
};

// Known OpenAI/vLLM fields this server cannot honour: refused by name rather than ignored.
void refuse_unsupported(const Fields& f, bool chat) {
  auto nonzero = [&](const char* k, double neutral) {
    const json* j = f.find(k);
    if (j != nullptr && !(j->is_number() && j->get<double>() == neutral))
      throw BadField(k, std::string(k) + " is not supported by this server (only " + std::to_string(neutral).substr(0, 3) +
                            ")");
  };
  nonzero("presence_penalty", 0);
  nonzero("frequency_penalty", 0);
  nonzero("repetition_penalty", 1);
  if (const json* j = f.find("logit_bias"); j != nullptr && !(j->is_object() && j->empty()))
    throw BadField("logit_bias", "logit_bias is not supported by this server");
  if (const json* j = f.find("use_beam_search"); j != nullptr && !(j->is_boolean() && !j->get<bool>()))
    throw BadField("use_beam_search", "beam search is not supported by this server");
  if (const json* j = f.find("include_stop_str_in_output"); j != nullptr && !(j->is_boolean() && !j->get<bool>()))
    throw BadField("include_stop_str_in_output", "include_stop_str_in_output is not supported by this server");
  if (f.has("prompt_logprobs")) throw BadField("prompt_logprobs", "prompt_logprobs is not supported by this server");
  if (chat) {
    if (const json* j = f.find("tools"); j != nullptr && !(j->is_array() && j->empty()))
      throw BadField("tools", "tools are not supported by this server");
    if (const json* j = f.find("response_format")) {
      const bool text = j->is_object() && j->value("type", std::string()) == "text";
      if (!text) throw BadField("response_format", "only response_format {\"type\": \"text\"} is supported");
    }
  } else {
    if (const json* j = f.find("suffix"); j != nullptr && !(j->is_string() && j->get<std::string>().empty()))
      throw BadField("suffix", "suffix is not supported by this server");
  }
}

// The fields both endpoints share.
struct Sampling {
  engine::SamplingParams params;
  std::vector<std::string> stop;
  bool skip_special_tokens = true;
  int n = 1;
  bool stream = false, include_usage = false;
  bool max_tokens_given = false;
};

Sampling read_sampling(const Fields& f, bool chat, int32_t vocab) {
  Sampling s;
  auto& p = s.params;
  f.number("temperature", 0, 100, &p.temperature);
  f.number("top_p", 0, 1, &p.top_p);
  if (f.has("top_p") && p.top_p == 0.f) throw BadField("top_p", "top_p must be in (0, 1]");
  f.integer("top_k", -1, vocab, &p.top_k);
  if (p.top_k < 0) p.top_k = 0;  // vLLM's -1: off
  f.number("min_p", 0, 1, &p.min_p);
  if (const json* j = f.find("seed"))
    p.seed = static_cast<uint64_t>(Fields::as_integer(*j, "seed", std::numeric_limits<int64_t>::min(),
                                                      std::numeric_limits<int64_t>::max()));
  const char* max_name = chat && f.has("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  s.max_tokens_given = f.has(max_name);
  p.max_tokens = 16;  // the completions default; chat's is the room left (below)
  f.integer(max_name, 1, INT32_MAX, &p.max_tokens);
  f.integer("min_tokens", 0, INT32_MAX, &p.min_tokens);
  f.boolean("ignore_eos", &p.ignore_eos);
  f.boolean("skip_special_tokens", &s.skip_special_tokens);
  if (const json* j = f.find("stop_token_ids")) {
    if (!j->is_array()) throw BadField("stop_token_ids", "stop_token_ids must be a list of token ids");
    if (j->size() > engine::kMaxStopTokenIds)
      throw BadField("stop_token_ids", "at most " + std::to_string(engine::kMaxStopTokenIds) + " stop_token_ids");
    for (const auto& id : *j)
      p.stop_token_ids.push_back(static_cast<int32_t>(Fields::as_integer(id, "stop_token_ids", 0, vocab - 1)));
  }
  if (const json* j = f.find("stop")) {
    if (j->is_string()) {
      s.stop.push_back(j->get<std::string>());
    } else if (j->is_array()) {
      if (j->size() > static_cast<size_t>(text::kMaxStopStrings))
        throw BadField("stop", "at most " + std::to_string(text::kMaxStopStrings) + " stop strings");
      for (const auto& e : *j) {
        if (!e.is_string()) throw BadField("stop", "stop must be a string or a list of strings");
        s.stop.push_back(e.get<std::string>());
      }
    } else {
      throw BadField("stop", "stop must be a string or a list of strings");
    }
    if (const Status st = text::validate_stop_strings(s.stop); !st.ok()) throw BadField("stop", st.message());
  }
  f.integer("n", 1, kMaxN, &s.n);
  if (const json* j = f.find("best_of"); j != nullptr && !(j->is_number_integer() && j->get<int64_t>() == s.n))
    throw BadField("best_of", "best_of other than n is not supported by this server");
  f.boolean("stream", &s.stream);
  if (const json* j = f.find("stream_options")) {
    if (!s.stream) throw BadField("stream_options", "stream_options is only allowed when stream is true");
    if (!j->is_object()) throw BadField("stream_options", "stream_options must be an object");
    Fields(*j).boolean("include_usage", &s.include_usage);
  }
  if (chat) {
    bool logprobs = false;
    f.boolean("logprobs", &logprobs);
    int32_t top = 0;
    f.integer("top_logprobs", 0, engine::kMaxLogprobs, &top);
    if (f.has("top_logprobs") && !logprobs) throw BadField("top_logprobs", "top_logprobs needs logprobs: true");
    p.logprobs = logprobs ? top : -1;
  } else {
    f.integer("logprobs", 0, engine::kMaxLogprobs, &p.logprobs);
  }
  return s;
}

// The text a token stands for, as valid UTF-8 (a piece of a character is U+FFFD).
std::string token_text(const text::Tokenizer& tok, int32_t id) {
  std::string s;
  const int32_t one[1] = {id};
  if (!tok.decode(one, false, &s).ok()) return {};
  return s;
}

float finite_logprob(float v) { return std::isfinite(v) ? v : kLogprobFloor; }

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

const char* finish_reason_of(const GenerationChunk& c) {
  switch (c.reason) {
    case engine::FinishReason::kEos:
    case engine::FinishReason::kStop: return "stop";
    case engine::FinishReason::kLength: return "length";
    case engine::FinishReason::kAborted: return "abort";
    default: return "error";
  }
}

// One choice of a response: its engine request and what has been sent of it.
struct Choice {
  int index = 0;
  std::unique_ptr<Generation> gen;
  std::string prefix;  // echo: the prompt's text, before the first delta
  bool started = false, finished = false;
  bool role_sent = false;  // chat: the first chunk opens the assistant's message
  size_t text_offset = 0;  // code points sent (completions logprobs' text_offset)
  std::string text;        // everything (non-streamed responses)
  json logprobs;           // collected (non-streamed responses)
  GenerationChunk last;    // the final chunk
};

// One request's choices, read as their engine events come: every choice's chunks in order.
class Response {
 public:
  Response(bool chat, std::string id, std::string model, const text::TextModel* tm)
      : chat_(chat), id_(std::move(id)), model_(std::move(model)), tm_(tm), created_(std::time(nullptr)) {}

  std::vector<Choice> choices;
  int32_t prompt_tokens = 0;
  bool include_usage = false;

  bool all_finished() const {
    return std::all_of(choices.begin(), choices.end(), [](const Choice& c) { return c.finished; });
  }

  // Waits up to kPollS for events; calls on_chunk(choice, chunk) for each. False when nothing came.
  template <typename F>
  bool poll(F&& on_chunk) {
    bool any = false;
    int open = 0;
    for (auto& c : choices) open += !c.finished;
    for (auto& c : choices) {
      if (c.finished) continue;
      GenerationChunk chunk;
      // One open choice waits; with several each is looked at briefly in turn.
      // One open choice waits for its first event, then takes only what is queued: poll returns
      // every chunk as it comes (TTFT, ITL), and the caller checks the client in between.
      while (!c.finished && c.gen->next(&chunk, any ? 0 : (open == 1 ? kPollS : 0.002))) {
        any = true;
        if (chunk.finished) c.finished = true;
        on_chunk(c, chunk);
        if (chunk.finished) c.last = chunk;
        if (open > 1) break;  // the others' turn
      }
    }
    return any;
  }

  void cancel_all() {
    for (auto& c : choices) c.gen->cancel();
  }

  // The logprobs of a chunk's tokens in the endpoint's shape, appended to *into (created as
  // needed); null when the request did not ask.
  void add_logprobs(Choice& c, const GenerationChunk& chunk, json* into) {
    if (chunk.logprobs.empty() || tm_ == nullptr || !tm_->has_tokenizer()) return;
    const auto& tok = tm_->tokenizer();
    if (chat_) {
      if (into->is_null()) *into = {{"content", json::array()}};
      for (const auto& lp : chunk.logprobs) {
        json top = json::array();
        for (const auto& [id, v] : lp.top) top.push_back(chat_entry(tok, id, v));
        json e = chat_entry(tok, lp.token, lp.logprob);
        e["top_logprobs"] = std::move(top);
        (*into)["content"].push_back(std::move(e));
      }
      return;
    }
    if (into->is_null())
      *into = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
               {"text_offset", json::array()}};
    for (const auto& lp : chunk.logprobs) {
      const std::string t = token_text(tok, lp.token);
      (*into)["tokens"].push_back(t);
      (*into)["token_logprobs"].push_back(finite_logprob(lp.logprob));
      json top = json::object();
      for (const auto& [id, v] : lp.top) top[token_text(tok, id)] = finite_logprob(v);
      (*into)["top_logprobs"].push_back(std::move(top));
      (*into)["text_offset"].push_back(c.text_offset);
      c.text_offset += code_points(t);
    }
  }

  // A streamed chunk of one choice ("" when it carries nothing).
  std::string event(Choice& c, const GenerationChunk& chunk) {
    json choice = {{"index", c.index}};
    json lp;
    std::string delta = chunk.text;
    if (!c.started) {
      c.started = true;
      if (!chat_) c.text_offset = code_points(c.prefix);
      delta = c.prefix + delta;
    } else if (!chat_ && delta.empty() && chunk.logprobs.empty() && !chunk.finished) {
      return {};
    }
    add_logprobs(c, chunk, &lp);
    if (chat_) {
      json d = json::object();
      if (!c.role_sent) {
        d["role"] = "assistant";
        c.role_sent = true;
      }
      if (!delta.empty() || d.contains("role")) d["content"] = delta;
      if (d.empty() && lp.is_null() && !chunk.finished) return {};
      choice["delta"] = std::move(d);
    } else {
      choice["text"] = delta;
    }
    choice["logprobs"] = lp;
    choice["finish_reason"] = chunk.finished ? json(finish_reason_of(chunk)) : json(nullptr);
    json out = envelope(chat_ ? "chat.completion.chunk" : "text_completion");
    out["choices"] = json::array({std::move(choice)});
    if (include_usage) out["usage"] = nullptr;
    return "data: " + dumped(out) + "\n\n";
  }

  std::string usage_event() const {
    json out = envelope(chat_ ? "chat.completion.chunk" : "text_completion");
    out["choices"] = json::array();
    out["usage"] = usage();
    return "data: " + dumped(out) + "\n\n";
  }

  json usage() const {
    int32_t completion = 0;
    for (const auto& c : choices) completion += c.last.completion_tokens;
    return {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion},
            {"total_tokens", prompt_tokens + completion}};
  }

  json whole() const {
    json out = envelope(chat_ ? "chat.completion" : "text_completion");
    json list = json::array();
    for (const auto& c : choices) {
      json choice = {{"index", c.index}, {"logprobs", c.logprobs}, {"finish_reason", finish_reason_of(c.last)}};
      if (chat_)
        choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      else
        choice["text"] = c.prefix + c.text;
      list.push_back(std::move(choice));
    }
    out["choices"] = std::move(list);
    out["usage"] = usage();
    return out;
  }

 private:
  static json chat_entry(const text::Tokenizer& tok, int32_t id, float v) {
    std::string piece;
    tok.token_to_piece(id, &piece).ok();
    json bytes = json::array();
    for (unsigned char b : piece) bytes.push_back(b);
    return {{"token", token_text(tok, id)}, {"logprob", finite_logprob(v)}, {"bytes", std::move(bytes)}};
  }
  json envelope(const char* object) const {
    return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
  }

  bool chat_;
  std::string id_, model_;
  const text::TextModel* tm_;
  int64_t created_;
};

// "cmpl-" / "chatcmpl-" + the random part of a request id.
std::string response_id(const char* prefix) { return prefix + random_request_id().substr(4); }

}  // namespace

class OpenAiFront::Routes {
 public:
  Routes(const OpenAiOptions& o, const Credentials& credentials, const CacheSalter* salter, Metrics* metrics,
         const std::atomic<bool>* draining)
      : opt_(o), credentials_(credentials), salter_(salter), metrics_(metrics), draining_(draining),
        created_(std::time(nullptr)) {}

  std::atomic<engine::Engine*> engine{nullptr};
  std::atomic<const text::TextModel*> text{nullptr};

  void add_to(http::HttpServer& s) {
    s.post("/v1/completions", http::Access::kOpen, guarded([this](auto& q, auto& r) { generate(q, r, false); }));
    s.post("/v1/chat/completions", http::Access::kOpen, guarded([this](auto& q, auto& r) { generate(q, r, true); }));
    s.get("/v1/models", http::Access::kOpen, guarded([this](auto& q, auto& r) { models(q, r); }));
    s.post("/tokenize", http::Access::kOpen, guarded([this](auto& q, auto& r) { tokenize(q, r); }));
    s.post("/detokenize", http::Access::kOpen, guarded([this](auto& q, auto& r) { detokenize(q, r); }));
    s.get("/health", http::Access::kOpen, [this](const httplib::Request&, httplib::Response& res) {
      const bool serving = engine.load() != nullptr && !draining_->load();
      res.status = serving ? 200 : 503;
      res.set_content(serving ? "ok\n" : (engine.load() == nullptr ? "loading\n" : "draining\n"), "text/plain");
    });
    s.get("/metrics", opt_.metrics_require_token ? http::Access::kToken : http::Access::kOpen,
          [this](const httplib::Request&, httplib::Response& res) {
            res.set_content(metrics_->render(), "text/plain; version=0.0.4; charset=utf-8");
          });
    // The listener's own errors (404 route, 413 body, 405) in OpenAI's shape.
    s.set_error_body([](const httplib::Request& req, httplib::Response& res) {
      const std::string m = res.status == 404   ? "no route " + req.method + " " + req.path
                            : res.status == 413 ? "the request body is over the server's limit"
                                                : "request failed";
      res.set_content(dumped(error_json(res.status, m, {}, {})), "application/json");
    });
  }

 private:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  // Authorization, and every refusal as OpenAI's error JSON.
  template <typename F>
  Handler guarded(F f) {
    return [this, f](const httplib::Request& req, httplib::Response& res) {
      try {
        f(req, res);
      } catch (const BadField& e) {
        write_error(res, 400, e.what(), e.param);
      } catch (const Refusal& e) {
        write_error(res, e.status, e.what(), {}, e.code);
      } catch (const json::exception& e) {
        write_error(res, 400, std::string("the request body: ") + e.what());
      } catch (const std::exception& e) {
        spdlog::error("http {} {}: {}", req.method, req.path, e.what());
        write_error(res, 500, "internal error");
      }
    };
  }

  Caller authorize(const httplib::Request& req) const {
    const bool sent = req.has_header("Authorization");
    const std::string header = sent ? req.get_header_value("Authorization") : std::string();
    const std::string_view view(header);
    Caller caller;
    const std::string peer = "http:" + req.remote_addr + ":" + std::to_string(req.remote_port);
    if (!credentials_.identify(sent ? &view : nullptr, peer, &caller))
      throw Refusal(401, "a valid bearer token is required", "invalid_api_key");
    return caller;
  }

  engine::Engine* serving_engine() const {
    engine::Engine* e = engine.load();
    if (e == nullptr) throw Refusal(503, "the model is loading");
    if (draining_->load()) throw Refusal(503, "the server is draining");
    return e;
  }

  const text::TextModel& text_model(const char* what) const {
    const text::TextModel* tm = text.load();
    if (tm == nullptr || !tm->has_tokenizer())
      throw Refusal(400, std::string(what) + " need a tokenizer, and this model has none: send token ids");
    return *tm;
  }

  json body_of(const httplib::Request& req) const {
    json b = json::parse(req.body);  // json::parse_error: 400 with its place
    if (!b.is_object()) throw BadField("", "the request body must be a JSON object");
    if (const json* m = Fields(b).find("model")) {
      if (!m->is_string()) throw BadField("model", "model must be a string");
      if (m->get<std::string>() != opt_.model_name)
        throw Refusal(404, "the model '" + m->get<std::string>() + "' does not exist; this server serves '" +
                               opt_.model_name + "'",
                      "model_not_found");
    }
    return b;
  }

  int64_t context_room(const engine::Engine& e) const {
    const auto& c = e.config();
    return std::min<int64_t>(c.max_model_len, int64_t{c.num_blocks - 1} * c.block_size);
  }

  static std::vector<ChatMessage> messages_of(const json& m) {
    if (!m.is_array() || m.empty()) throw BadField("messages", "messages must be a non-empty list");
    std::vector<ChatMessage> out;
    for (const auto& e : m) {
      if (!e.is_object()) throw BadField("messages", "each message must be an object with role and content");
      const auto role = e.find("role");
      if (role == e.end() || !role->is_string()) throw BadField("messages", "each message needs a string role");
      ChatMessage msg{role->get<std::string>(), {}};
      const auto content = e.find("content");
      if (content != e.end() && content->is_string()) {
        msg.content = content->get<std::string>();
      } else if (content != e.end() && content->is_array()) {  // [{"type": "text", "text": ...}]
        for (const auto& part : *content) {
          if (!part.is_object() || part.value("type", std::string()) != "text" || !part.contains("text") ||
              !part["text"].is_string())
            throw BadField("messages", "only text content parts are supported");
          msg.content += part["text"].get<std::string>();
        }
      } else if (content != e.end() && !content->is_null()) {
        throw BadField("messages", "content must be a string or a list of text parts");
      }
      out.push_back(std::move(msg));
    }
    return out;
  }

  // The prompts of a completions request as ids: a string, strings, ids, or lists of ids.
  std::vector<std::vector<int32_t>> prompts_of(const json& p, int32_t vocab) const {
    std::vector<std::vector<int32_t>> out;
    auto ids_of = [&](const json& a) {
      std::vector<int32_t> ids;
      for (const auto& id : a) ids.push_back(static_cast<int32_t>(Fields::as_integer(id, "prompt", 0, vocab - 1)));
      if (ids.empty()) throw BadField("prompt", "a prompt of token ids must not be empty");
      return ids;
    };
    auto encode = [&](const json& s) {
      std::vector<int32_t> ids;
      if (const Status st = text_model("text prompts").encode_text(s.get<std::string>(), true, &ids); !st.ok())
        throw BadField("prompt", st.message());
      return ids;
    };
    if (p.is_string()) {
      out.push_back(encode(p));
    } else if (p.is_array() && !p.empty()) {
      if (p[0].is_number()) {
        out.push_back(ids_of(p));  // one prompt of ids: its length is the context's business
      } else {
        if (p.size() > kMaxPrompts) throw BadField("prompt", "at most " + std::to_string(kMaxPrompts) + " prompts a request");
        for (const auto& e : p) {
          if (e.is_string())
            out.push_back(encode(e));
          else if (e.is_array())
            out.push_back(ids_of(e));
          else
            throw BadField("prompt", "prompt must be a string, a list of strings, token ids or lists of token ids");
        }
      }
    } else {
      throw BadField("prompt", "prompt must be a non-empty string, list of strings, token ids or lists of token ids");
    }
    return out;
  }

  void generate(const httplib::Request& req, httplib::Response& res, bool chat) {
    const Caller caller = authorize(req);
    engine::Engine* e = serving_engine();
    const json body = body_of(req);
    const Fields f(body);
    refuse_unsupported(f, chat);
    const int32_t vocab = e->model_config().vocab_size;
    Sampling s = read_sampling(f, chat, vocab);
    const text::TextModel* tm = text.load();
    std::vector<std::vector<int32_t>> prompts;
    bool echo = false;
    if (chat) {
      const auto messages = messages_of(body.contains("messages") ? body["messages"] : json());
      const text::TextModel& t = text_model("chat messages");
      if (!t.has_chat_template())
        throw Refusal(400, "chat messages need a chat template, and this model has none: use /v1/completions");
      bool add_generation_prompt = true;
      f.boolean("add_generation_prompt", &add_generation_prompt);
      std::string rendered;
      std::vector<int32_t> ids;
      if (const Status st = t.encode_chat(messages, add_generation_prompt, &rendered, &ids); !st.ok())
        throw BadField("messages", st.message());
      prompts.push_back(std::move(ids));
    } else {
      if (!body.contains("prompt")) throw BadField("prompt", "prompt is required");
      prompts = prompts_of(body["prompt"], vocab);
      f.boolean("echo", &echo);
      if (echo && s.params.logprobs >= 0)
        throw BadField("echo", "echo with logprobs (the prompt's logprobs) is not supported by this server");
    }
    if (static_cast<int64_t>(prompts.size()) * s.n > kMaxChoices)
      throw BadField("n", "prompts x n is at most " + std::to_string(kMaxChoices));
    if ((!s.stop.empty() || s.params.logprobs >= 0) && (tm == nullptr || !tm->has_tokenizer()))
      throw Refusal(400, "stop strings and logprobs need a tokenizer, and this model has none");

    Response out(chat, response_id(chat ? "chatcmpl-" : "cmpl-"), opt_.model_name, tm);
    out.include_usage = s.include_usage;
    const std::string base = out_id_base();
    for (const auto& prompt : prompts) {
      out.prompt_tokens += static_cast<int32_t>(prompt.size());
      std::string prefix;
      if (echo && tm != nullptr && tm->has_tokenizer()) tm->tokenizer().decode(prompt, s.skip_special_tokens, &prefix).ok();
      for (int j = 0; j < s.n; ++j) {
        GenerationRequest g;
        g.request.request_id = base + "-" + std::to_string(out.choices.size());
        g.request.owner = caller.owner;
        g.request.prompt = prompt;
        g.request.sampling = s.params;
        if (chat && !s.max_tokens_given)  // chat's default: the room the context leaves
          g.request.sampling.max_tokens =
              static_cast<int32_t>(std::max<int64_t>(1, context_room(*e) - static_cast<int64_t>(prompt.size())));
        if (s.params.seed) g.request.sampling.seed = *s.params.seed + static_cast<uint64_t>(j);  // n distinct draws
        g.request.cache_salt = salter_->salt(caller.owner, 0);
        g.stop = s.stop;
        g.skip_special_tokens = s.skip_special_tokens;
        Choice c;
        c.index = static_cast<int>(out.choices.size());
        c.prefix = prefix;
        if (const Status st = Generation::start(e, tm, metrics_, std::move(g), &c.gen); !st.ok())
          throw Refusal(http_status_of(st), st.message(), http_status_of(st) == 429 ? "queue_full" : "");
        out.choices.push_back(std::move(c));
      }
    }
    if (s.stream) {
      stream(res, std::make_shared<Response>(std::move(out)));
    } else {
      whole(res, out);
    }
  }

  // Non-streamed: every choice to its end, the client checked every kPollS.
  static void whole(httplib::Response& res, Response& out) {
    Status failed;
    while (!out.all_finished()) {
      out.poll([&](Choice& c, const GenerationChunk& chunk) {
        c.text += chunk.text;
        out.add_logprobs(c, chunk, &c.logprobs);
        if (chunk.finished && chunk.reason == engine::FinishReason::kError && failed.ok()) failed = chunk.error;
      });
      if (!http::client_connected()) {
        out.cancel_all();  // the Generations wait for the engine to let go as they are destroyed
        return;
      }
    }
    if (!failed.ok()) {
      write_error(res, 500, "generation failed: " + failed.message());
      return;
    }
    res.set_content(dumped(out.whole()), "application/json");
  }

  // Streamed: server-sent events from a content provider that httplib calls until done; it
  // returns false (the response ends) when a write fails, and httplib checks before each call
  // that the client is still there. Either way the Response goes with the provider, and its
  // Generations cancel what has not finished.
  static void stream(httplib::Response& res, std::shared_ptr<Response> out) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    auto done = std::make_shared<bool>(false);
    res.set_chunked_content_provider("text/event-stream", [out, done](size_t, httplib::DataSink& sink) {
      try {
        return write_events(*out, *done, sink);
      } catch (const std::exception& e) {  // after the handler returned: nothing else would catch it
        spdlog::error("http stream: {}", e.what());
        out->cancel_all();
        return false;
      }
    });
  }

  // One call of the provider: what has come since, and at the end usage and [DONE].
  static bool write_events(Response& out, bool& done, httplib::DataSink& sink) {
    if (done) {
      sink.done();
      return true;
    }
    std::string events;
    out.poll([&](Choice& c, const GenerationChunk& chunk) {
      if (chunk.finished && chunk.reason == engine::FinishReason::kError) {
        events += "data: " + dumped(error_json(500, "generation failed: " + chunk.error.message(), {}, {})) + "\n\n";
        return;
      }
      events += out.event(c, chunk);
    });
    if (out.all_finished()) {
      if (out.include_usage) events += out.usage_event();
      events += "data: [DONE]\n\n";
      done = true;
    }
    if (!events.empty() && !sink.write(events.data(), events.size())) return false;
    if (done) sink.done();
    return true;
  }

  void models(const httplib::Request& req, httplib::Response& res) {
    authorize(req);
    engine::Engine* e = serving_engine();
    const json m = {{"id", opt_.model_name},
                    {"object", "model"},
                    {"created", created_},
                    {"owned_by", "flashserve"},
                    {"root", opt_.model_name},
                    {"parent", nullptr},
                    {"max_model_len", e->config().max_model_len}};
    res.set_content(dumped({{"object", "list"}, {"data", json::array({m})}}), "application/json");
  }

  void tokenize(const httplib::Request& req, httplib::Response& res) {
    authorize(req);
    engine::Engine* e = serving_engine();
    const json body = body_of(req);
    const Fields f(body);
    const text::TextModel& t = text_model("/tokenize and /detokenize");
    std::vector<int32_t> ids;
    if (body.contains("messages") == body.contains("prompt"))
      throw BadField("prompt", "give exactly one of prompt and messages");
    if (body.contains("prompt")) {
      std::string prompt;
      f.string("prompt", &prompt);
      bool add_special = true;
      f.boolean("add_special_tokens", &add_special);
      if (const Status st = t.encode_text(prompt, add_special, &ids); !st.ok()) throw BadField("prompt", st.message());
    } else {
      if (!t.has_chat_template()) throw Refusal(400, "this model has no chat template");
      bool add_generation_prompt = true;
      f.boolean("add_generation_prompt", &add_generation_prompt);
      std::string rendered;
      if (const Status st = t.encode_chat(messages_of(body["messages"]), add_generation_prompt, &rendered, &ids);
          !st.ok())
        throw BadField("messages", st.message());
    }
    res.set_content(dumped({{"count", ids.size()}, {"max_model_len", e->config().max_model_len}, {"tokens", ids}}),
                    "application/json");
  }

  void detokenize(const httplib::Request& req, httplib::Response& res) {
    authorize(req);
    engine::Engine* e = serving_engine();
    const json body = body_of(req);
    const text::TextModel& t = text_model("/tokenize and /detokenize");
    if (!body.contains("tokens") || !body["tokens"].is_array()) throw BadField("tokens", "tokens must be a list of token ids");
    std::vector<int32_t> ids;
    for (const auto& id : body["tokens"])
      ids.push_back(static_cast<int32_t>(Fields::as_integer(id, "tokens", 0, e->model_config().vocab_size - 1)));
    std::string out;
    if (const Status st = t.tokenizer().decode(ids, true, &out); !st.ok()) throw BadField("tokens", st.message());
    res.set_content(dumped({{"prompt", out}}), "application/json");
  }

  static std::string out_id_base() { return random_request_id(); }

  const OpenAiOptions opt_;
  const Credentials credentials_;
  const CacheSalter* salter_;
  Metrics* metrics_;
  const std::atomic<bool>* draining_;
  const int64_t created_;
};

Status OpenAiFront::start(const OpenAiOptions& options, const Credentials& credentials, const CacheSalter* salter,
                          Metrics* metrics, std::unique_ptr<OpenAiFront>* out) {
  std::unique_ptr<OpenAiFront> f(new OpenAiFront());
  OpenAiOptions o = options;
  if (o.metrics_require_token) {
    if (!credentials.tokens_required())
      return invalid_argument(
          "--metrics-require-token needs a bearer token (--auth-token-file, FLASHSERVE_AUTH_TOKEN or --auth-token)");
    o.http.authorize = [credentials](const std::string* authorization) {  // /metrics: any token gRPC takes
      const std::string_view header = authorization != nullptr ? std::string_view(*authorization) : std::string_view();
      Caller caller;
      return credentials.identify(authorization != nullptr ? &header : nullptr, "", &caller);
    };
  }
  f->routes_ = std::make_unique<Routes>(o, credentials, salter, metrics, &f->draining_);
  if (Status st = http::HttpServer::create(o.http, &f->http_); !st.ok()) return {st.code(), "http: " + st.message()};
  f->routes_->add_to(*f->http_);
  if (Status st = f->http_->start(); !st.ok()) return {st.code(), "http: " + st.message()};
  *out = std::move(f);
  return Status::Ok();
}

OpenAiFront::~OpenAiFront() { stop(); }

void OpenAiFront::set_engine(engine::Engine* engine, const text::TextModel* text) {
  routes_->text = text;  // before the engine: a request that sees the engine sees the text model
  routes_->engine = engine;
}

void OpenAiFront::stop() {
  if (http_) http_->stop();
}

int OpenAiFront::port() const { return http_ ? http_->port() : 0; }
bool OpenAiFront::tls() const { return http_ && http_->tls(); }

}  // namespace flashserve::server
