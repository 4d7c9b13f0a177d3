// The load-test client's measurements and report, with vLLM's definitions (`vllm bench
// serve`): per request TTFT, TPOT ((e2el - ttft) / (output tokens - 1)), inter-token latencies
// and end-to-end latency; means, medians, standard deviations and percentiles (linear
// interpolation between closest ranks, numpy's default); goodput against SLOs; the result JSON
// with vLLM's key names.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace flashserve::client {

// What error_code of a failed request counts in.
enum class ErrorSpace {
  kNone,
  kGrpc,       // a gRPC status code
  kHttp,       // an HTTP status other than 200
  kTransport,  // no response: connection refused or lost, a timeout (error_code unused)
  kStream,     // a 200 whose stream was bad or cut short (error_code unused)
};

struct RequestRecord {
  bool success = false;
  ErrorSpace error_space = ErrorSpace::kGrpc;
  int error_code = 0;          // in error_space, when it failed
  std::string error;           // the message
  int32_t prompt_len = 0;
  int32_t output_len = 0;      // tokens received
  double start_s = 0;          // since the benchmark's start
  double ttft_s = 0;
  double e2el_s = 0;
  std::vector<double> itl_s;   // gaps between successive tokens
};

// The p-th percentile (0..100) of values, interpolated linearly; 0 for no values.
double percentile(std::vector<double> values, double p);
double mean(const std::vector<double>& v);
double stdev(const std::vector<double>& v);  // population standard deviation (numpy's np.std)

struct Summary {
  int completed = 0, failed = 0;
  // failure_name() -> how many, and the first one's message
  std::map<std::string, int> failed_by;
  std::map<std::string, std::string> first_error;
  double duration_s = 0;
  int64_t total_input = 0, total_output = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  double request_goodput = -1;  // -1: no SLOs given
  // metric ("ttft", "tpot", "itl", "e2el") -> values in ms
  std::map<std::string, std::vector<double>> values_ms;
};

// "gRPC status 8", "HTTP status 429", "no response", "bad stream".
std::string failure_name(const RequestRecord& r);

// goodput: SLO name ("ttft", "tpot", "e2el") -> limit in ms; empty for none.
Summary summarize(const std::vector<RequestRecord>& records, double duration_s,
                  const std::map<std::string, double>& goodput_slos_ms);

// The vLLM-style result block (metrics and percentiles as asked).
std::string report(const Summary& s, const std::vector<std::string>& metrics, const std::vector<double>& percentiles);
// The result JSON (vLLM's key names); detailed adds the per-request arrays.
std::string result_json(const Summary& s, const std::vector<RequestRecord>& records,
                        const std::vector<std::string>& metrics, const std::vector<double>& percentiles,
                        bool detailed);

}  // namespace flashserve::client
