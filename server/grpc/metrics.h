// Prometheus metrics named after vLLM's (so existing dashboards work), exposed as text by GET
// /metrics on the server's HTTP listener (server/http/http_server.h: cpp-httplib, bounded
// threads, timeouts and sizes). Engine gauges and counters are read at scrape time; latency
// histograms are observed by the transport as requests stream.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/engine/engine.h"
#include "server/grpc/caller.h"
#include "server/http/http_server.h"

namespace flashserve::server {

struct ServerOptions;

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  // Appends the exposition lines of `name` (with _bucket, _sum, _count).
  void write(const std::string& name, const std::string& help, std::string* out) const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  explicit Metrics(engine::Engine* engine);
  void set_engine(engine::Engine* engine) { engine_ = engine; }
  ~Metrics();

  void observe_first_token(double ttft_s) { ttft_.observe(ttft_s); }
  void observe_inter_token(double s) { itl_.observe(s); }
  void observe_finished(const engine::StreamEvent& final_event);

  std::string render() const;  // the text exposition format

  // Serves GET /metrics on options.host:options.metrics_port (0: any free port) from threads of
  // its own: plain HTTP and open by default; HTTPS with the gRPC certificate and key when
  // options.metrics_tls, and only with one of `credentials`' tokens when
  // options.metrics_require_token.
  Status serve(const ServerOptions& options, const Credentials& credentials);
  int port() const { return http_ ? http_->port() : 0; }
  bool tls() const { return http_ && http_->tls(); }
  // Closes the port and joins every thread that serves it: none reads the engine afterwards.
  void stop();

 private:
  std::atomic<engine::Engine*> engine_;
  Histogram ttft_, tpot_, itl_, e2e_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> finished_by_reason_;
  std::unique_ptr<http::HttpServer> http_;
};

}  // namespace flashserve::server
