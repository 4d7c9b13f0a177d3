// The engine: a transport-free API (enqueue a request, read its stream of results, cancel)
// over continuous batching (TensorRT-LLM's executor and vLLM's scheduler are the models).
//
// One thread runs steps. Each step the scheduler (server/engine/scheduler.h: decodes first,
// then prompt chunks up to a token budget, admission by free blocks, recompute preemption when
// the pool runs out) plans the work, the step's batch is built from the plan, the model runs it,
// and each sampled token goes out on its request's stream; a finished request's blocks are
// freed. Preemption never fails a request for want of blocks: it is prefilled again later.
// cancel() aborts a request at the next step boundary and frees its blocks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kvcache/kv_cache_manager.h"
#include "server/engine/batch_builder.h"
#include "server/engine/sampling.h"
#include "server/engine/scheduler.h"
#include "server/model/model.h"

namespace flashserve::engine {

enum class FinishReason { kNone = 0, kEos, kStop, kLength, kAborted, kError };
const char* finish_reason_name(FinishReason r);

struct GenerateRequest {
  std::string request_id;
  // The namespace of request_id: requests are keyed by (owner, request_id), so two owners may
  // use the same id at once and cancel() reaches only its owner's. The gRPC transport sets the
  // caller's identity (server/grpc/caller.h); an embedder with one namespace leaves it empty.
  std::string owner;
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  uint64_t cache_salt = 0;  // extra prefix-cache key (model, adapter, tenant)
};

// One message of a request's stream: new tokens, and on the last one the finish reason and
// usage.
struct StreamEvent {
  std::vector<int32_t> tokens;
  // When the request asked (SamplingParams::logprobs >= 0): logprobs[i] is tokens[i]'s
  // (logprobs[i].token == tokens[i]; top holds sampling.logprobs entries). Empty otherwise. One
  // entry a generated token, a preempted and recomputed request included.
  std::vector<model::TokenLogprobs> logprobs;
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
  Status error;                    // set when reason == kError
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;       // prompt tokens served from the prefix cache (first admission)
  double time_to_first_token_s = 0;
  double elapsed_s = 0;
};

class ResultStream {
 public:
  // Blocks until an event arrives; false when the stream is finished and drained.
  bool next(StreamEvent* ev);
  // Waits at most timeout_s; false on a timeout or the end.
  bool next_for(StreamEvent* ev, double timeout_s);

 private:
  friend class Engine;
  void push(StreamEvent ev);
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  bool closed_ = false;
};

struct EngineConfig {
  int32_t num_blocks = 256;           // KV blocks (incl. the null block)
  int32_t block_size = 16;
  bool enable_prefix_caching = true;
  int32_t max_num_batched_tokens = 256;  // tokens per step (decodes + prefill chunks)
  int32_t max_num_seqs = 64;             // running requests
  // Prompt-chunk tokens a step that has decodes may take (SchedulerConfig, issue 27): at most
  // max_prefill_tokens (0: no limit but the token budget), and with tpot_target_s > 0 what the
  // step cost model (fitted on this engine's steps, step_cost.h) predicts keeps the forward pass
  // within it, at least max(16, block_size) tokens.
  int32_t max_prefill_tokens = 0;
  double tpot_target_s = 0;
  // Overlapped steps (issue 27: the host's work off the critical path): step n + 1 is scheduled,
  // built and begun (queued on the device) before step n's draws are back, its decodes naming
  // step n's draws by placeholder (ForwardBatch), which the model puts in on the device; step
  // n's tokens go to their streams while step n + 1 runs. The device then goes from step to step
  // without waiting for the host. The cost: a request that step n ends (eos, a stop id) has
  // already a row in step n + 1, computed and dropped (its length limit is known ahead, and
  // never costs one). Tokens, seeded draws included, are those of steps run one at a time.
  // Off here; the server turns it on for CUDA models (measured: bench/NOTES.md "Overlapped
  // steps"). On a synchronous model (the CPU's: begin_step runs the whole step) it gains nothing,
  // and each step's tokens go out after the next step has run.
  bool overlap_steps = false;
  int32_t max_waiting = 1024;            // queue limit: RESOURCE_EXHAUSTED past it
  int32_t max_model_len = 0;             // 0: the model's max_position_embeddings
  Status validate() const;
};

struct EngineStats {
  int32_t running = 0, waiting = 0;
  double kv_usage = 0;
  int64_t prefix_queries = 0, prefix_hits = 0;
  int64_t preemptions = 0;
  int64_t prompt_tokens = 0, generation_tokens = 0;
  int64_t steps = 0;
  // Wall time the step thread spent in each part of its steps, summed (seconds): scheduling
  // (cancellations, the scheduler), building the batch (block tables, copy-on-write copies), the
  // model's forward pass and draws (on a GPU: uploads, kernels and the sampled ids' copy back),
  // and delivering (the engine lock taken back, the tokens pushed to the streams). The host's
  // share of a step is all but the forward. /metrics: flashserve:step_seconds_total{phase}.
  double step_schedule_s = 0, step_build_s = 0, step_forward_s = 0, step_deliver_s = 0;
  // Of step_forward_s, the time in the model's begin_step: on a GPU its host work for the step
  // (plan, metadata, the upload, the launches), on the CPU the whole step.
  // /metrics: flashserve:step_begin_seconds_total.
  double step_begin_s = 0;
  // Where the model times its steps on the device (Model::last_step_device_time; the CUDA
  // model): the device idle between steps, begin_step's host work and upload, and the kernels
  // and draws, summed (seconds), over device_timed_steps steps. /metrics:
  // flashserve:step_device_seconds_total{part}, flashserve:device_timed_steps_total.
  double step_device_idle_s = 0, step_device_prepare_s = 0, step_device_run_s = 0;
  int64_t device_timed_steps = 0;
  // The prefill budget of the latest step that had decodes (before one: the configured limit),
  // and the step cost model's fit (StepCostModel::coefficients; zeros until it is ready).
  // /metrics: flashserve:prefill_budget_tokens, flashserve:step_cost_seconds{term}.
  int32_t prefill_budget_tokens = 0;
  StepCostModel::Coefficients step_cost{};
  int64_t step_cost_samples = 0;
};

struct Request;  // server/engine/request.h

class Engine {
 public:
  // Takes the model (its KV storage must hold config.num_blocks blocks of block_size).
  static Status create(const EngineConfig& config, std::unique_ptr<model::Model> model, std::unique_ptr<Engine>* out);
  ~Engine();

  // Validates the request before it touches the cache: an empty prompt, ids past the
  // vocabulary, prompt + max_tokens past the context limit or the whole pool, nonsense
  // sampling values, a duplicate id: INVALID_ARGUMENT; the queue full: RESOURCE_EXHAUSTED;
  // shutting down: UNAVAILABLE. An empty request_id gets a sequential one (for embedders; the gRPC
  // transport assigns random ones). The duplicate check is within the request's owner: another
  // owner's live request of the same id is no duplicate.
  Status enqueue(GenerateRequest request, std::shared_ptr<ResultStream>* stream);
  // Aborts the owner's request of that id (its stream ends with kAborted). INVALID_ARGUMENT for
  // an id the owner has no live request of, whether or not another owner has one.
  Status cancel(const std::string& request_id, const std::string& owner = {});
  // Aborts the live requests of that id of every owner (an operator's abort); how many.
  int cancel_in_every_namespace(const std::string& request_id);
  // Stops taking requests, aborts what is left, joins the scheduler.
  void shutdown();

  EngineStats stats() const;
  const model::LlamaConfig& model_config() const { return model_->config(); }
  // The model's KV storage: its dtype (the cache dtype), blocks and block size.
  const KVStorageShape& kv_shape() const { return model_->kv_shape(); }
  const EngineConfig& config() const { return config_; }

 private:
  Engine(const EngineConfig& config, std::unique_ptr<model::Model> model);
  void loop();
  bool step();  // false when there was nothing to do
  void deliver(const StepPlan& plan, const Status& forward, const std::vector<int32_t>& sampled,
               std::vector<model::TokenLogprobs>& logprobs);
  // Overlapped steps: the step begun and not ended (its plan, its shape, when it was begun and
  // how long begin_step took), and when the one before it ended.
  struct InFlight {
    StepPlan plan;
    StepShape shape;
    std::chrono::steady_clock::time_point t_begin;
    double begin_s = 0;
  };
  std::optional<InFlight> in_flight_;
  std::chrono::steady_clock::time_point t_last_end_;
  // Ends the step in flight (end_step) and delivers its tokens. Step thread, mu_ not held.
  void end_in_flight();
  void finish(Request& r, FinishReason reason, Status error = Status::Ok());
  // The step thread's events not yet on their streams, in order: pushed by flush_outbox, which
  // the thread calls, for an asynchronous model, while the device runs the next step (between
  // the model's begin_step and end_step: issue 27, the host's share of a step), else right after
  // the step, outside the lock; and before it waits for work or when a step runs nothing. Step
  // thread only.
  void flush_outbox();
  std::vector<std::pair<std::shared_ptr<ResultStream>, StreamEvent>> outbox_;
  // A step's forward time (the step thread's wall time in begin_step and end_step) and of it
  // begin_step's, the model's device timing of the step end_step ended (where it ended well), and
  // the cost model's fit. mu_ held.
  void account_forward(bool ok, double forward_s, double begin_s);

  EngineConfig config_;
  std::unique_ptr<model::Model> model_;
  KVCacheManager cache_;
  StepCostModel step_cost_;  // the step thread's: fed each step's forward time
  Scheduler scheduler_;  // over cache_ and step_cost_
  BatchBuilder builder_;  // for model_; its batch is the step thread's

  mutable std::mutex mu_;  // guards everything below (and the cache's stats reads)
  std::condition_variable work_cv_;
  WaitingQueue waiting_;   // of Requests
  RunningQueue running_;   // of Requests
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Request>> by_id_;  // (owner, request_id)
  bool stopping_ = false;
  int64_t next_request_number_ = 1;  // an empty request_id's "req-N" (before session 28: the
                                     // scheduler's next cache id, the same for every request
                                     // enqueued before the next admission: a duplicate)
  EngineStats stats_;
  std::thread thread_;
};

}  // namespace flashserve::engine
