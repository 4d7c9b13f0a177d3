#include "server/grpc/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>

namespace flashserve::server {

namespace {

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

const std::vector<double> kLatencyBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                             0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};

}  // namespace

void Histogram::observe(double v) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::write(const std::string& name, const std::string& help, std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    *out += name + "_bucket{le=\"" + fmt(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  cumulative += counts_.back();
  *out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  *out += name + "_sum " + fmt(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics(engine::Engine* engine)
    : engine_(engine), ttft_(kLatencyBuckets), tpot_(kLatencyBuckets), itl_(kLatencyBuckets), e2e_(kLatencyBuckets) {}

Metrics::~Metrics() { stop(); }

void Metrics::observe_finished(const engine::StreamEvent& ev) {
  e2e_.observe(ev.elapsed_s);
  if (ev.completion_tokens > 1)
    tpot_.observe((ev.elapsed_s - ev.time_to_first_token_s) / (ev.completion_tokens - 1));
  std::lock_guard<std::mutex> lock(mu_);
  ++finished_by_reason_[engine::finish_reason_name(ev.reason)];
}

std::string Metrics::render() const {
  engine::Engine* engine = engine_.load();
  const engine::EngineStats s = engine ? engine->stats() : engine::EngineStats{};
  std::string out;
  auto gauge = [&](const char* name, const char* help, double v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " + fmt(v) + "\n";
  };
  auto counter = [&](const char* name, const char* help, double v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " + fmt(v) + "\n";
  };
  gauge("vllm:num_requests_running", "Requests in the running batch.", s.running);
  gauge("vllm:num_requests_waiting", "Requests waiting to be scheduled.", s.waiting);
  gauge("vllm:kv_cache_usage_perc", "KV cache usage, 1 = full.", s.kv_usage);
  gauge("vllm:gpu_cache_usage_perc", "KV cache usage, 1 = full (the older name).", s.kv_usage);
  counter("vllm:prompt_tokens_total", "Prompt tokens accepted.", static_cast<double>(s.prompt_tokens));
  counter("vllm:generation_tokens_total", "Tokens generated.", static_cast<double>(s.generation_tokens));
  counter("vllm:num_preemptions_total", "Requests preempted (recomputed later).", static_cast<double>(s.preemptions));
  counter("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
          static_cast<double>(s.prefix_queries));
  counter("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", static_cast<double>(s.prefix_hits));
  {
    std::lock_guard<std::mutex> lock(mu_);
    out += "# HELP vllm:request_success_total Finished requests by reason.\n# TYPE vllm:request_success_total counter\n";
    for (const char* r : {"eos", "stop", "length", "aborted", "error"}) {
      auto it = finished_by_reason_.find(r);
      out += std::string("vllm:request_success_total{finished_reason=\"") + r + "\"} " +
             std::to_string(it == finished_by_reason_.end() ? 0 : it->second) + "\n";
    }
  }
  ttft_.write("vllm:time_to_first_token_seconds", "Time to the first token.", &out);
  tpot_.write("vllm:time_per_output_token_seconds", "Time per output token after the first.", &out);
  itl_.write("vllm:inter_token_latency_seconds", "Time between streamed tokens.", &out);
  e2e_.write("vllm:e2e_request_latency_seconds", "Request latency, end to end.", &out);
  return out;
}

Status Metrics::serve(const std::string& host, int port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listen_fd_ < 0) return internal_error("metrics: socket failed");
  const int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return invalid_argument("metrics: bad host " + host);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(listen_fd_, 16) != 0)
    return unsupported("metrics: cannot listen on " + host + ":" + std::to_string(port));
  socklen_t len = sizeof addr;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { serve_loop(); });
  return Status::Ok();
}

void Metrics::serve_loop() {
  while (!stopping_) {
    pollfd pfd{listen_fd_, POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    const int fd = accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    timeval tv{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[2048];
    const ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    std::string reply;
    if (n > 0) {
      buf[n] = 0;
      const bool metrics = std::strncmp(buf, "GET /metrics", 12) == 0;
      const std::string body = metrics ? render() : "not found\n";
      reply = std::string("HTTP/1.1 ") + (metrics ? "200 OK" : "404 Not Found") +
              "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
      size_t sent = 0;
      while (sent < reply.size()) {
        const ssize_t k = send(fd, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
        if (k <= 0) break;
        sent += static_cast<size_t>(k);
      }
    }
    close(fd);
  }
}

void Metrics::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

}  // namespace flashserve::server
