// The samplers: the host sampler's rules and distribution and the logprobs of a sampled token
// (the CPU binary), and the GPU sampler against the same distributions (the GPU binary, built from this file with
// FLASHSERVE_SAMPLER_GPU_ONLY, label gpu).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/cuda_device.h"
#include "server/model/sampler.h"
#if FLASHSERVE_SAMPLER_GPU_ONLY
#include <cuda_runtime.h>

#include "server/model/cuda/sampler_cuda.h"
#include "tests/cuda_support.h"
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

// token_logprobs (the `logprobs` field) against a long-double reference that sorts the whole
// vocabulary: raw log-softmax, top N in descending order with ties to the lower id, the sampled
// token's own logprob whether or not it is in the top N, never NaN.
struct RefLogprobs {
  std::vector<long double> logprob;  // [vocab]
  std::vector<int32_t> order;        // the vocabulary by descending logit, ties to the lower id
};

RefLogprobs reference_logprobs(const std::vector<float>& logits) {
  const int V = static_cast<int>(logits.size());
  RefLogprobs r;
  long double mx = -INFINITY;
  for (float x : logits) mx = std::max<long double>(mx, x);
  long double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<long double>(x) - mx);
  for (float x : logits) r.logprob.push_back(static_cast<long double>(x) - mx - std::log(sum));
  r.order.resize(V);
  std::iota(r.order.begin(), r.order.end(), 0);
  std::sort(r.order.begin(), r.order.end(),
            [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  return r;
}

// Within float rounding of the reference (float's epsilon is 1.2e-7).
void expect_logprob(float got, long double want, const std::string& what) {
  ASSERT_FALSE(std::isnan(got)) << what;
  EXPECT_LE(got, 0.f) << what;
  EXPECT_NEAR(got, static_cast<double>(want), 4e-7 * std::max(1.0, std::fabs(static_cast<double>(want)))) << what;
}

void check_against_reference(const std::vector<float>& logits, const RefLogprobs& ref, int32_t token, int32_t n,
                             const std::string& what) {
  const int32_t V = static_cast<int32_t>(logits.size());
  const TokenLogprobs got = token_logprobs(logits.data(), V, token, n);
  EXPECT_EQ(got.token, token) << what;
  expect_logprob(got.logprob, ref.logprob[token], what + ", the sampled token " + std::to_string(token));
  ASSERT_EQ(static_cast<int32_t>(got.top.size()), std::min(n, V)) << what;
  for (size_t j = 0; j < got.top.size(); ++j) {
    ASSERT_EQ(got.top[j].first, ref.order[j]) << what << ", rank " << j;
    expect_logprob(got.top[j].second, ref.logprob[ref.order[j]], what + ", rank " + std::to_string(j));
    if (j > 0) {
      EXPECT_GE(got.top[j - 1].second, got.top[j].second) << what << ", rank " << j;
    }
  }
}

TEST(Logprobs, MatchFloat64ReferenceOnRandomLogits) {
  for (int32_t V : {50257, 37, 1}) {
    for (uint32_t seed : {1u, 2u, 3u}) {
      std::mt19937 rng(seed * 1000 + static_cast<uint32_t>(V));
      std::normal_distribution<float> normal(0.f, 3.f);
      std::uniform_real_distribution<float> wide(-1e4f, 1e4f);
      for (int kind = 0; kind < 4; ++kind) {
        std::vector<float> l(static_cast<size_t>(V));
        for (auto& x : l) {
          if (kind == 0) x = normal(rng);
          if (kind == 1) x = std::round(normal(rng) * 2.f) / 2.f;  // many exact ties, at the top too
          if (kind == 2) x = wide(rng);                             // exp of the spread underflows
          if (kind == 3) x = std::uniform_int_distribution<int>(0, 2)(rng) ? -1e4f : 1e4f;  // ties at ±1e4
        }
        const RefLogprobs ref = reference_logprobs(l);
        // The top token, a random one, the least likely (never in a top 20 of 50257).
        const int32_t tokens[] = {ref.order.front(), std::uniform_int_distribution<int32_t>(0, V - 1)(rng),
                                  ref.order.back()};
        for (int32_t n : {0, 1, 3, 20})
          for (int32_t t : tokens)
            check_against_reference(l, ref, t, n,
                                    "vocab " + std::to_string(V) + ", seed " + std::to_string(seed) + ", kind " +
                                        std::to_string(kind) + ", n " + std::to_string(n) + ", token " + std::to_string(t));
        // The whole vocabulary (n clamped to it): the probabilities sum to 1.
        if (V <= 37) {
          const TokenLogprobs all = token_logprobs(l.data(), V, 0, V + 5);
          ASSERT_EQ(static_cast<int32_t>(all.top.size()), V);
          double mass = 0;
          for (const auto& [id, lp] : all.top) mass += std::exp(static_cast<double>(lp));
          EXPECT_NEAR(mass, 1.0, 1e-6) << "vocab " << V << ", seed " << seed << ", kind " << kind;
        }
      }
    }
  }
}

TEST(Logprobs, LargeMagnitudesAndNonFiniteLogitsNeverGiveNaN) {
  // ±1e4: exact differences, no overflow, no underflow to -inf.
  std::vector<float> l = {1e4f, -1e4f, 0.f, 1e4f};
  TokenLogprobs r = token_logprobs(l.data(), 4, 1, 4);
  EXPECT_NEAR(r.logprob, -2e4 - std::log(2.0), 1e-2);
  ASSERT_EQ(r.top.size(), 4u);
  EXPECT_EQ(r.top[0].first, 0);  // the tie at 1e4: the lower id first
  EXPECT_EQ(r.top[1].first, 3);
  EXPECT_NEAR(r.top[0].second, -std::log(2.0), 1e-7);
  EXPECT_EQ(r.top[0].second, r.top[1].second);
  EXPECT_EQ(r.top[2].first, 2);
  EXPECT_NEAR(r.top[2].second, -1e4 - std::log(2.0), 1e-3);
  // NaN has no probability: -inf, ranked last; the rest as if it were absent.
  l = {0.5f, NAN, 2.f, -1.f, NAN};
  r = token_logprobs(l.data(), 5, 1, 5);
  EXPECT_EQ(r.logprob, -INFINITY);
  const std::vector<float> finite = {0.5f, 2.f, -1.f};
  const RefLogprobs ref = reference_logprobs(finite);
  const std::vector<int32_t> want_ids = {2, 0, 3, 1, 4};
  for (size_t j = 0; j < 5; ++j) {
    EXPECT_EQ(r.top[j].first, want_ids[j]) << j;
    ASSERT_FALSE(std::isnan(r.top[j].second)) << j;
  }
  expect_logprob(r.top[0].second, ref.logprob[1], "nan row, token 2");
  expect_logprob(r.top[1].second, ref.logprob[0], "nan row, token 0");
  expect_logprob(r.top[2].second, ref.logprob[2], "nan row, token 3");
  EXPECT_EQ(r.top[3].second, -INFINITY);
  EXPECT_EQ(r.top[4].second, -INFINITY);
  // +inf logits share the mass (the softmax's limit); -inf ones have none.
  l = {INFINITY, 3.f, -INFINITY, INFINITY};
  r = token_logprobs(l.data(), 4, 3, 4);
  EXPECT_NEAR(r.logprob, -std::log(2.0), 1e-7);
  EXPECT_EQ(r.top[0].first, 0);
  EXPECT_EQ(r.top[1].first, 3);
  EXPECT_EQ(r.top[2].second, -INFINITY);
  EXPECT_EQ(r.top[3].second, -INFINITY);
  // No logit above -inf (all NaN or -inf): -inf everywhere, not NaN.
  l = {-INFINITY, NAN, -INFINITY};
  r = token_logprobs(l.data(), 3, 0, 3);
  EXPECT_EQ(r.logprob, -INFINITY);
  for (const auto& [id, lp] : r.top) EXPECT_EQ(lp, -INFINITY) << id;
  // A token outside the row: -inf, nothing read past it; n < 0 is no alternatives.
  l = {1.f, 2.f};
  EXPECT_EQ(token_logprobs(l.data(), 2, 2, 1).logprob, -INFINITY);
  EXPECT_EQ(token_logprobs(l.data(), 2, -1, 1).logprob, -INFINITY);
  EXPECT_TRUE(token_logprobs(l.data(), 2, 0, -3).top.empty());
}

#else  // the GPU binary (label gpu)
// Two launches outstanding (the engine's overlapped steps): finish gives them in the order
// launched, each the tokens sample() gives alone (the same rows and u: the same token); the
// `drawn` output holds the last launch's tokens on the device; a third launch is refused, and a
// finish with none outstanding gives no tokens. A launch whose parameters the caller uploaded
// (prepare, write_prepared, launch_prepared) gives the same tokens.
TEST(SamplerCuda, TwoLaunchesOutstandingFinishInOrder) {
  if (!cuda_available()) GTEST_SKIP() << cuda_unavailable_reason();
  const int V = 3001, rows = 37;
  std::vector<float> all;
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> one = random_logits(V, 100 + r);
    all.insert(all.end(), one.begin(), one.end());
  }
  float* d = nullptr;
  int32_t* drawn = nullptr;
  ASSERT_EQ(cudaMalloc(&d, all.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&drawn, rows * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d, all.data(), all.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  std::vector<SampleRow> first(rows), second(rows);
  for (int r = 0; r < rows; ++r) {
    first[r] = kRules[r % (sizeof(kRules) / sizeof(kRules[0]))];
    first[r].seed = 7, first[r].step = static_cast<uint64_t>(r);
    first[r].logprobs = r % 3 == 0 ? 2 : -1;  // 13 rows asking
    second[r] = first[(r + 5) % rows];
    second[r].step += 1000;
    second[r].logprobs = r % 5 == 0 ? 4 : -1;  // 7 rows asking: the slots' results differ in size
  }
  second.resize(rows - 4);  // a smaller second launch
  CudaSampler alone, paired;
  std::vector<int32_t> want1, want2, got1, got2, none = {1};
  std::vector<TokenLogprobs> wl1, wl2, gl1, gl2;
  ASSERT_TRUE(alone.launch(d, V, first, nullptr, true).ok());
  ASSERT_TRUE(alone.finish(&want1, &wl1).ok());
  ASSERT_TRUE(alone.launch(d, V, second, nullptr, true).ok());
  ASSERT_TRUE(alone.finish(&want2, &wl2).ok());
  ASSERT_TRUE(paired.launch(d, V, first, nullptr, true, drawn).ok());
  ASSERT_TRUE(paired.launch(d, V, second, nullptr, true, drawn).ok());
  EXPECT_FALSE(paired.launch(d, V, second, nullptr).ok()) << "a third launch outstanding";
  ASSERT_TRUE(paired.finish(&got1, &gl1).ok());
  ASSERT_TRUE(paired.finish(&got2, &gl2).ok());
  EXPECT_EQ(got1, want1);
  EXPECT_EQ(got2, want2);
  for (auto [got, want] : {std::pair{&gl1, &wl1}, std::pair{&gl2, &wl2}}) {
    ASSERT_EQ(got->size(), want->size());
    for (size_t r = 0; r < want->size(); ++r) {
      EXPECT_EQ((*got)[r].token, (*want)[r].token) << r;
      EXPECT_EQ((*got)[r].logprob, (*want)[r].logprob) << r;
      EXPECT_EQ((*got)[r].top, (*want)[r].top) << r;
    }
  }
  EXPECT_EQ(gl1[0].top.size(), 2u);
  EXPECT_EQ(gl2[5].top.size(), 4u);
  EXPECT_EQ(gl2[1].token, -1) << "a row that did not ask";
  ASSERT_TRUE(paired.finish(&none).ok());
  EXPECT_TRUE(none.empty());
  // drawn: the second launch's tokens, and past its rows the first's.
  std::vector<int32_t> on_device(rows);
  ASSERT_EQ(cudaMemcpy(on_device.data(), drawn, on_device.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int r = 0; r < rows; ++r) EXPECT_EQ(on_device[r], r < rows - 4 ? want2[r] : want1[r]) << r;
  // The parameters uploaded by the caller (the CUDA model's one upload a step): prepare, then
  // write_prepared into the caller's buffer, its copy on the device, launch_prepared from there.
  int64_t bytes = 0;
  ASSERT_TRUE(paired.prepare(V, first, false, &bytes).ok());  // (no logprobs: the tokens alone)
  int64_t banned_ids = 0;
  for (const SampleRow& r : first) banned_ids += static_cast<int64_t>(r.banned.size());
  EXPECT_LE(bytes, CudaSampler::prepared_bytes_bound(rows, banned_ids));
  std::vector<char> staged(static_cast<size_t>(bytes));
  paired.write_prepared(staged.data());
  char* uploaded = nullptr;
  ASSERT_EQ(cudaMalloc(&uploaded, staged.size()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(uploaded, staged.data(), staged.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_TRUE(paired.launch_prepared(d, nullptr, nullptr, uploaded).ok());
  EXPECT_FALSE(paired.launch_prepared(d, nullptr).ok()) << "launched twice from one prepare";
  ASSERT_TRUE(paired.finish(&got1).ok());
  EXPECT_EQ(got1, want1);
  cudaFree(uploaded);
  cudaFree(drawn);
  cudaFree(d);
}

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
  // Each rule by the whole-vocabulary bisections and by the candidates (all 1000 logits are
  // within 16 nats here: every top_k / top_p row is the candidates').
  for (const char* path : {"0", "1"}) {
    const test::ScopedEnv env("FLASHSERVE_SAMPLER_CANDIDATES", path);
    for (const SampleRow& rule : kRules) {
      std::vector<SampleRow> rs(rows, rule);
      for (int r = 0; r < rows; ++r) rs[r].step = static_cast<uint64_t>(r);
      std::vector<int32_t> tokens;
      const Status st = sampler.sample(d, V, rs, nullptr, &tokens);
      ASSERT_TRUE(st.ok()) << st.to_string();
      const bool restricted = (rule.top_k > 0 && rule.top_k < V) || rule.top_p < 1.f;
      EXPECT_EQ(sampler.candidate_rows(), path[0] == '1' && restricted ? rows : 0) << "path " << path;
      check_distribution(tokens, expected(one, rule), path[0] == '1' ? "gpu, candidates" : "gpu");
    }
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

// Llama-3's vocabulary (128256), where top_k and top_p take the candidates' fast path: a head of
// 300 logits N(5, 2) over a bulk N(-10, 2), so ~300 (T 0.8) or ~1000 (T 1) logits lie within
// 16 nats of the top and the bulk's tail carries a little mass (top_p without top_k counts it).
// Each rule by the fast path (FLASHSERVE_SAMPLER_CANDIDATES=1) and by the slow one (=0) against
// the host's rules, and the path each row took (candidate_rows); rows where the candidates cannot
// decide take the slow path: k beyond them (3000; at T 0.2, k 50 takes a 4x wider window, on the
// fast path), a flat row (every logit a candidate), and a nucleus
// reaching below them (one top logit, 2000 just within 16 nats, the rest just below, top_p
// 0.999). The same rows drawn twice give the same tokens.
TEST(SamplerCuda, LargeVocabularyBothPathsFollowTheRules) {
  if (!cuda_available()) GTEST_SKIP() << cuda_unavailable_reason();
  const int V = 128256, rows = 4096;
  std::mt19937 rng(41);
  std::normal_distribution<float> bulk(-10.f, 2.f), head(5.f, 2.f);
  std::vector<float> peaked(V), flat(V);
  for (float& x : peaked) x = bulk(rng);
  for (int i = 0; i < 300; ++i) peaked[(static_cast<int64_t>(i) * 7919) % V] = head(rng);
  std::uniform_real_distribution<float> uniform(0.f, 4.f), below(-0.3f, 0.f);
  for (float& x : flat) x = uniform(rng);
  std::vector<float> deep(V);
  deep[0] = 20.f;
  for (int i = 1; i < V; ++i) deep[i] = (i <= 2000 ? 4.1f : 3.5f) + below(rng);  // within, then below the cut (4)
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, static_cast<size_t>(V) * rows * 4), cudaSuccess);
  CudaSampler sampler;
  const SampleRow rules[] = {
      {0.8f, 50, 1.0f, 0.0f, 11, 0, {}},     // top_k
      {1.0f, 0, 0.9f, 0.0f, 12, 0, {}},      // top_p over the whole vocabulary (the tail's mass)
      {1.0f, 200, 0.95f, 0.0f, 13, 0, {7919}},  // both, a head token banned
      {1.0f, 0, 0.8f, 0.05f, 14, 0, {}},     // min_p and top_p
      {1.0f, 3000, 1.0f, 0.0f, 15, 0, {}},   // k beyond the candidates: the slow path
      {1.0f, 0, 0.999f, 0.0f, 16, 0, {}},    // the deep row: a nucleus below the candidates
      {0.2f, 50, 1.0f, 0.0f, 17, 0, {}},     // a low temperature: ~5 within 16 nats, 4x wider
  };
  for (const std::vector<float>* logits : {&peaked, &flat, &deep}) {
    for (int r = 0; r < rows; ++r)
      ASSERT_EQ(cudaMemcpy(d + static_cast<int64_t>(r) * V, logits->data(), static_cast<size_t>(V) * 4,
                           cudaMemcpyHostToDevice),
                cudaSuccess);
    for (const SampleRow& rule : rules) {
      if (logits == &flat && rule.top_k != 50) continue;  // the flat row: one rule, on the slow path
      if ((logits == &deep) != (rule.top_p == 0.999f)) continue;  // the deep row: its rule alone
      // The candidates decide the peaked row's rules but k = 3000; the others fall back.
      const bool fast = logits == &peaked && rule.top_k != 3000;
      std::vector<SampleRow> rs(rows, rule);
      for (int r = 0; r < rows; ++r) rs[r].step = static_cast<uint64_t>(r);
      const std::map<int32_t, double> want = expected(*logits, rule);
      std::vector<int32_t> first_path;
      for (const char* path : {"fast", "slow"}) {
        const test::ScopedEnv env("FLASHSERVE_SAMPLER_CANDIDATES", path[0] == 's' ? "0" : "1");
        std::vector<int32_t> tokens, again;
        ASSERT_TRUE(sampler.sample(d, V, rs, nullptr, &tokens).ok());
        ASSERT_TRUE(sampler.sample(d, V, rs, nullptr, &again).ok());
        const std::string who = std::string("gpu ") + path + " path, " +
                                (logits == &flat ? "flat" : logits == &deep ? "deep" : "peaked") + " row, top_k " +
                                std::to_string(rule.top_k) + " top_p " + std::to_string(rule.top_p);
        EXPECT_EQ(tokens, again) << who;
        EXPECT_EQ(sampler.candidate_rows(), path[0] == 'f' && fast ? rows : 0) << who;
        if (logits != &deep) {
          check_distribution(tokens, want, who.c_str());
          continue;
        }
        // The deep row's nucleus ends among ~10^5 tail tokens of ~6e-8 each, where the slow path's
        // float sums are a few dozen tokens' mass off the host's float64: its top token's share
        // instead (~0.994), and the same tokens by both settings (both the slow path).
        const double p_top = want.at(0), top = static_cast<double>(std::count(tokens.begin(), tokens.end(), 0));
        EXPECT_NEAR(top, rows * p_top, 6 * std::sqrt(rows * p_top * (1 - p_top)) + 1) << who;
        if (first_path.empty()) {
          first_path = tokens;
        } else {
          EXPECT_EQ(tokens, first_path) << who;
        }
      }
    }
  }
  cudaFree(d);
}

// The device's logprobs (CudaSampler::launch with logprobs) against the host's token_logprobs at
// Llama-3's vocabulary: a peaked row, a row of ties (the top's order by id), a row with NaN and
// -inf logits, one whose max is +inf twice (log 1/2 each), one all -inf (and a NaN); asks of 1,
// 3, 5 and 20 top entries and none; greedy rows (the host's token, the top entry) and a sampled
// one. A row asking for 21 leaves the launch to the
// host (logprobs_ready false).
TEST(SamplerCuda, LogprobsOnTheDeviceMatchTheHost) {
  if (!cuda_available()) GTEST_SKIP() << cuda_unavailable_reason();
  const int V = 128256;
  std::mt19937 rng(51);
  std::normal_distribution<float> normal(0.f, 3.f);
  std::vector<std::vector<float>> rows_logits(5, std::vector<float>(V));
  for (float& x : rows_logits[0]) x = normal(rng);
  for (int i = 0; i < V; ++i) rows_logits[1][i] = static_cast<float>(i % 7);  // ties: ids 6, 13, 20, ...
  rows_logits[2] = rows_logits[0];
  rows_logits[2][11] = NAN;
  rows_logits[2][12] = -INFINITY;
  rows_logits[2][13] = 40.f;
  rows_logits[3] = rows_logits[0];
  rows_logits[3][100] = INFINITY;
  rows_logits[3][7] = INFINITY;
  rows_logits[4].assign(V, -INFINITY);
  rows_logits[4][2] = NAN;  // ranked as -inf: ids 0 .. 4 in order
  std::vector<float> all;
  for (const auto& r : rows_logits) all.insert(all.end(), r.begin(), r.end());
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, all.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d, all.data(), all.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  CudaSampler sampler;
  std::vector<SampleRow> rows(5);
  rows[0].logprobs = 20;
  rows[1].logprobs = 5;
  rows[2] = SampleRow{1.f, 0, 1.f, 0.f, 7, 3, {}, 1};  // sampled
  rows[3].logprobs = 3;  // the two +inf (7, then 100), then the finite ones at -inf
  rows[4].logprobs = 5;
  for (int variant = 0; variant < 2; ++variant) {
    std::vector<SampleRow> rs = rows;
    if (variant == 1) rs[0].logprobs = -1;  // a row that does not ask
    std::vector<int32_t> tokens;
    std::vector<TokenLogprobs> lp;
    ASSERT_TRUE(sampler.launch(d, V, rs, nullptr, true).ok());
    ASSERT_TRUE(sampler.finish(&tokens, &lp).ok());
    ASSERT_TRUE(sampler.logprobs_ready());
    ASSERT_EQ(lp.size(), rs.size());
    for (size_t r = 0; r < rs.size(); ++r) {
      const std::string what = "variant " + std::to_string(variant) + ", row " + std::to_string(r);
      if (rs[r].logprobs < 0) {
        EXPECT_EQ(lp[r].token, -1) << what;
        EXPECT_TRUE(lp[r].top.empty()) << what;
        continue;
      }
      const TokenLogprobs want = token_logprobs(rows_logits[r].data(), V, tokens[r], rs[r].logprobs);
      EXPECT_EQ(lp[r].token, tokens[r]) << what;
      if (rs[r].temperature == 0.f) {  // greedy: the host's token, the top entry's
        EXPECT_EQ(tokens[r], sample_row(rows_logits[r].data(), V, rs[r])) << what;
        if (!lp[r].top.empty()) {
          EXPECT_EQ(tokens[r], lp[r].top[0].first) << what;
        }
      }
      auto near = [&](float got, float w) {
        if (std::isinf(w)) return got == w;
        return std::fabs(got - w) <= 1e-5f + 1e-6f * std::fabs(w);  // fp32 sums against float64 (~2e-6 here)
      };
      EXPECT_TRUE(near(lp[r].logprob, want.logprob)) << what << ": " << lp[r].logprob << " vs " << want.logprob;
      ASSERT_EQ(lp[r].top.size(), want.top.size()) << what;
      for (size_t j = 0; j < want.top.size(); ++j) {
        EXPECT_EQ(lp[r].top[j].first, want.top[j].first) << what << ", rank " << j;
        EXPECT_TRUE(near(lp[r].top[j].second, want.top[j].second))
            << what << ", rank " << j << ": " << lp[r].top[j].second << " vs " << want.top[j].second;
      }
    }
  }
  // More than the device takes: the caller's.
  std::vector<SampleRow> many(1);
  many[0].logprobs = 21;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> lp;
  ASSERT_TRUE(sampler.launch(d, V, many, nullptr, true).ok());
  ASSERT_TRUE(sampler.finish(&tokens, &lp).ok());
  EXPECT_FALSE(sampler.logprobs_ready());
  EXPECT_TRUE(lp.empty());
  EXPECT_EQ(tokens.size(), 1u);  // the draw itself goes on
  cudaFree(d);
}
#endif

}  // namespace
}  // namespace flashserve::model
