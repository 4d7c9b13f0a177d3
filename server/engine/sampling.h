// A request's sampling parameters (vLLM's names and meanings).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/status.h"

namespace flashserve::engine {

// At most this many stop ids a request (vLLM has no cap; 4 M ids took 4.3 s and stalled the
// neighbours' steps). Stop strings have theirs in server/text/text_stream.h.
inline constexpr size_t kMaxStopTokenIds = 1024;
// At most this many top alternatives a token (OpenAI's top_logprobs cap; vLLM's max_logprobs).
inline constexpr int32_t kMaxLogprobs = 20;

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // (0, 1]
  float min_p = 0.0f;        // [0, 1]: drop tokens below min_p × the top probability
  std::optional<uint64_t> seed;  // set: the request's samples are reproducible
  std::vector<int32_t> stop_token_ids;
  int32_t max_tokens = 16;
  int32_t min_tokens = 0;    // EOS (unless ignored) and stop ids are masked before this many;
                             // the engine refuses a request where they cover the vocabulary
  bool ignore_eos = false;
  // Log-probabilities of each generated token (StreamEvent::logprobs), of the raw logits (before
  // temperature and the filters): -1 none; 0 the sampled token's; 1..kMaxLogprobs also the top N.
  int32_t logprobs = -1;

  Status validate(int32_t vocab_size) const;
};

}  // namespace flashserve::engine
