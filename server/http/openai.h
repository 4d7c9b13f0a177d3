// The OpenAI-compatible HTTP front (issue 28), beside gRPC and over the same engine: requests
// from both batch together, and the metrics count both. Routes, on one HttpServer:
//   POST /v1/completions, POST /v1/chat/completions   OpenAI's fields (below), stream as SSE
//   GET  /v1/models                                    the one model served
//   GET  /health                                       200 serving, 503 loading or draining
//   GET  /metrics                                      Prometheus (server/grpc/metrics.h)
//   POST /tokenize, POST /detokenize                   vLLM's shapes
// Fields: prompt (a string, strings, token ids, lists of ids), messages (through the model's
// chat template), max_tokens (max_completion_tokens), temperature, top_p, top_k, min_p, seed,
// stop, n, logprobs (top_logprobs for chat), echo, stream, stream_options.include_usage, and
// vLLM's min_tokens, ignore_eos, stop_token_ids, skip_special_tokens. Unknown fields are ignored,
// as OpenAI does; known ones this server cannot honour (penalties, logit_bias, best_of > n,
// suffix, tools, a response_format other than text, echo with logprobs) are a 400 that names
// them, never silently dropped.
// Errors are OpenAI's JSON, {"error": {"message", "type", "param", "code"}}: 400 bad fields,
// invalid UTF-8, a prompt past the context; 401 no or wrong token (the gRPC tokens); 404 unknown
// model or route; 413 a body past the limit; 429 the queue full; 503 loading or draining; 500
// the engine failing a request.
// Streams are server-sent events, "data: {json}\n\n", ending with "data: [DONE]". A client that
// goes away (mid-stream or while a request waits) aborts its requests, whose blocks go back to
// the pool.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "common/status.h"
#include "server/engine/engine.h"
#include "server/grpc/caller.h"
#include "server/http/http_server.h"
#include "server/text/text_model.h"

namespace flashserve::server {

class Metrics;

struct OpenAiOptions {
  http::HttpOptions http;       // host, port, TLS, threads, limits (authorize is set here)
  std::string model_name;       // what /v1/models lists and requests must name (or leave out)
  bool metrics_require_token = false;  // /metrics with a token, like the other routes
};

class OpenAiFront {
 public:
  // Binds and serves. engine may be null while the model loads (503 until set_engine()).
  // credentials and salter are the gRPC server's (one set of tenants for both fronts).
  static Status start(const OpenAiOptions& options, const Credentials& credentials, const CacheSalter* salter,
                      Metrics* metrics, std::unique_ptr<OpenAiFront>* out);
  ~OpenAiFront();

  void set_engine(engine::Engine* engine, const text::TextModel* text);
  void set_draining() { draining_ = true; }  // new requests 503, /health 503
  // Closes the port and joins every thread: no handler reaches the engine afterwards.
  void stop();
  int port() const;
  bool tls() const;

  class Routes;  // the handlers (openai.cc)

 private:
  OpenAiFront() = default;
  std::unique_ptr<Routes> routes_;
  std::unique_ptr<http::HttpServer> http_;
  std::atomic<bool> draining_{false};
};

}  // namespace flashserve::server
