// flashserve_bench's OpenAI-compatible backends on cpp-httplib's client: POST /v1/completions
// (the prompt as token ids, so the load is the gRPC backend's to the token) or
// /v1/chat/completions (the prompt's text as one user message, so the chat template adds its
// tokens: the input length is the usage chunk's prompt_tokens), streamed with
// stream_options.include_usage, read by OpenAiStream. HTTP/1.1: one connection a request, opened
// inside the timed span (as a pool of a client like vLLM's opens one a concurrent request).
#include <httplib.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "client/backend.h"
#include "client/openai_stream.h"

namespace flashserve::client {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string clipped(const std::string& s, size_t n = 300) { return s.size() <= n ? s : s.substr(0, n) + "..."; }

// cpp-httplib's error in words (its own to_string says "Connection", "Read", ...).
std::string said(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "could not connect (refused or unreachable)";
    case httplib::Error::ConnectionTimeout: return "connecting timed out";
    case httplib::Error::Read: return "reading the response failed or timed out";
    case httplib::Error::Write: return "sending the request failed";
    case httplib::Error::SSLConnection: return "the TLS handshake failed";
    case httplib::Error::SSLLoadingCerts: return "the CA file (--tls-ca) could not be loaded";
    case httplib::Error::SSLServerVerification: return "the server's certificate was not verified (--tls-ca)";
    default: return httplib::to_string(e);
  }
}

// An error response's message: OpenAI's {"error": {"message"}}, else the body itself.
std::string message_of(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"];
    if (e.is_string()) return e;
  }
  if (!j.is_discarded() && j.is_object() && j.contains("message") && j["message"].is_string()) return j["message"];
  return clipped(body);
}

class OpenAiBackend final : public Backend {
 public:
  OpenAiBackend(const OpenAiBackendOptions& o, std::string origin, std::string prefix)
      : o_(o), origin_(std::move(origin)), prefix_(std::move(prefix)) {
    if (o_.endpoint.empty()) o_.endpoint = o_.chat ? "/v1/chat/completions" : "/v1/completions";
  }

  // A JSON request to path, its whole answer read: the JSON of a 200, else false with the
  // status (0: no response) and message.
  bool call(const char* method, const std::string& path, const json* body, json* out, int* status,
            std::string* error) const {
    auto cli = client();
    httplib::Result res = body ? cli->Post((prefix_ + path).c_str(), headers(), body->dump(), "application/json")
                               : cli->Get((prefix_ + path).c_str(), headers());
    *status = res ? res->status : 0;
    if (!res) {
      *error = std::string(method) + " " + origin_ + prefix_ + path + ": " + said(res.error());
      return false;
    }
    if (res->status != 200) {
      *error = std::string(method) + " " + path + ": HTTP " + std::to_string(res->status) + ": " + message_of(res->body);
      return false;
    }
    *out = json::parse(res->body, nullptr, false);
    if (out->is_discarded() || !out->is_object()) {
      *error = std::string(method) + " " + path + ": not a JSON object: " + clipped(res->body);
      return false;
    }
    return true;
  }

  bool model_name(std::string* error) {
    if (!o_.model.empty()) return true;
    json models;
    int status = 0;
    if (!call("GET", "/v1/models", nullptr, &models, &status, error)) return false;
    if (!models.contains("data") || !models["data"].is_array() || models["data"].empty() ||
        !models["data"][0].contains("id") || !models["data"][0]["id"].is_string()) {
      *error = "GET /v1/models: no model listed (give --model): " + clipped(models.dump());
      return false;
    }
    o_.model = models["data"][0]["id"];
    return true;
  }

  // The OpenAI API does not say the vocabulary's size; POST /detokenize (vLLM's) takes the ids
  // below it and answers 400 for any other, so the size is found by bisection (25 calls at most).
  bool vocab_size(int32_t* out, std::string* error) override {
    auto accepted = [&](int64_t id, bool* ok) {
      const json body = {{"tokens", json::array({id})}};
      json resp;
      int status = 0;
      std::string e;
      if (call("POST", "/detokenize", &body, &resp, &status, &e)) return *ok = true, true;
      if (status == 400) return *ok = false, true;
      *error = "the vocabulary size (give --vocab-size): " + e;
      return false;
    };
    bool ok = false;
    if (!accepted(0, &ok)) return false;
    if (!ok) {
      *error = "the vocabulary size (give --vocab-size): POST /detokenize refuses token id 0";
      return false;
    }
    int64_t lo = 0, hi = int64_t{1} << 24;  // lo accepted, hi refused
    if (!accepted(hi, &ok)) return false;
    if (ok) {
      *error = "the vocabulary size (give --vocab-size): POST /detokenize takes any id";
      return false;
    }
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (!accepted(mid, &ok)) return false;
      (ok ? lo : hi) = mid;
    }
    *out = static_cast<int32_t>(hi);
    return true;
  }

  bool tokenize(const std::string& text, std::vector<int32_t>* ids, std::string* error) override {
    const json body = {{"prompt", text}, {"add_special_tokens", true}};
    json resp;
    int status = 0;
    if (!call("POST", "/tokenize", &body, &resp, &status, error)) return false;
    if (!resp.contains("tokens") || !resp["tokens"].is_array()) {
      *error = "POST /tokenize: no tokens in " + clipped(resp.dump());
      return false;
    }
    *ids = resp["tokens"].get<std::vector<int32_t>>();
    return true;
  }

  bool prepare(BenchPrompt* p, std::string* error) override {
    if (!o_.chat || !p->text.empty()) return true;
    const json body = {{"tokens", p->tokens}};
    json resp;
    int status = 0;
    if (!call("POST", "/detokenize", &body, &resp, &status, error)) return false;
    if (!resp.contains("prompt") || !resp["prompt"].is_string()) {
      *error = "POST /detokenize: no prompt in " + clipped(resp.dump());
      return false;
    }
    p->text = resp["prompt"];
    return true;
  }

  RequestRecord generate(const BenchPrompt& p, bool ignore_eos) const override {
    json body = {{"model", o_.model},
                 {"temperature", 0},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}},
                 {"ignore_eos", ignore_eos}};  // vLLM's extension
    if (o_.chat) {
      body["messages"] = json::array({{{"role", "user"}, {"content", p.text}}});
      body["max_completion_tokens"] = p.output_len;
    } else {
      body["prompt"] = p.tokens;
      body["max_tokens"] = p.output_len;
    }
    RequestRecord r;
    r.prompt_len = static_cast<int32_t>(p.tokens.size());  // until the usage chunk says
    httplib::Request req;
    req.method = "POST";
    req.path = prefix_ + o_.endpoint;
    req.headers = headers();
    req.headers.emplace("Content-Type", "application/json");
    req.headers.emplace("Accept", "text/event-stream");
    req.body = body.dump();
    OpenAiStream stream(o_.chat);
    int status = 0;
    std::string error_body;
    const auto begin = Clock::now();
    auto since = [&] { return std::chrono::duration<double>(Clock::now() - begin).count(); };
    req.response_handler = [&](const httplib::Response& res) {
      status = res.status;
      return true;
    };
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      if (status != 200) {
        if (error_body.size() < 4096) error_body.append(data, n);
        return true;
      }
      stream.feed(std::string_view(data, n), since());
      return !stream.failed();  // a bad stream: stop reading
    };
    auto cli = client();
    const httplib::Result res = cli->send(req);
    const double end = since();
    r.e2el_s = end;
    if (status == 0) {  // no response at all
      r.error_space = ErrorSpace::kTransport;
      r.error = "POST " + origin_ + req.path + ": " + said(res.error());
      return r;
    }
    if (status != 200) {
      r.error_space = ErrorSpace::kHttp;
      r.error_code = status;
      r.error = "HTTP " + std::to_string(status) + ": " + message_of(error_body);
      return r;
    }
    stream.finish(end, &r);
    if (!res && !stream.failed() && !stream.done())  // the connection broke mid-stream
      r.error += " (" + said(res.error()) + ")";
    return r;
  }

  std::string describe() const override {
    return "HTTP " + origin_ + prefix_ + o_.endpoint + ", model " + o_.model;
  }

  std::unique_ptr<httplib::Client> client() const {
    auto cli = std::make_unique<httplib::Client>(origin_);
    cli->set_connection_timeout(std::chrono::seconds(10));
    cli->set_read_timeout(std::chrono::seconds(600));  // between two reads: a token may be slow under load
    cli->set_write_timeout(std::chrono::seconds(60));
    cli->set_keep_alive(false);
    if (!o_.tls_ca.empty()) cli->set_ca_cert_path(o_.tls_ca.c_str());
    return cli;
  }

  bool valid() const { return httplib::Client(origin_).is_valid(); }

 private:
  httplib::Headers headers() const {
    httplib::Headers h;
    if (!o_.token.empty()) h.emplace("Authorization", "Bearer " + o_.token);
    return h;
  }

  OpenAiBackendOptions o_;
  std::string origin_;  // scheme://host:port
  std::string prefix_;  // the base URL's path, without a trailing '/'
};

}  // namespace

bool make_openai_backend(const OpenAiBackendOptions& o, std::unique_ptr<Backend>* out, std::string* error) {
  static const std::regex url(R"(^(https?://[^/?#]+)(/[^?#]*)?$)");
  std::smatch m;
  if (!std::regex_match(o.base_url, m, url)) {
    *error = "--base-url " + o.base_url + ": not http(s)://host[:port][/path]";
    return false;
  }
  std::string prefix = m[2].str();
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!o.endpoint.empty() && o.endpoint[0] != '/') {
    *error = "--endpoint " + o.endpoint + ": must start with /";
    return false;
  }
  if (!o.tls_ca.empty() && !std::ifstream(o.tls_ca)) {  // else every request fails alike, late
    *error = "cannot read --tls-ca " + o.tls_ca;
    return false;
  }
  auto b = std::make_unique<OpenAiBackend>(o, m[1].str(), prefix);
  if (!b->valid()) {
    *error = "--base-url " + o.base_url + ": cpp-httplib cannot open it (https without OpenSSL support?)";
    return false;
  }
  if (!b->model_name(error)) return false;
  *out = std::move(b);
  return true;
}

}  // namespace flashserve::client
