// Sampling a token from logits: one row's parameters as plain numbers (the engine derives them
// from a request's SamplingParams), and the host sampler. The random draw is counter-based,
// u = uniform(seed, step), so a request with a seed is reproducible on any device and a
// preempted request draws the same numbers again.
#pragma once

#include <cstdint>
#include <vector>

namespace flashserve::model {

struct SampleRow {
  float temperature = 0.f;  // 0: greedy
  int32_t top_k = 0;        // 0: off
  float top_p = 1.f;
  float min_p = 0.f;
  uint64_t seed = 0;
  uint64_t step = 0;        // the request's generated-token count
  std::vector<int32_t> banned;  // tokens not allowed now (EOS and stop ids before min_tokens)
};

// The uniform number in [0, 1) of (seed, step).
double sample_uniform(uint64_t seed, uint64_t step);

// Picks the next token: greedy (ties to the lowest id) when temperature is 0 or top_k is 1;
// otherwise softmax at the temperature, then top_k, min_p (relative to the top probability),
// top_p (the smallest set, by descending probability, whose mass reaches top_p of the top-k
// mass), and a draw by inverse CDF in descending-probability order.
int32_t sample_row(const float* logits, int32_t vocab, const SampleRow& row);

}  // namespace flashserve::model
