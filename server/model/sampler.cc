#include "server/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <ranges>

namespace flashserve::model {

double sample_uniform(uint64_t seed, uint64_t step) {
  auto mix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  return static_cast<double>(mix(seed ^ mix(step)) >> 11) * 0x1.0p-53;
}

int32_t sample_row(const float* logits, int32_t vocab, const SampleRow& p) {
  std::vector<float> l(logits, logits + vocab);
  for (int32_t t : p.banned)
    if (t >= 0 && t < vocab) l[t] = -INFINITY;
  if (p.temperature == 0.f || p.top_k == 1) return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  std::vector<int32_t> idx(static_cast<size_t>(vocab));
  std::iota(idx.begin(), idx.end(), 0);
  int32_t keep = vocab;
  auto by_logit = [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  if (p.top_k > 0 && p.top_k < vocab) {
    std::partial_sort(idx.begin(), idx.begin() + p.top_k, idx.end(), by_logit);
    keep = p.top_k;
  } else {
    std::sort(idx.begin(), idx.end(), by_logit);
  }
  const double mx = l[idx[0]];
  std::vector<double> prob(static_cast<size_t>(keep));
  double sum = 0;
  for (int32_t i = 0; i < keep; ++i) sum += prob[i] = std::exp((l[idx[i]] - mx) / p.temperature);
  int32_t n = keep;
  while (n > 1 && prob[n - 1] == 0.0) --n;  // banned (-inf) and underflowed: never drawn, not even by rounding
  if (p.min_p > 0.f)
    while (n > 1 && prob[n - 1] < p.min_p * prob[0]) --n;
  if (p.top_p < 1.f) {
    double mass = 0;
    for (int32_t i = 0; i < n; ++i) {
      mass += prob[i];
      if (mass >= p.top_p * sum) {
        n = i + 1;
        break;
      }
    }
  }
  double total = 0;
  for (int32_t i = 0; i < n; ++i) total += prob[i];
  double u = sample_uniform(p.seed, p.step) * total;
  for (int32_t i = 0; i < n; ++i) {
    u -= prob[i];
    if (u < 0) return idx[i];
  }
  return idx[n - 1];
}

TokenLogprobs token_logprobs(const float* logits, int32_t vocab, int32_t token, int32_t num_top) {
  TokenLogprobs out;
  out.token = token;
  auto logit = [&](int32_t i) { return std::isnan(logits[i]) ? -INFINITY : static_cast<double>(logits[i]); };
  double mx = -INFINITY;
  for (int32_t i = 0; i < vocab; ++i) mx = std::max(mx, logit(i));
  // log p(i) = (l_i - mx) - log sum_j exp(l_j - mx), in float64; the sum is >= 1 (the top term).
  double log_sum = 0;
  int64_t num_inf = 0;  // with mx = +inf: the +inf logits, each log(1 / num_inf)
  if (std::isfinite(mx)) {
    double sum = 0;
    for (int32_t i = 0; i < vocab; ++i) sum += std::exp(logit(i) - mx);
    log_sum = std::log(sum);
  } else if (mx > 0) {
    for (int32_t i = 0; i < vocab; ++i) num_inf += logit(i) == INFINITY;
  }
  auto logprob = [&](int32_t i) -> float {
    const double l = logit(i);
    if (mx == -INFINITY || l == -INFINITY) return -INFINITY;
    if (mx == INFINITY) return l == INFINITY ? static_cast<float>(-std::log(static_cast<double>(num_inf))) : -INFINITY;
    return static_cast<float>((l - mx) - log_sum);
  };
  out.logprob = token >= 0 && token < vocab ? logprob(token) : -INFINITY;
  const int32_t k = std::clamp(num_top, 0, std::max(vocab, 0));
  if (k > 0) {
    // A heap of k over one pass of the vocabulary, not a sort of it.
    std::vector<int32_t> ids(static_cast<size_t>(k));
    auto more_likely = [&](int32_t a, int32_t b) {
      const double la = logit(a), lb = logit(b);
      return la > lb || (la == lb && a < b);
    };
    std::ranges::partial_sort_copy(std::views::iota(int32_t{0}, vocab), ids, more_likely);
    out.top.reserve(ids.size());
    for (int32_t id : ids) out.top.emplace_back(id, logprob(id));
  }
  return out;
}

}  // namespace flashserve::model
