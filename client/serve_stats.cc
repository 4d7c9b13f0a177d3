#include "client/serve_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace flashserve::client {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (rank - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double stdev(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

std::string failure_name(const RequestRecord& r) {
  switch (r.error_space) {
    case ErrorSpace::kGrpc: return "gRPC status " + std::to_string(r.error_code);
    case ErrorSpace::kHttp: return "HTTP status " + std::to_string(r.error_code);
    case ErrorSpace::kTransport: return "no response";
    case ErrorSpace::kStream: return "bad stream";
    case ErrorSpace::kNone: break;
  }
  return "unknown";
}

Summary summarize(const std::vector<RequestRecord>& records, double duration_s,
                  const std::map<std::string, double>& slos) {
  Summary s;
  s.duration_s = duration_s;
  int good = 0;
  for (const auto& r : records) {
    if (!r.success) {
      ++s.failed;
      const std::string name = failure_name(r);
      if (s.failed_by[name]++ == 0) s.first_error[name] = r.error;
      continue;
    }
    ++s.completed;
    s.total_input += r.prompt_len;
    s.total_output += r.output_len;
    const double tpot = r.output_len > 1 ? (r.e2el_s - r.ttft_s) / (r.output_len - 1) : 0.0;
    s.values_ms["ttft"].push_back(r.ttft_s * 1e3);
    if (r.output_len > 1) s.values_ms["tpot"].push_back(tpot * 1e3);
    for (double g : r.itl_s) s.values_ms["itl"].push_back(g * 1e3);
    s.values_ms["e2el"].push_back(r.e2el_s * 1e3);
    bool ok = true;
    for (const auto& [name, limit] : slos) {
      const double v = name == "ttft" ? r.ttft_s * 1e3 : name == "tpot" ? tpot * 1e3 : r.e2el_s * 1e3;
      ok = ok && v <= limit;
    }
    good += ok ? 1 : 0;
  }
  for (const char* m : {"ttft", "tpot", "itl", "e2el"}) s.values_ms[m];  // present even if empty
  if (duration_s > 0) {
    s.request_throughput = s.completed / duration_s;
    s.output_throughput = static_cast<double>(s.total_output) / duration_s;
    s.total_token_throughput = static_cast<double>(s.total_input + s.total_output) / duration_s;
    if (!slos.empty()) s.request_goodput = good / duration_s;
  }
  return s;
}

namespace {

const std::map<std::string, std::pair<std::string, std::string>> kTitles = {
    {"ttft", {"Time to First Token", "TTFT"}},
    {"tpot", {"Time per Output Token (excl. 1st token)", "TPOT"}},
    {"itl", {"Inter-token Latency", "ITL"}},
    {"e2el", {"End-to-end Latency", "E2EL"}}};

std::string pct_name(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", p);
  return buf;
}

std::string line(const std::string& label, double v, int precision) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%-40s %-10.*f\n", label.c_str(), precision, v);
  return buf;
}

std::string centered(const std::string& title, char fill) {
  const int width = 50, pad = std::max(0, width - static_cast<int>(title.size()));
  return std::string(pad / 2, fill) + title + std::string(pad - pad / 2, fill) + "\n";
}

}  // namespace

std::string report(const Summary& s, const std::vector<std::string>& metrics, const std::vector<double>& pcts) {
  std::string out = centered(" Serving Benchmark Result ", '=');
  out += line("Successful requests:", s.completed, 0);
  out += line("Failed requests:", s.failed, 0);
  for (const auto& [name, n] : s.failed_by) {
    out += line("  failed with " + name + ":", n, 0);
    out += "    first: " + s.first_error.at(name) + "\n";
  }
  out += line("Benchmark duration (s):", s.duration_s, 2);
  out += line("Total input tokens:", static_cast<double>(s.total_input), 0);
  out += line("Total generated tokens:", static_cast<double>(s.total_output), 0);
  out += line("Request throughput (req/s):", s.request_throughput, 2);
  if (s.request_goodput >= 0) out += line("Request goodput (req/s):", s.request_goodput, 2);
  out += line("Output token throughput (tok/s):", s.output_throughput, 2);
  out += line("Total Token throughput (tok/s):", s.total_token_throughput, 2);
  for (const auto& m : metrics) {
    auto t = kTitles.find(m);
    if (t == kTitles.end()) continue;
    const auto& v = s.values_ms.at(m);
    out += centered(t->second.first, '-');
    out += line("Mean " + t->second.second + " (ms):", mean(v), 2);
    out += line("Median " + t->second.second + " (ms):", percentile(v, 50), 2);
    for (double p : pcts) out += line("P" + pct_name(p) + " " + t->second.second + " (ms):", percentile(v, p), 2);
  }
  out += std::string(50, '=') + "\n";
  return out;
}

std::string result_json(const Summary& s, const std::vector<RequestRecord>& records,
                        const std::vector<std::string>& metrics, const std::vector<double>& pcts, bool detailed) {
  nlohmann::json j;
  j["duration"] = s.duration_s;
  j["completed"] = s.completed;
  j["failed"] = s.failed;
  j["total_input_tokens"] = s.total_input;
  j["total_output_tokens"] = s.total_output;
  j["request_throughput"] = s.request_throughput;
  if (s.request_goodput >= 0) j["request_goodput"] = s.request_goodput;
  j["output_throughput"] = s.output_throughput;
  j["total_token_throughput"] = s.total_token_throughput;
  for (const auto& m : metrics) {
    if (!s.values_ms.count(m)) continue;
    const auto& v = s.values_ms.at(m);
    j["mean_" + m + "_ms"] = mean(v);
    j["median_" + m + "_ms"] = percentile(v, 50);
    j["std_" + m + "_ms"] = stdev(v);
    for (double p : pcts) j["p" + pct_name(p) + "_" + m + "_ms"] = percentile(v, p);
  }
  if (detailed) {
    nlohmann::json in = nlohmann::json::array(), outl = nlohmann::json::array(), ttfts = nlohmann::json::array(),
                   itls = nlohmann::json::array(), errors = nlohmann::json::array();
    for (const auto& r : records) {
      in.push_back(r.prompt_len);
      outl.push_back(r.output_len);
      ttfts.push_back(r.ttft_s);
      itls.push_back(r.itl_s);
      errors.push_back(r.error);
    }
    j["input_lens"] = in;
    j["output_lens"] = outl;
    j["ttfts"] = ttfts;
    j["itls"] = itls;
    j["errors"] = errors;
  }
  return j.dump(2);
}

}  // namespace flashserve::client
