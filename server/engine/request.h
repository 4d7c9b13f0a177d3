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
  int32_t num_generated = 0;  // delivered (tokens_in_flight more are being drawn)
  // Its row in the last step begun, where that row draws its next token (overlapped steps: the
  // next step's decode names it, ForwardBatch's placeholder).
  int32_t flight_row = -1;
  bool cancelled = false;
  bool finished = false;  // its stream has ended: a row of it in a step in flight is dropped
  uint64_t seed = 0;  // the request's, or drawn once at enqueue
  Clock::time_point t_enqueue, t_first;
};

// The request a queue entry is (the engine's queues hold only Requests).
inline Request& request_of(const SequencePtr& s) { return static_cast<Request&>(*s); }

}  // namespace flashserve::engine
