#include "server/engine/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace flashserve::engine {

Status SamplingParams::validate(int32_t vocab_size) const {
  if (!(temperature >= 0.f) || !std::isfinite(temperature)) return invalid_argument("temperature must be >= 0");
  if (top_k < 0) return invalid_argument("top_k must be >= 0 (0 = off)");
  if (!(top_p > 0.f && top_p <= 1.f)) return invalid_argument("top_p must be in (0, 1]");
  if (!(min_p >= 0.f && min_p <= 1.f)) return invalid_argument("min_p must be in [0, 1]");
  if (max_tokens < 1) return invalid_argument("max_tokens must be >= 1");
  if (min_tokens < 0 || min_tokens > max_tokens) return invalid_argument("min_tokens must be in [0, max_tokens]");
  for (int32_t t : stop_token_ids)
    if (t < 0 || t >= vocab_size) return invalid_argument("stop token id " + std::to_string(t) + " is not in the vocabulary");
  return Status::Ok();
}

int32_t sample_token(const float* logits, int32_t vocab, const SamplingParams& p, const std::vector<int32_t>& banned,
                     std::mt19937_64& rng) {
  std::vector<float> l(logits, logits + vocab);
  for (int32_t t : banned)
    if (t >= 0 && t < vocab) l[t] = -INFINITY;
  if (p.temperature == 0.f || p.top_k == 1) return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  // Candidates by descending logit; softmax at the temperature.
  std::vector<int32_t> idx(static_cast<size_t>(vocab));
  std::iota(idx.begin(), idx.end(), 0);
  int32_t keep = vocab;
  if (p.top_k > 0 && p.top_k < vocab) {
    std::partial_sort(idx.begin(), idx.begin() + p.top_k, idx.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
    keep = p.top_k;
  } else {
    std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  }
  const double mx = l[idx[0]];
  std::vector<double> prob(static_cast<size_t>(keep));
  double sum = 0;
  for (int32_t i = 0; i < keep; ++i) sum += prob[i] = std::exp((l[idx[i]] - mx) / p.temperature);
  for (double& x : prob) x /= sum;
  // min_p, then top_p (the smallest prefix whose mass reaches top_p).
  int32_t n = keep;
  if (p.min_p > 0.f)
    while (n > 1 && prob[n - 1] < p.min_p * prob[0]) --n;
  if (p.top_p < 1.f) {
    double mass = 0;
    for (int32_t i = 0; i < n; ++i) {
      mass += prob[i];
      if (mass >= p.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  double total = 0;
  for (int32_t i = 0; i < n; ++i) total += prob[i];
  double u = std::uniform_real_distribution<double>(0.0, total)(rng);
  for (int32_t i = 0; i < n; ++i) {
    u -= prob[i];
    if (u <= 0) return idx[i];
  }
  return idx[n - 1];
}

}  // namespace flashserve::engine
