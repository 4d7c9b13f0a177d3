// Prometheus metrics named after vLLM's (so existing dashboards work), exposed as text over a
// small HTTP endpoint (GET /metrics). Engine gauges and counters are read at scrape time;
// latency histograms are observed by the transport as requests stream.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "server/engine/engine.h"

namespace flashserve::server {

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

  // Serves GET /metrics on host:port (0: any free port) from a thread of its own.
  Status serve(const std::string& host, int port);
  int port() const { return port_; }
  void stop();

 private:
  void serve_loop();

  std::atomic<engine::Engine*> engine_;
  Histogram ttft_, tpot_, itl_, e2e_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> finished_by_reason_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace flashserve::server
