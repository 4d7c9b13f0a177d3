// Sampling a token from logits: one row's parameters as plain numbers (the engine derives them
// from a request's SamplingParams), the host sampler, and the log-probabilities of a sampled
// token (OpenAI's `logprobs`). The random draw is counter-based, u = uniform(seed, step), so a
// request with a seed is reproducible on any device and a preempted request draws the same
// numbers again.
#pragma once

#include <cstdint>
#include <utility>
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
  int32_t logprobs = -1;    // -1: none; 0: the sampled token's; N > 0: and the top N (token_logprobs)
};

// The log-probabilities of one sampled token, natural log, of the softmax of the RAW logits:
// before temperature, top_k/top_p/min_p and banned tokens (vLLM V1's default "raw_logprobs"), so
// a greedy token and a sampled one are scored alike. -inf for a token of no probability (a logit
// of -inf or NaN); never NaN. A transport that writes JSON must map -inf (vLLM writes -9999.0).
struct TokenLogprobs {
  int32_t token = -1;   // the sampled token; -1: the row asked for no logprobs
  float logprob = 0.f;  // log p(token): always given, whether or not the token is in `top`
  std::vector<std::pair<int32_t, float>> top;  // the N most likely (id, logprob): descending, ties to the lower id
};


// The uniform number in [0, 1) of (seed, step).
double sample_uniform(uint64_t seed, uint64_t step);

// Picks the next token: greedy (ties to the lowest id) when temperature is 0 or top_k is 1;
// otherwise softmax at the temperature, then top_k, min_p (relative to the top probability),
// top_p (the smallest set, by descending probability, whose mass reaches top_p of the top-k
// mass), and a draw by inverse CDF in descending-probability order.
int32_t sample_row(const float* logits, int32_t vocab, const SampleRow& row);

// The log-softmax of one row of raw logits [vocab] (float64, max subtracted) at `token`, and the
// num_top most likely tokens (partial selection, O(vocab log num_top); num_top is clamped to
// [0, vocab]). Ranked by logit, which is the logprob order; equal logits by the lower id. Several
// logits of +inf share the mass evenly (the limit of the softmax); a row with no logit above -inf
// gives -inf everywhere. A token outside [0, vocab) gets -inf (no read past the row).
TokenLogprobs token_logprobs(const float* logits, int32_t vocab, int32_t token, int32_t num_top);

}  // namespace flashserve::model
