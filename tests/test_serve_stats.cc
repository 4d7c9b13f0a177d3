// The load-test client's arithmetic: percentiles (numpy's linear interpolation), TPOT, goodput,
// throughputs, the result JSON's vLLM keys, and the arrival process (Poisson rate, gamma
// burstiness, ramp-up).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>

#include "client/arrivals.h"
#include "client/serve_stats.h"

namespace flashserve::client {
namespace {

TEST(ServeStats, PercentilesAsNumpy) {
  const std::vector<double> v = {7, 1, 10, 3, 5, 2, 9, 4, 8, 6};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 5.5);
  EXPECT_NEAR(percentile(v, 90), 9.1, 1e-12);
  EXPECT_NEAR(percentile(v, 99), 9.91, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 10);
  EXPECT_DOUBLE_EQ(mean(v), 5.5);
  EXPECT_NEAR(stdev(v), std::sqrt(8.25), 1e-12);
  EXPECT_DOUBLE_EQ(percentile({}, 99), 0);
  EXPECT_DOUBLE_EQ(percentile({3}, 99), 3);
}

TEST(ServeStats, SummaryOfKnownTimings) {
  RequestRecord a;
  a.success = true;
  a.prompt_len = 100;
  a.output_len = 11;
  a.ttft_s = 0.1;
  a.e2el_s = 1.1;
  a.itl_s.assign(10, 0.1);
  RequestRecord b = a;
  b.ttft_s = 0.3;
  b.e2el_s = 2.3;  // TPOT 0.2
  RequestRecord c;
  c.error_code = 8;  // RESOURCE_EXHAUSTED
  c.error = "queue full";
  RequestRecord d;  // an HTTP failure, counted apart
  d.error_space = ErrorSpace::kHttp;
  d.error_code = 8;
  d.error = "HTTP 8?";
  const std::vector<RequestRecord> rs = {a, b, c, d, c};
  Summary s = summarize(rs, 2.0, {{"ttft", 150.0}});
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 3);
  EXPECT_EQ(s.failed_by["gRPC status 8"], 2);
  EXPECT_EQ(s.failed_by["HTTP status 8"], 1);
  EXPECT_EQ(s.first_error["gRPC status 8"], "queue full");
  EXPECT_EQ(s.total_input, 200);
  EXPECT_EQ(s.total_output, 22);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(s.output_throughput, 11.0);
  EXPECT_DOUBLE_EQ(s.total_token_throughput, 111.0);
  EXPECT_DOUBLE_EQ(s.request_goodput, 0.5);  // only a meets TTFT <= 150 ms
  EXPECT_NEAR(mean(s.values_ms["tpot"]), 150.0, 1e-9);
  EXPECT_EQ(s.values_ms["itl"].size(), 20u);
  const auto j = nlohmann::json::parse(result_json(s, rs, {"ttft", "tpot", "itl", "e2el"}, {50, 99}, true));
  for (const char* key : {"duration", "completed", "failed", "request_throughput", "request_goodput",
                          "output_throughput", "total_token_throughput", "mean_ttft_ms", "median_tpot_ms",
                          "std_itl_ms", "p99_itl_ms", "p50_e2el_ms", "input_lens", "output_lens", "ttfts", "itls",
                          "errors"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_NEAR(j["mean_ttft_ms"].get<double>(), 200.0, 1e-9);
  const std::string text = report(s, {"ttft", "tpot"}, {99});
  EXPECT_NE(text.find("Successful requests:"), std::string::npos);
  EXPECT_NE(text.find("P99 TTFT (ms):"), std::string::npos);
  EXPECT_TRUE(std::regex_search(text, std::regex("failed with gRPC status 8: +2 "))) << text;
  EXPECT_NE(text.find("first: queue full"), std::string::npos) << text;
  EXPECT_NE(text.find("failed with HTTP status 8:"), std::string::npos) << text;
}

TEST(Arrivals, PoissonRateAndBurstiness) {
  ArrivalOptions o;
  o.request_rate = 10;
  o.seed = 3;
  const int n = 20000;
  for (double burst : {1.0, 0.5, 4.0}) {
    o.burstiness = burst;
    const auto t = arrival_times(n, o);
    std::vector<double> gaps;
    for (int i = 1; i < n; ++i) gaps.push_back(t[i] - t[i - 1]);
    const double m = mean(gaps), cv2 = std::pow(stdev(gaps) / m, 2);
    EXPECT_NEAR(m, 0.1, 0.003) << "burstiness " << burst;       // the requested rate
    EXPECT_NEAR(cv2, 1.0 / burst, 0.1 / burst) << "burstiness " << burst;  // gamma: CV² = 1/shape
  }
  o.request_rate = std::numeric_limits<double>::infinity();
  for (double x : arrival_times(100, o)) EXPECT_EQ(x, 0.0);
  o.ramp_up = "linear";
  o.ramp_start_rps = 1;
  o.ramp_end_rps = 100;
  o.burstiness = 1;
  const auto r = arrival_times(4000, o);
  EXPECT_GT((r[200] - r[0]) / 200, 5 * (r[3999] - r[3799]) / 200) << "the rate must rise";
}

}  // namespace
}  // namespace flashserve::client
