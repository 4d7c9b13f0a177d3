// The server's HTTP(S) listener, on cpp-httplib: the OpenAI-compatible front (server/http/openai.h)
// and GET /metrics, each a route registered on one HttpServer.
//
// httplib parses each request, routes it and writes the response; this class owns the
// connections (how they are read, for how long, and by how many threads), because the library's
// own connection loop (Debian 12 ships 0.11.4) bounds neither a request's total time (a client
// that sends one byte a second keeps its thread as long as it likes: each read is within the read
// timeout) nor the total size of its headers (only each line, to 8 KiB), and watches sockets with
// select(), which cannot take a descriptor past 1024. Here:
// - a fixed pool of `threads` serves connections; up to `max_queued` more wait for one, and past
//   that a connection gets 503 at once and is closed;
// - a connection may be idle (before its first request, between keep-alive requests) for
//   keep_alive_timeout_s, but only idle_under_load_s while other connections wait for a thread;
// - a request (its line, headers and body) must arrive within request_timeout_s of its first
//   byte, each read within read_timeout_s, its line and headers within max_header_bytes and its
//   body within max_body_bytes (413), and each send of the response within write_timeout_s;
// - a connection serves at most keep_alive_max_requests requests, and is closed after an error
//   status (a malformed request leaves the stream in an unknown place);
// - TLS (tls_cert_file + tls_key_file) is HTTPS only, TLS 1.2 or newer, and its handshake is
//   bounded like a request;
// - stop() wakes every connection's wait at once, so it returns within a poll, not a timeout.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "common/status.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace flashserve::server::http {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port (port() tells which)
  // Both set: HTTPS with this PEM certificate (chain) and unencrypted PEM key; plain HTTP is then
  // not served on the port.
  std::string tls_cert_file, tls_key_file;
  // Routes added with Access::kToken are served when this answers true for the request's
  // Authorization header (null: none sent), else 401 with "WWW-Authenticate: Bearer". Unset: they
  // are open. It must compare in constant time (equal_in_constant_time).
  std::function<bool(const std::string* authorization)> authorize;
  int threads = 16;     // connections served at once
  int max_queued = 64;  // accepted connections waiting for a thread; past it 503 and closed
  double request_timeout_s = 5;      // from a request's first byte to its last (slow clients)
  double read_timeout_s = 5;         // each read of a request
  double write_timeout_s = 5;        // each send of a response
  double keep_alive_timeout_s = 5;   // idle before a connection's first or next request
  double idle_under_load_s = 0.5;    // the same while other connections wait for a thread
  int keep_alive_max_requests = 100;  // requests a connection
  size_t max_header_bytes = 16 << 10;  // request line and headers
  size_t max_body_bytes = 1 << 20;     // Content-Length past it: 413
};

enum class Access { kOpen, kToken };

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

// Inside a handler (or a content provider it set): false once the client has closed its side of
// the connection, so that a handler waiting on slow work can give up. True outside a request.
bool client_connected();

class HttpServer {
 public:
  // Loads the TLS pair and binds host:port: a bad certificate or key (its path and OpenSSL's
  // reason) or a port in use fails here, before anything is served.
  static Status create(const HttpOptions& options, std::unique_ptr<HttpServer>* out);
  ~HttpServer();  // stop()

  // GET (and HEAD) of exactly `path`; before start(). Another method on a registered path is 405
  // (with Allow), an unregistered path 404.
  void get(const std::string& path, Access access, Handler handler);
  // POST of exactly `path` (its body in the request, within max_body_bytes); before start().
  void post(const std::string& path, Access access, Handler handler);
  // Writes the body of an error response (status >= 400) that has none: the listener's own 404,
  // 405, 413 and 401, and a handler's status set without a body. Unset: they stay as they are.
  // Before start().
  void set_error_body(std::function<void(const httplib::Request&, httplib::Response&)> write);

  // Serves from threads of its own: one accepts, `threads` serve connections.
  Status start();
  // Closes the port, ends every connection and joins every thread; a handler never runs after
  // it returns. Idempotent; any thread but the server's own.
  void stop();

  int port() const { return port_; }
  bool tls() const;

  class Listener;  // the httplib::Server that reads connections as above (http_server.cc)

 private:
  HttpServer() = default;
  HttpOptions options_;
  std::unique_ptr<Listener> listener_;
  std::map<std::string, std::set<std::string>> methods_;  // path -> methods routed on it
  void route(const char* method, const std::string& path, Access access, Handler handler);
  std::thread thread_;
  std::atomic<bool> listening_{false};
  int port_ = 0;
};

}  // namespace flashserve::server::http
