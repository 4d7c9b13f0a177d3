#include "server/engine/sampling.h"

#include <cmath>
#include <string>

namespace flashserve::engine {

Status SamplingParams::validate(int32_t vocab_size) const {
  if (!(temperature >= 0.f) || !std::isfinite(temperature)) return invalid_argument("temperature must be >= 0");
  if (top_k < 0) return invalid_argument("top_k must be >= 0 (0 = off)");
  if (!(top_p > 0.f && top_p <= 1.f)) return invalid_argument("top_p must be in (0, 1]");
  if (!(min_p >= 0.f && min_p <= 1.f)) return invalid_argument("min_p must be in [0, 1]");
  if (max_tokens < 1) return invalid_argument("max_tokens must be >= 1");
  if (min_tokens < 0 || min_tokens > max_tokens) return invalid_argument("min_tokens must be in [0, max_tokens]");
  if (logprobs < -1 || logprobs > kMaxLogprobs)
    return invalid_argument("logprobs must be in [-1, " + std::to_string(kMaxLogprobs) +
                            "] (-1: off, 0: the sampled token's, N: also the top N), got " + std::to_string(logprobs));
  if (stop_token_ids.size() > kMaxStopTokenIds)
    return invalid_argument("stop_token_ids: at most " + std::to_string(kMaxStopTokenIds) + " ids, got " +
                            std::to_string(stop_token_ids.size()));
  for (int32_t t : stop_token_ids)
    if (t < 0 || t >= vocab_size) return invalid_argument("stop token id " + std::to_string(t) + " is not in the vocabulary");
  return Status::Ok();
}

}  // namespace flashserve::engine
