// The server's transports around the engine: gRPC (the only code that sees protobuf types) and,
// beside it on its own port, the OpenAI-compatible HTTP front (server/http/openai.h). gRPC has the
// flashserve.v1.Generation service, grpc.health.v1 (NOT_SERVING while draining), server
// reflection, an optional bearer token checked on every call, optional TLS, message-size and
// keepalive settings, and a graceful drain.
#pragma once

#include <atomic>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "server/engine/engine.h"
#include "server/grpc/caller.h"
#include "server/text/text_model.h"

namespace grpc {
class Server;
}

namespace flashserve::server {

class Metrics;
class OpenAiFront;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 50051;                 // 0: any free port (port() tells which)
  std::string auth_token;           // non-empty: every call needs "authorization: Bearer <token>"
                                    // (reflection too, unless open_reflection; health never)
  // More tokens beside auth_token, each its own tenant (server/grpc/caller.h): auth_token is
  // "token 1", these "token 2"... (--auth-token-file's first line goes to auth_token, the others
  // here). Any of them, or admin_token, is accepted where a token is needed.
  std::vector<std::string> extra_auth_tokens;
  std::string admin_token;          // non-empty: its holder may Abort any owner's request
  PrefixCacheIsolation prefix_cache_isolation = PrefixCacheIsolation::kNone;
  bool open_reflection = false;     // server reflection without the token
  std::string tls_cert_file, tls_key_file;  // both set: TLS
  int max_message_bytes = 16 << 20;  // the largest message sent
  // The largest message received: bigger ones are refused by gRPC with RESOURCE_EXHAUSTED before
  // they reach a handler. main() sets max_receive_bytes_for(the model's context length).
  int max_receive_bytes = 16 << 20;
  std::string model_name = "flashserve";
  std::string device = "cpu";
  std::string dtype = "fp32";
  int metrics_port = -1;            // Prometheus GET /metrics on host:metrics_port; -1: off, 0: any
  // /metrics is plain HTTP and open by default (Prometheus scrapes inside a cluster usually are).
  bool metrics_tls = false;            // HTTPS with tls_cert_file/tls_key_file (both needed)
  bool metrics_require_token = false;  // "Authorization: Bearer <token>", any token gRPC takes (one needed)
  // The OpenAI-compatible HTTP front (server/http/openai.h) on host:http_port, with /metrics
  // there too; -1: off, 0: any free port. HTTPS with tls_cert_file/tls_key_file when they are set.
  int http_port = -1;
  int http_threads = 0;            // connections served at once (a streamed request holds one); 0: the
                                   // engine's max_num_seqs + max_waiting + 64, so HTTP never refuses first
  size_t http_max_body_bytes = 0;  // 0: twice max_receive_bytes (token ids as JSON digits)
};

// The HTTP front's connection threads: http_threads, or for 0 one for every request the engine
// can hold (running or waiting) and 64 more, so that requests past those get the engine's 429 at
// once instead of waiting for a thread (at most 8192).
int http_threads_for(const ServerOptions& o, const engine::EngineConfig& ec);

class GrpcServer {
 public:
  // engine may be null while the model loads: health says NOT_SERVING and calls UNAVAILABLE
  // until set_engine(). The engine and `text` (the model's tokenizer and chat template; may be
  // empty) must outlive the server's threads: destroy the server, or wait() for it, first.
  static Status start(const ServerOptions& options, engine::Engine* engine, std::unique_ptr<GrpcServer>* out);
  void set_engine(engine::Engine* engine, const text::TextModel* text = nullptr);
  ~GrpcServer();

  int port() const { return port_; }
  int metrics_port() const;
  int http_port() const;  // 0 when the HTTP front is off
  // Stops taking requests (UNAVAILABLE, health NOT_SERVING), lets running ones finish for up
  // to grace_s seconds, aborts the rest (each stream's final message says ABORTED), and stops
  // the server.
  void drain_and_stop(double grace_s);
  // Ends the grace period of a drain now (a second SIGTERM): what is still running is aborted
  // as above. Any thread, any time; a drain that starts later has no grace.
  void cut_drain_short() { cut_drain_short_ = true; }
  // Blocks until the server has stopped. When it returns no thread of the server can reach the
  // engine any more (every handler has returned, the metrics thread is joined), so the engine
  // and the text model may be destroyed.
  void wait();

  class Service;

 private:
  GrpcServer() = default;
  std::unique_ptr<class Metrics> metrics_;
  std::unique_ptr<CacheSalter> salter_;  // one prefix-cache salt key for both fronts
  std::unique_ptr<OpenAiFront> http_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  engine::Engine* engine_ = nullptr;
  int port_ = 0;
  std::atomic<bool> cut_drain_short_{false};
};

// What a real request to a model of this context length needs: every position a token id of
// at most 4 bytes (a varint below 2^28), plus 64 KiB for the sampling parameters, stop strings,
// request id and framing. Capped at INT32_MAX (gRPC's limit is an int).
constexpr int64_t kReceiveSlackBytes = 64 << 10;
inline int max_receive_bytes_for(int64_t context_len) {
  const int64_t n = (context_len > 0 ? context_len : 0) * 4 + kReceiveSlackBytes;
  return n > INT32_MAX ? INT32_MAX : static_cast<int>(n);
}

// Engine status -> gRPC status code number (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, ...).
int grpc_code_of(const Status& st);

// a == b in a time that does not depend on where they differ (the bearer token check: a plain
// compare returns at the first wrong byte, which a client can time byte by byte).
bool equal_in_constant_time(std::string_view a, std::string_view b);

}  // namespace flashserve::server
