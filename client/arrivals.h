// Request arrival times for the load test (vLLM's rules): an infinite rate sends everything at
// once; otherwise inter-arrival gaps are gamma-distributed with shape = burstiness and mean
// 1 / rate (burstiness 1: a Poisson process; < 1 burstier, > 1 more even). With a ramp-up the
// rate moves from start_rps to end_rps over the requests, linearly or exponentially.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace flashserve::client {

struct ArrivalOptions {
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  std::string ramp_up;  // "", "linear" or "exponential"
  double ramp_start_rps = 0, ramp_end_rps = 0;
  uint64_t seed = 0;
};

inline std::vector<double> arrival_times(int n, const ArrivalOptions& o) {
  std::vector<double> t(static_cast<size_t>(n), 0.0);
  std::mt19937_64 rng(o.seed);
  double now = 0;
  for (int i = 0; i < n; ++i) {
    double rate = o.request_rate;
    if (!o.ramp_up.empty()) {
      const double f = n > 1 ? static_cast<double>(i) / (n - 1) : 1.0;
      rate = o.ramp_up == "exponential" && o.ramp_start_rps > 0
                 ? o.ramp_start_rps * std::pow(o.ramp_end_rps / o.ramp_start_rps, f)
                 : o.ramp_start_rps + (o.ramp_end_rps - o.ramp_start_rps) * f;
    }
    t[i] = now;
    if (std::isinf(rate) || rate <= 0) continue;
    std::gamma_distribution<double> gap(o.burstiness, 1.0 / (rate * o.burstiness));
    now += gap(rng);
  }
  return t;
}

}  // namespace flashserve::client
