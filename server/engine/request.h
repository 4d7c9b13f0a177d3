// A request inside the engine: what the scheduler sees of it (SequenceState: its tokens, its
// cache sequence, a pending decode) and what only the engine needs (its stream, sampling, the
// clocks). Internal to server/engine/.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <unordered_set>

#include "server/engine/engine.h"
#include "server/engine/scheduler.h"

namespace flashserve::engine {

struct Request : SequenceState {
  using Clock = std::chrono::steady_clock;
  GenerateRequest req;  // its prompt moved into tokens (num_prompt_tokens says how many)
  int32_t num_prompt_tokens = 0;
  std::shared_ptr<ResultStream> stream;
  std::unordered_set<int32_t> stop_ids;  // the sampling's stop_token_ids: one lookup a token
  int32_t num_generated = 0;
  bool cancelled = false;
  uint64_t seed = 0;  // the request's, or drawn once at enqueue
  Clock::time_point t_enqueue, t_first;
};

// The request a queue entry is (the engine's queues hold only Requests).
inline Request& request_of(const SequencePtr& s) { return static_cast<Request&>(*s); }

}  // namespace flashserve::engine
