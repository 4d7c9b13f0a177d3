// One generation request as both transports (gRPC, the OpenAI-compatible HTTP front) serve it:
// enqueued on the engine, its stream of sampled ids turned into text deltas with stop strings
// (text::TextStream), and its latencies observed by the metrics. The transports only translate
// their wire format to a GenerationRequest and the chunks back.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/engine/engine.h"
#include "server/model/sampler.h"
#include "server/text/text_model.h"
#include "server/text/text_stream.h"

namespace flashserve::server {

class Metrics;

struct GenerationRequest {
  engine::GenerateRequest request;  // the prompt as ids, sampling, id, owner, cache salt
  std::vector<std::string> stop;    // stop strings: they need a tokenizer
  bool skip_special_tokens = true;  // the text leaves special tokens out
};

// What a transport sends for one engine event: the new ids (those before a stop string), their
// text, and on the final chunk why it ended and the usage.
struct GenerationChunk {
  std::vector<int32_t> tokens;
  std::vector<model::TokenLogprobs> logprobs;  // one per token when the request asked for them
  std::string text;                            // with a tokenizer; never a partial UTF-8 character
  bool finished = false;
  // On the final chunk: the engine's reason, or kStop with stopped_by_text for a stop string.
  engine::FinishReason reason = engine::FinishReason::kNone;
  bool stopped_by_text = false;
  Status error;  // reason == kError
  int32_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  double time_to_first_token_s = 0, elapsed_s = 0;
};

class Generation {
 public:
  // Checks the stop strings (FAILED_PRECONDITION-like kUnsupported without a tokenizer) and
  // enqueues the request: the engine's refusal (INVALID_ARGUMENT, RESOURCE_EXHAUSTED,
  // UNAVAILABLE) is returned as it is. `text` may be null or without a tokenizer: then chunks
  // carry ids only. engine, text and metrics must outlive the Generation.
  static Status start(engine::Engine* engine, const text::TextModel* text, Metrics* metrics, GenerationRequest request,
                      std::unique_ptr<Generation>* out);
  // Unfinished, it cancels the engine request; either way it waits for the engine's final event,
  // so that the request's blocks are free and its metrics observed when it returns.
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // The next chunk, waiting at most timeout_s (< 0: until one comes). False when none came in
  // time, and always after the final chunk.
  bool next(GenerationChunk* out, double timeout_s);
  // The client went away: the engine request is aborted at its next step boundary and the final
  // chunk says kAborted. Any thread.
  void cancel();
  bool done() const { return final_sent_; }
  const std::string& request_id() const { return id_; }
  int32_t prompt_tokens() const { return prompt_tokens_; }

 private:
  Generation() = default;
  bool next_event(engine::StreamEvent* ev, double timeout_s);
  void observe_final(const engine::StreamEvent& ev);

  engine::Engine* engine_ = nullptr;
  Metrics* metrics_ = nullptr;
  std::shared_ptr<engine::ResultStream> stream_;
  std::unique_ptr<text::TextStream> text_;
  std::string id_, owner_;
  int32_t prompt_tokens_ = 0;
  int32_t sent_tokens_ = 0;
  bool final_sent_ = false;     // the final chunk went to the transport
  bool engine_done_ = false;    // the engine's final event was read
  bool seen_token_ = false;
  std::atomic<bool> cancelled_{false};
  using Clock = std::chrono::steady_clock;
  Clock::time_point started_, first_token_, last_token_;
};

}  // namespace flashserve::server
