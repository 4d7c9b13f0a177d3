#include "server/grpc/metrics.h"

#include <httplib.h>

#include <cstdio>
#include <string_view>
#include <utility>

#include "server/grpc/server.h"

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
  out += "# HELP flashserve:step_seconds_total The step thread's wall time by part of a step (host: all but forward).\n"
         "# TYPE flashserve:step_seconds_total counter\n";
  for (const auto& [phase, v] : {std::pair<const char*, double>{"schedule", s.step_schedule_s},
                                 {"build", s.step_build_s},
                                 {"forward", s.step_forward_s},
                                 {"deliver", s.step_deliver_s}})
    out += std::string("flashserve:step_seconds_total{phase=\"") + phase + "\"} " + fmt(v) + "\n";
  counter("flashserve:step_begin_seconds_total",
          "Of the forward part, the time in the model's begin_step (on a GPU its host work for the step: plan, "
          "metadata, upload, launches).",
          s.step_begin_s);
  counter("flashserve:steps_total", "Engine steps run.", static_cast<double>(s.steps));
  if (s.device_timed_steps > 0) {  // a model that times its steps on the device (the CUDA model)
    out += "# HELP flashserve:step_device_seconds_total The device's time by part of a step: idle (between steps: "
           "the host's work), prepare (the step's host work and upload), run (kernels, draws, tokens back).\n"
           "# TYPE flashserve:step_device_seconds_total counter\n";
    for (const auto& [part, v] : {std::pair<const char*, double>{"idle", s.step_device_idle_s},
                                  {"prepare", s.step_device_prepare_s},
                                  {"run", s.step_device_run_s}})
      out += std::string("flashserve:step_device_seconds_total{part=\"") + part + "\"} " + fmt(v) + "\n";
    counter("flashserve:device_timed_steps_total", "Engine steps the model timed on the device.",
            static_cast<double>(s.device_timed_steps));
  }
  // Mixed steps (issue 27): the prefill budget and the step cost model it may follow.
  gauge("flashserve:prefill_budget_tokens", "Prompt-chunk tokens the latest step with decodes could take.",
        s.prefill_budget_tokens);
  if (engine != nullptr) {
    gauge("flashserve:tpot_target_seconds", "The TPOT target the prefill budget follows (0: none).",
          engine->config().tpot_target_s);
    gauge("flashserve:overlap_steps", "1 where step n + 1 is queued while step n runs (--overlap-steps), else 0.",
          engine->config().overlap_steps ? 1 : 0);
  }
  out += "# HELP flashserve:step_cost_seconds The step cost model: forward seconds = intercept + decode_token x "
         "decode tokens + prefill_token x prompt tokens + decode_context_token x the decodes' cached tokens (0 "
         "until fitted).\n# TYPE flashserve:step_cost_seconds gauge\n";
  for (int j = 0; j < engine::StepCostModel::kTerms; ++j) {
    static constexpr const char* kTerm[] = {"intercept", "decode_token", "prefill_token", "decode_context_token"};
    out += std::string("flashserve:step_cost_seconds{term=\"") + kTerm[j] + "\"} " + fmt(s.step_cost[j]) + "\n";
  }
  gauge("flashserve:step_cost_samples", "Steps in the step cost model's window.", static_cast<double>(s.step_cost_samples));
  if (engine != nullptr) {  // vLLM's cache_config_info: the cache's configuration as labels, value 1
    const KVStorageShape& kv = engine->kv_shape();
    out += "# HELP vllm:cache_config_info Information of the KV cache's configuration (the labels).\n"
           "# TYPE vllm:cache_config_info gauge\n"
           "vllm:cache_config_info{block_size=\"" + std::to_string(kv.block_size) + "\",cache_dtype=\"" +
           dtype_name(kv.dtype) + "\",num_gpu_blocks=\"" + std::to_string(kv.num_blocks) + "\"} 1\n";
  }
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

Status Metrics::serve(const ServerOptions& so, const Credentials& credentials) {
  http::HttpOptions o;
  o.host = so.host;
  o.port = so.metrics_port;
  if (so.metrics_tls) {
    if (so.tls_cert_file.empty() || so.tls_key_file.empty())
      return invalid_argument("--metrics-tls serves /metrics over HTTPS with --tls-cert and --tls-key: set both");
    o.tls_cert_file = so.tls_cert_file;
    o.tls_key_file = so.tls_key_file;
  }
  if (so.metrics_require_token) {
    if (!credentials.tokens_required())
      return invalid_argument(
          "--metrics-require-token needs a bearer token (--auth-token-file, FLASHSERVE_AUTH_TOKEN or --auth-token)");
    // Any token gRPC takes (a tenant's or the admin's), each compared in constant time.
    o.authorize = [credentials](const std::string* authorization) {
      const std::string_view header = authorization != nullptr ? std::string_view(*authorization) : std::string_view();
      Caller caller;
      return credentials.identify(authorization != nullptr ? &header : nullptr, "", &caller);
    };
  }
  std::unique_ptr<http::HttpServer> server;
  if (Status st = http::HttpServer::create(o, &server); !st.ok()) return {st.code(), "metrics: " + st.message()};
  server->get("/metrics", http::Access::kToken, [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  if (Status st = server->start(); !st.ok()) return {st.code(), "metrics: " + st.message()};
  http_ = std::move(server);
  return Status::Ok();
}

void Metrics::stop() {
  if (http_) http_->stop();
}

}  // namespace flashserve::server
