#include "server/generation.h"

#include <spdlog/spdlog.h>

#include "server/grpc/metrics.h"

namespace flashserve::server {

Status Generation::start(engine::Engine* engine, const text::TextModel* text, Metrics* metrics,
                         GenerationRequest request, std::unique_ptr<Generation>* out) {
  const bool has_text = text != nullptr && text->has_tokenizer();
  if (!request.stop.empty() && !has_text)
    return unsupported("stop strings need a tokenizer, and this model has none: use stop_token_ids");
  FS_RETURN_IF_ERROR(text::validate_stop_strings(request.stop));
  std::unique_ptr<Generation> g(new Generation());
  g->engine_ = engine;
  g->metrics_ = metrics;
  if (has_text)
    g->text_ = std::make_unique<text::TextStream>(text->tokenizer(), std::move(request.stop),
                                                  request.skip_special_tokens, request.request.sampling.min_tokens);
  g->id_ = request.request.request_id;
  g->owner_ = request.request.owner;
  g->prompt_tokens_ = static_cast<int32_t>(request.request.prompt.size());
  if (Status st = engine->enqueue(std::move(request.request), &g->stream_); !st.ok()) {
    spdlog::info("request {} ({}) rejected: {}", g->id_, g->owner_, st.to_string());
    g->final_sent_ = g->engine_done_ = true;  // nothing to wait for
    return st;
  }
  // The engine assigns an id to a request that has none: it is only known from its log then.
  spdlog::info("request {} ({}) started ({} prompt tokens)", g->id_, g->owner_, g->prompt_tokens_);
  g->started_ = g->first_token_ = g->last_token_ = Clock::now();
  *out = std::move(g);
  return Status::Ok();
}

Generation::~Generation() {
  if (engine_done_) return;
  if (!final_sent_) cancel();
  engine::StreamEvent ev;
  while (next_event(&ev, -1)) {
    if (ev.finished) break;
  }
}

void Generation::cancel() {
  if (!cancelled_.exchange(true)) engine_->cancel(id_, owner_).ok();  // finished already: nothing
}

bool Generation::next_event(engine::StreamEvent* ev, double timeout_s) {
  if (engine_done_) return false;
  const bool got = timeout_s < 0 ? stream_->next(ev) : stream_->next_for(ev, timeout_s);
  if (!got) return false;
  if (!ev->tokens.empty() && !final_sent_) {
    const auto now = Clock::now();
    if (seen_token_) metrics_->observe_inter_token(std::chrono::duration<double>(now - last_token_).count());
    if (!seen_token_) first_token_ = now;
    last_token_ = now;
    seen_token_ = true;
  }
  if (ev->finished) {
    engine_done_ = true;
    observe_final(*ev);
  }
  return true;
}

void Generation::observe_final(const engine::StreamEvent& ev) {
  spdlog::info("request {} finished: {}, {} tokens", id_,
               text_ != nullptr && text_->stopped() ? "stop (text)" : engine::finish_reason_name(ev.reason),
               sent_tokens_);
  if (ev.completion_tokens > 0) metrics_->observe_first_token(ev.time_to_first_token_s);
  metrics_->observe_finished(ev);
}

bool Generation::next(GenerationChunk* out, double timeout_s) {
  if (final_sent_) return false;
  engine::StreamEvent ev;
  if (!next_event(&ev, timeout_s)) return false;
  *out = GenerationChunk();
  size_t used = ev.tokens.size();
  if (text_ != nullptr) {
    bool hit = false;
    if (const Status st = text_->add(ev.tokens, &out->text, &hit, &used); !st.ok()) {
      cancel();
      out->finished = true;
      out->reason = engine::FinishReason::kError;
      out->error = internal_error("request " + id_ + ": detokenize: " + st.message());
      used = 0;
    } else if (hit) {
      out->stopped_by_text = true;
      cancel();  // the engine lets go at its next step; the destructor waits for it
    } else if (ev.finished) {
      text_->finish(&out->text);
    }
  }
  out->tokens.assign(ev.tokens.begin(), ev.tokens.begin() + static_cast<std::ptrdiff_t>(used));
  if (!ev.logprobs.empty())
    out->logprobs.assign(ev.logprobs.begin(), ev.logprobs.begin() + static_cast<std::ptrdiff_t>(used));
  sent_tokens_ += static_cast<int32_t>(used);
  if (out->reason == engine::FinishReason::kError) {
    // the detokenizer failed: final now
  } else if (out->stopped_by_text) {
    out->finished = true;
    out->reason = engine::FinishReason::kStop;
  } else if (ev.finished) {
    out->finished = true;
    out->reason = ev.reason;
    out->error = ev.error;
  }
  if (!out->finished) return true;
  final_sent_ = true;
  out->prompt_tokens = prompt_tokens_;
  out->completion_tokens = sent_tokens_;
  if (ev.finished) {
    out->cached_tokens = ev.cached_tokens;
    out->time_to_first_token_s = ev.time_to_first_token_s;
    out->elapsed_s = ev.elapsed_s;
  } else {  // a stop string before the engine's own final event: this side's clock
    auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
    out->time_to_first_token_s = seconds(started_, first_token_);
    out->elapsed_s = seconds(started_, Clock::now());
  }
  return true;
}

}  // namespace flashserve::server
