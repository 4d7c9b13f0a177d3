// The samplers: the host sampler's rules and distribution (the CPU binary), and the GPU
// sampler against the same distributions (the GPU binary, built from this file with
// FLASHSERVE_SAMPLER_GPU_ONLY, label gpu).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "common/cuda_device.h"
#include "server/model/sampler.h"
#if FLASHSERVE_SAMPLER_GPU_ONLY
#include <cuda_runtime.h>

#include "server/model/cuda/sampler_cuda.h"
#endif

namespace flashserve::model {
namespace {

// The kept tokens and their probabilities, computed plainly (float64, full sort).
std::map<int32_t, double> expected(const std::vector<float>& logits, const SampleRow& r) {
  const int V = static_cast<int>(logits.size());
  std::vector<int32_t> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  std::vector<double> l(logits.begin(), logits.end());
  for (int32_t b : r.banned) l[b] = -INFINITY;
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  const int k = r.top_k > 0 ? std::min(r.top_k, V) : V;
  std::vector<double> p(k);
  double sum = 0;
  for (int i = 0; i < k; ++i) sum += p[i] = std::exp((l[idx[i]] - l[idx[0]]) / r.temperature);
  int n = k;
  while (n > 1 && p[n - 1] < r.min_p * p[0]) --n;
  double mass = 0;
  for (int i = 0; i < n; ++i) {
    mass += p[i];
    if (mass >= r.top_p * sum) {
      n = i + 1;
      break;
    }
  }
  double total = 0;
  for (int i = 0; i < n; ++i) total += p[i];
  std::map<int32_t, double> out;
  for (int i = 0; i < n; ++i) out[idx[i]] = p[i] / total;
  return out;
}

std::vector<float> random_logits(int V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::vector<float> l(V);
  for (auto& x : l) x = normal(rng);
  return l;
}

// Every draw is a kept token, and each kept token's frequency is within 6 sigma.
void check_distribution(const std::vector<int32_t>& draws, const std::map<int32_t, double>& want, const char* who) {
  std::map<int32_t, int> count;
  for (int32_t t : draws) {
    ASSERT_TRUE(want.count(t)) << who << " drew token " << t << ", which the rules exclude";
    ++count[t];
  }
  const double n = static_cast<double>(draws.size());
  for (const auto& [tok, prob] : want) {
    const double sigma = std::sqrt(n * prob * (1 - prob)) + 1;
    EXPECT_NEAR(count[tok], n * prob, 6 * sigma) << who << " token " << tok << " probability " << prob;
  }
}

const SampleRow kRules[] = {
    {1.0f, 0, 1.0f, 0.0f, 1, 0, {}},        // plain softmax
    {0.7f, 10, 1.0f, 0.0f, 2, 0, {}},       // top_k
    {1.3f, 0, 0.8f, 0.0f, 3, 0, {}},        // top_p
    {1.0f, 0, 1.0f, 0.1f, 4, 0, {5, 17}},   // min_p, banned
    {0.9f, 25, 0.9f, 0.02f, 5, 0, {3}},     // everything
};

#if !FLASHSERVE_SAMPLER_GPU_ONLY  // the CPU binary
TEST(Sampler, HostDistributionFollowsTheRules) {
  const std::vector<float> logits = random_logits(60, 9);
  for (const SampleRow& rule : kRules) {
    std::vector<int32_t> draws;
    SampleRow r = rule;
    for (int step = 0; step < 20000; ++step) {
      r.step = static_cast<uint64_t>(step);
      draws.push_back(sample_row(logits.data(), 60, r));
    }
    check_distribution(draws, expected(logits, rule), "host");
  }
}

TEST(Sampler, GreedyTiesAndReproducibility) {
  std::vector<float> l = {0.f, 3.f, 3.f, 1.f};
  SampleRow g;
  EXPECT_EQ(sample_row(l.data(), 4, g), 1);  // ties: the lowest id
  g.banned = {1};
  EXPECT_EQ(sample_row(l.data(), 4, g), 2);
  SampleRow s{1.f, 0, 1.f, 0.f, 77, 5, {}};
  const std::vector<float> logits = random_logits(100, 1);
  EXPECT_EQ(sample_row(logits.data(), 100, s), sample_row(logits.data(), 100, s));
  EXPECT_EQ(sample_uniform(1, 2), sample_uniform(1, 2));
  EXPECT_NE(sample_uniform(1, 2), sample_uniform(1, 3));
}

#else  // the GPU binary (label gpu)
TEST(SamplerCuda, SameDistributionsAsTheHost) {
  if (!cuda_available()) GTEST_SKIP() << cuda_unavailable_reason();
  const int V = 1000, rows = 8192;
  const std::vector<float> one = random_logits(V, 12);
  std::vector<float> all;
  for (int r = 0; r < rows; ++r) all.insert(all.end(), one.begin(), one.end());
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, all.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d, all.data(), all.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  CudaSampler sampler;
  for (const SampleRow& rule : kRules) {
    std::vector<SampleRow> rs(rows, rule);
    for (int r = 0; r < rows; ++r) rs[r].step = static_cast<uint64_t>(r);
    std::vector<int32_t> tokens;
    const Status st = sampler.sample(d, V, rs, nullptr, &tokens);
    ASSERT_TRUE(st.ok()) << st.to_string();
    check_distribution(tokens, expected(one, rule), "gpu");
  }
  // Greedy rows: the host's argmax exactly, banned ids respected.
  std::vector<SampleRow> greedy(64);
  for (int r = 0; r < 64; ++r) greedy[r].banned = {static_cast<int32_t>(std::max_element(one.begin(), one.end()) - one.begin())};
  std::vector<int32_t> tokens;
  ASSERT_TRUE(sampler.sample(d, V, greedy, nullptr, &tokens).ok());
  for (int r = 0; r < 64; ++r) EXPECT_EQ(tokens[r], sample_row(one.data(), V, greedy[r]));
  // Many banned ids a row (min_tokens with a request's 1024 stop ids and eos): greedy rows that ban
  // the 900 largest logits (and ids outside the vocabulary, which are dropped), and sampled rows
  // that ban 700 ids, against the host's rules.
  std::vector<int32_t> order(V);
  for (int i = 0; i < V; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return one[a] > one[b]; });
  std::vector<SampleRow> many(64);
  for (int r = 0; r < 64; ++r) {
    many[r].banned.assign(order.begin(), order.begin() + 900 - r);
    many[r].banned.push_back(V + r);
    many[r].banned.push_back(-1 - r);
  }
  ASSERT_TRUE(sampler.sample(d, V, many, nullptr, &tokens).ok());
  for (int r = 0; r < 64; ++r) {
    SampleRow host = many[r];
    host.banned.resize(host.banned.size() - 2);
    EXPECT_EQ(tokens[r], sample_row(one.data(), V, host)) << r;
    EXPECT_EQ(tokens[r], order[900 - r]) << r;
  }
  SampleRow rule{1.0f, 0, 1.0f, 0.0f, 6, 0, {}};
  for (int i = 0; i < 700; ++i) rule.banned.push_back(order[(i * 7) % V]);  // a scatter of the top and the rest
  std::vector<SampleRow> rs(rows, rule);
  for (int r = 0; r < rows; ++r) rs[r].step = static_cast<uint64_t>(r);
  ASSERT_TRUE(sampler.sample(d, V, rs, nullptr, &tokens).ok());
  check_distribution(tokens, expected(one, rule), "gpu, 700 banned");
  cudaFree(d);
}
#endif

}  // namespace
}  // namespace flashserve::model
