#include "server/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "server/engine/request.h"

namespace flashserve::engine {

namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kEos: return "eos";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAborted: return "aborted";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

// ---- ResultStream --------------------------------------------------------------------------

void ResultStream::push(StreamEvent ev) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = ev.finished;
    events_.push_back(std::move(ev));
  }
  cv_.notify_all();
}

bool ResultStream::next(StreamEvent* ev) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !events_.empty() || closed_; });
  if (events_.empty()) return false;
  *ev = std::move(events_.front());
  events_.pop_front();
  return true;
}

bool ResultStream::next_for(StreamEvent* ev, double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return !events_.empty() || closed_; }))
    return false;
  if (events_.empty()) return false;
  *ev = std::move(events_.front());
  events_.pop_front();
  return true;
}

// ---- Engine ---------------------------------------------------------------------------------

Status EngineConfig::validate() const {
  if (num_blocks < 2) return invalid_argument("engine: num_blocks must be >= 2");
  if (max_num_batched_tokens < 1) return invalid_argument("engine: max_num_batched_tokens must be >= 1");
  if (max_num_seqs < 1) return invalid_argument("engine: max_num_seqs must be >= 1");
  if (max_waiting < 1) return invalid_argument("engine: max_waiting must be >= 1");
  if (max_model_len < 0) return invalid_argument("engine: max_model_len must be >= 0");
  if (max_prefill_tokens < 0) return invalid_argument("engine: max_prefill_tokens must be >= 0");
  if (!(tpot_target_s >= 0) || !std::isfinite(tpot_target_s))
    return invalid_argument("engine: tpot_target_s must be a finite number >= 0");
  return Status::Ok();
}

Engine::Engine(const EngineConfig& config, std::unique_ptr<model::Model> model)
    : config_(config),
      model_(std::move(model)),
      cache_([&] {
        KVCacheConfig kc;
        kc.num_blocks = config.num_blocks;
        kc.block_size = config.block_size;
        kc.enable_prefix_caching = config.enable_prefix_caching;
        return kc;
      }()),
      scheduler_(
          [&] {
            SchedulerConfig sc;
            sc.max_num_batched_tokens = config.max_num_batched_tokens;
            sc.max_num_seqs = config.max_num_seqs;
            sc.max_prefill_tokens = config.max_prefill_tokens;
            sc.tpot_target_s = config.tpot_target_s;
            sc.prefill_floor = std::max(16, config.block_size);
            return sc;
          }(),
          &cache_, &step_cost_),
      builder_(model_.get()) {
  if (config_.max_model_len == 0) config_.max_model_len = model_->config().max_position_embeddings;
  stats_.prefill_budget_tokens = config_.max_prefill_tokens > 0
                                     ? std::min(config_.max_prefill_tokens, config_.max_num_batched_tokens)
                                     : config_.max_num_batched_tokens;
}

Status Engine::create(const EngineConfig& config, std::unique_ptr<model::Model> model, std::unique_ptr<Engine>* out) {
  if (model == nullptr) return invalid_argument("engine: no model");
  FS_RETURN_IF_ERROR(config.validate());
  KVCacheConfig kc;
  kc.num_blocks = config.num_blocks;
  kc.block_size = config.block_size;
  FS_RETURN_IF_ERROR(kc.validate());
  const KVStorageShape& s = model->kv_shape();
  if (s.num_blocks < config.num_blocks || s.block_size != config.block_size)
    return invalid_argument("engine: the model's KV storage does not match the engine's blocks");
  std::unique_ptr<Engine> e(new Engine(config, std::move(model)));
  e->thread_ = std::thread([raw = e.get()] { raw->loop(); });
  *out = std::move(e);
  return Status::Ok();
}

Engine::~Engine() { shutdown(); }

Status Engine::enqueue(GenerateRequest request, std::shared_ptr<ResultStream>* stream) {
  const model::LlamaConfig& mc = model_->config();
  const int64_t n = static_cast<int64_t>(request.prompt.size());
  if (n == 0) return invalid_argument("the prompt is empty");
  for (size_t i = 0; i < request.prompt.size(); ++i)
    if (request.prompt[i] < 0 || request.prompt[i] >= mc.vocab_size)
      return invalid_argument("prompt token " + std::to_string(i) + " = " + std::to_string(request.prompt[i]) +
                              " is outside the vocabulary [0, " + std::to_string(mc.vocab_size) + ")");
  FS_RETURN_IF_ERROR(request.sampling.validate(mc.vocab_size));
  if (request.sampling.min_tokens > 0) {  // until then the sampler masks eos and the stop ids
    std::vector<int32_t> banned = request.sampling.stop_token_ids;
    if (!request.sampling.ignore_eos) banned.insert(banned.end(), mc.eos_token_ids.begin(), mc.eos_token_ids.end());
    std::sort(banned.begin(), banned.end());
    if (std::unique(banned.begin(), banned.end()) - banned.begin() >= mc.vocab_size)
      return invalid_argument("min_tokens: the stop token ids" + std::string(request.sampling.ignore_eos ? "" : " and eos") +
                              " cover the whole vocabulary, so no token can be sampled before min_tokens");
  }
  const int64_t total = n + request.sampling.max_tokens;
  if (total > config_.max_model_len)
    return invalid_argument("prompt (" + std::to_string(n) + ") + max_tokens (" +
                            std::to_string(request.sampling.max_tokens) + ") exceeds the context limit " +
                            std::to_string(config_.max_model_len));
  const int64_t blocks = (total + config_.block_size - 1) / config_.block_size;
  if (blocks > config_.num_blocks - 1)
    return invalid_argument("the request needs " + std::to_string(total) + " tokens of KV cache; the pool holds " +
                            std::to_string(int64_t{config_.num_blocks - 1} * config_.block_size));
  auto r = std::make_shared<Request>();
  r->stream = std::make_shared<ResultStream>();
  r->tokens = std::move(request.prompt);
  r->num_prompt_tokens = static_cast<int32_t>(n);
  r->cache_salt = request.cache_salt;
  r->stop_ids.insert(request.sampling.stop_token_ids.begin(), request.sampling.stop_token_ids.end());
  r->seed = request.sampling.seed ? *request.sampling.seed
                                  : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  r->t_enqueue = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status(StatusCode::kUnavailable, "the engine is shutting down");
    if (request.request_id.empty()) request.request_id = "req-" + std::to_string(next_request_number_++);
    if (by_id_.count({request.owner, request.request_id}))
      return invalid_argument("request id " + request.request_id + " is already in use");
    if (static_cast<int32_t>(waiting_.size()) >= config_.max_waiting)
      return resource_exhausted("the waiting queue is full (" + std::to_string(config_.max_waiting) + ")");
    r->req = std::move(request);
    by_id_[{r->req.owner, r->req.request_id}] = r;
    waiting_.push_back(r);
    stats_.prompt_tokens += n;
  }
  *stream = r->stream;
  work_cv_.notify_all();
  return Status::Ok();
}

Status Engine::cancel(const std::string& request_id, const std::string& owner) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_id_.find({owner, request_id});
    if (it == by_id_.end()) return invalid_argument("no request " + request_id);
    it->second->cancelled = true;
  }
  work_cv_.notify_all();
  return Status::Ok();
}

int Engine::cancel_in_every_namespace(const std::string& request_id) {
  int n = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, r] : by_id_)
      if (key.second == request_id) {
        r->cancelled = true;
        ++n;
      }
  }
  if (n > 0) work_cv_.notify_all();
  return n;
}

void Engine::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineStats s = stats_;
  s.running = static_cast<int32_t>(running_.size());
  s.waiting = static_cast<int32_t>(waiting_.size());
  const KVCacheStats k = cache_.stats();
  s.kv_usage = k.usage();
  s.prefix_queries = k.prefix_queries;
  s.prefix_hits = k.prefix_hits;
  return s;
}

// Called with mu_ held. Frees the request's blocks and ends its stream.
void Engine::finish(Request& r, FinishReason reason, Status error) {
  // (With overlapped steps the step in flight may still write the blocks: on the device any later
  // step that reuses them is queued behind it.)
  if (r.seq_id) cache_.free_sequence(r.seq_id).ok();
  r.finished = true;
  r.seq_id = 0;
  StreamEvent ev;
  ev.finished = true;
  ev.reason = reason;
  ev.error = std::move(error);
  ev.prompt_tokens = r.num_prompt_tokens;
  ev.completion_tokens = r.num_generated;
  ev.cached_tokens = r.cached_tokens;
  const auto now = Clock::now();
  ev.elapsed_s = seconds(r.t_enqueue, now);
  ev.time_to_first_token_s = r.num_generated ? seconds(r.t_enqueue, r.t_first) : 0.0;
  outbox_.emplace_back(r.stream, std::move(ev));
  by_id_.erase({r.req.owner, r.req.request_id});
}

void Engine::flush_outbox() {
  for (auto& [stream, ev] : outbox_) stream->push(std::move(ev));
  outbox_.clear();
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      const auto ready = [&] { return stopping_ || !waiting_.empty() || !running_.empty() || in_flight_; };
      if (!ready()) {  // idle: the last events go out before the wait (else the next step sends them)
        lock.unlock();
        flush_outbox();
        model_->break_step_timing();  // the wait is not the host's work between steps
        lock.lock();
        work_cv_.wait(lock, ready);
      }
      if (stopping_) {
        if (in_flight_) {  // its tokens go out before the rest is aborted
          lock.unlock();
          end_in_flight();
          lock.lock();
        }
        for (auto& r : running_) finish(request_of(r), FinishReason::kAborted);
        for (auto& r : waiting_) finish(request_of(r), FinishReason::kAborted);
        running_.clear();
        waiting_.clear();
        lock.unlock();
        flush_outbox();
        return;
      }
    }
    if (!step()) {
      // Nothing could be scheduled (every waiting request needs blocks that running ones hold):
      // wait for a change rather than spin.
      flush_outbox();
      model_->break_step_timing();
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait_for(lock, std::chrono::milliseconds(5));
    }
  }
}

bool Engine::step() {
  const auto t0 = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  // Cancellations first: their blocks are free for this step.
  auto drop_cancelled = [&](auto& list) {
    for (auto it = list.begin(); it != list.end();) {
      if (request_of(*it).cancelled) {
        finish(request_of(*it), FinishReason::kAborted);
        it = list.erase(it);
      } else {
        ++it;
      }
    }
  };
  drop_cancelled(running_);
  drop_cancelled(waiting_);

  StepPlan plan = scheduler_.schedule(running_, waiting_);
  const StepShape shape = plan.shape();  // before deliver() appends the sampled tokens
  if (!plan.decodes.empty()) stats_.prefill_budget_tokens = plan.prefill_budget;
  stats_.preemptions += static_cast<int64_t>(plan.preempted.size());
  for (const auto& [s, st] : plan.failed) finish(request_of(s), FinishReason::kError, st);
  const auto t_scheduled = Clock::now();
  stats_.step_schedule_s += seconds(t0, t_scheduled);
  if (plan.empty()) {
    lock.unlock();
    if (in_flight_) {  // all there is to run waits on its draws (or nothing is left)
      end_in_flight();
      return true;
    }
    flush_outbox();  // a step that runs nothing sends what there is (failed requests' ends)
    return plan.made_room;
  }

  builder_.build(plan, cache_);
  if (!plan.copies.empty()) {
    const Status cst = model_->copy_blocks(plan.copies.data(), static_cast<int32_t>(plan.copies.size()));
    if (!cst.ok()) {  // the step cannot run on a cache it could not copy: fail its requests
      plan.for_each_scheduled([&](const ScheduledSequence& s) {
        finish(request_of(s.seq), FinishReason::kError, cst);
        running_.erase(std::remove(running_.begin(), running_.end(), s.seq), running_.end());
      });
      cache_.reset_prefix_cache();  // its planned blocks were hashed, never written (as deliver's)
      lock.unlock();
      flush_outbox();
      return true;
    }
  }
  ++stats_.steps;
  const auto t_built = Clock::now();
  stats_.step_build_s += seconds(t_scheduled, t_built);

  if (config_.overlap_steps) {
    // The rows that draw: the next step's decodes name them by placeholder; a request that has
    // drawn its last token by length is not decoded again.
    int32_t row = 0;
    plan.for_each_scheduled([&](const ScheduledSequence& sch) {
      Request& r = request_of(sch.seq);
      if (sch.samples) {
        r.flight_row = row;
        ++r.tokens_in_flight;
        r.decode_pending = r.num_generated + r.tokens_in_flight < r.req.sampling.max_tokens;
      }
      ++row;
    });
    lock.unlock();
    // Queued behind step n (in flight), then step n's draws delivered while this one runs.
    const Status bst = model_->begin_step(builder_.batch(), builder_.rows());
    const double begin_s = seconds(t_built, Clock::now());
    if (in_flight_) end_in_flight();
    if (bst.ok()) {
      in_flight_ = InFlight{std::move(plan), shape, t_built, begin_s};
      return true;
    }
    lock.lock();
    std::vector<int32_t> none;
    std::vector<model::TokenLogprobs> no_logprobs;
    deliver(plan, bst, none, no_logprobs);
    account_forward(false, begin_s, begin_s);
    lock.unlock();
    flush_outbox();
    return true;
  }

  // The forward pass and the draws, without the lock (enqueue and cancel stay responsive). Where
  // the model's steps are asynchronous (the CUDA model: begin_step queues the step) the last
  // step's events go to their streams between begin_step and end_step, beside the device's work
  // and inside the forward phase's wall time (which the step cost model sees: the step thread's
  // real cost, the pushes included where the device did not hide them); a synchronous model's
  // go out right after their own step, outside the lock.
  lock.unlock();
  std::vector<int32_t> sampled;
  std::vector<model::TokenLogprobs> logprobs;  // one a row; token -1 where the row did not ask
  const bool async = model_->async_steps();
  Status fst = model_->begin_step(builder_.batch(), builder_.rows());
  const double begin_s = seconds(t_built, Clock::now());
  if (async) flush_outbox();
  if (fst.ok()) fst = model_->end_step(&sampled, &logprobs);
  if (fst.ok() && (sampled.size() != builder_.rows().size() || logprobs.size() != sampled.size()))
    fst = internal_error("the model returned " + std::to_string(sampled.size()) + " tokens and " +
                         std::to_string(logprobs.size()) + " logprobs for " +
                         std::to_string(builder_.rows().size()) + " rows");
  const auto t_forward = Clock::now();
  const double forward = seconds(t_built, t_forward);
  if (fst.ok()) step_cost_.observe(shape, forward);
  lock.lock();
  account_forward(fst.ok(), forward, begin_s);
  deliver(plan, fst, sampled, logprobs);
  if (!async) {
    lock.unlock();
    flush_outbox();
    lock.lock();
  }
  stats_.step_deliver_s += seconds(t_forward, Clock::now());
  return true;
}

// Called with mu_ held, after the forward pass: each sampled token goes out on its request's
// stream (with its logprobs when asked; a row that does not sample delivers nothing, so a
// recomputed prompt adds no entry), and a request that ends there (eos, a stop id, max_tokens;
// or the step failed) finishes.
void Engine::deliver(const StepPlan& plan, const Status& forward, const std::vector<int32_t>& sampled,
                     std::vector<model::TokenLogprobs>& logprobs) {
  std::vector<SequencePtr> done;
  size_t i = 0;
  const bool overlap = config_.overlap_steps;
  plan.for_each_scheduled([&](const ScheduledSequence& s) {
    Request& r = request_of(s.seq);
    const size_t row = i++;
    if (r.finished) return;  // ended (or cancelled) while this step ran: its row is dropped
    if (!forward.ok()) {
      done.push_back(s.seq);
      finish(r, FinishReason::kError, internal_error("model forward: " + forward.to_string()));
      return;
    }
    if (!overlap) r.decode_pending = false;  // (overlapped: set when the step was planned)
    if (!s.samples) return;
    if (overlap) --r.tokens_in_flight;
    const SamplingParams& sp = r.req.sampling;
    const int32_t tok = sampled[row];
    r.tokens.push_back(tok);
    if (r.num_generated++ == 0) r.t_first = Clock::now();
    ++stats_.generation_tokens;
    FinishReason reason = FinishReason::kNone;
    const auto& eos = model_->config().eos_token_ids;
    if (!sp.ignore_eos && std::find(eos.begin(), eos.end(), tok) != eos.end()) reason = FinishReason::kEos;
    else if (r.stop_ids.count(tok))
      reason = FinishReason::kStop;
    else if (r.num_generated >= sp.max_tokens) reason = FinishReason::kLength;
    StreamEvent ev;
    ev.tokens = {tok};
    if (sp.logprobs >= 0) ev.logprobs.push_back(std::move(logprobs[row]));
    outbox_.emplace_back(r.stream, std::move(ev));
    if (reason == FinishReason::kNone) {
      if (!overlap) r.decode_pending = true;
    } else {
      finish(r, reason);
      done.push_back(s.seq);
    }
  });
  for (const auto& d : done) {
    running_.erase(std::remove(running_.begin(), running_.end(), d), running_.end());
    // (Overlapped steps: one preempted while its last token was drawn waits for readmission.)
    if (overlap) waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), d), waiting_.end());
  }
  // A failed step's K/V are not to be trusted, and its full blocks were hashed when it was planned:
  // now free (its requests have ended), they leave the prefix cache, lest a later prompt take
  // them as its prefix. (Overlapped, a step begun before the failure was known may already have
  // taken them: a device error that fails one step fails the next too.)
  if (!forward.ok()) cache_.reset_prefix_cache();
}

void Engine::end_in_flight() {
  InFlight f = std::move(*in_flight_);
  in_flight_.reset();
  const auto t0 = Clock::now();
  std::vector<int32_t> sampled;
  std::vector<model::TokenLogprobs> logprobs;
  const size_t rows = f.plan.decodes.size() + f.plan.prefills.size();
  Status fst = model_->end_step(&sampled, &logprobs);
  if (fst.ok() && (sampled.size() != rows || logprobs.size() != rows))
    fst = internal_error("the model returned " + std::to_string(sampled.size()) + " tokens and " +
                         std::to_string(logprobs.size()) + " logprobs for " + std::to_string(rows) + " rows");
  const auto t_end = Clock::now();
  // The step's cost for the step cost model: where the model times its steps on the device (the
  // CUDA model), its upload and run there; else an asynchronous model's step ran from when it was
  // queued or the step before it ended, whichever came later, to now (back to back, the device's
  // time a step), and a synchronous model's inside begin_step. (Not the host's wall time around
  // the step: begin_step of the step after it may wait for the device, e.g. for logprobs.)
  model::Model::StepDeviceTime device;
  double cost = f.begin_s;
  if (fst.ok() && model_->last_step_device_time(&device)) cost = device.prepare_s + device.run_s;
  else if (model_->async_steps()) cost = seconds(std::max(f.t_begin, t_last_end_), t_end);
  t_last_end_ = t_end;
  if (fst.ok()) step_cost_.observe(f.shape, cost);
  std::unique_lock<std::mutex> lock(mu_);
  account_forward(fst.ok(), f.begin_s + seconds(t0, t_end), f.begin_s);
  deliver(f.plan, fst, sampled, logprobs);
  stats_.step_deliver_s += seconds(t_end, Clock::now());
  lock.unlock();
  flush_outbox();
}

void Engine::account_forward(bool ok, double forward_s, double begin_s) {
  model::Model::StepDeviceTime device;
  if (ok && model_->last_step_device_time(&device)) {
    stats_.step_device_idle_s += device.idle_s;
    stats_.step_device_prepare_s += device.prepare_s;
    stats_.step_device_run_s += device.run_s;
    ++stats_.device_timed_steps;
  }
  stats_.step_forward_s += forward_s;
  stats_.step_begin_s += begin_s;
  stats_.step_cost = step_cost_.coefficients();
  stats_.step_cost_samples = step_cost_.num_samples();
}

}  // namespace flashserve::engine
