// The scheduler (vLLM's Scheduler.schedule is the model): one step's decisions, made over the
// running and waiting queues and the KV cache manager, returned as plain data (a StepPlan) that
// the batch builder turns into the model's input. It sees no model, no thread and no stream,
// so it is tested on its own (tests/test_scheduler.cc).
//
// A step, in this order:
//  1. Decodes: one token for every running sequence with a sampled token pending, in running
//     order, while the token budget lasts. When the pool has no block for one, the newest running
//     sequence is preempted by recompute (its blocks freed; it goes back to the front of the
//     waiting queue with all its tokens, to be prefilled again), and again, until the token fits
//     or the sequence itself was the one preempted (then so were all newer ones: decoding stops).
//  2. Prompt chunks: running sequences mid-prompt in running order, then waiting ones in queue
//     order (admission) while fewer than max_num_seqs run (one whose last token is still being
//     drawn waits for it, and so do those behind it). A waiting one first takes its longest
//     cached prefix. When decodes run, the chunks together take at most the step's prefill
//     budget (max_prefill_tokens; with a TPOT target, what the step cost model allows, at least
//     prefill_floor, so prompts always move); in a step without decodes, the whole rest of the
//     token budget (nobody waits on that step). Each chunk is as long as the rest of the budget
//     allows, halved (down to 16 tokens, then one at a time) until its blocks are free. A waiting
//     sequence that cannot get a single token stops admission: first come, first served, no later
//     one overtakes it. The chunks go to the oldest first, so a budget slows prompts but starves
//     none: the one ahead finishes its prompt in a bounded number of steps.
//  3. Nothing scheduled and more than one running: the newest is preempted, so that the others
//     can go on (sequences mid-prompt can hold every block between them). The engine rejects a
//     request that would not fit the pool alone, so this always ends. Not while a step in flight
//     draws a running sequence's token (overlapped steps): the engine ends that step first.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kvcache/kv_cache_manager.h"
#include "server/engine/step_cost.h"

namespace flashserve::engine {

// What the scheduler reads and writes of a request (the engine's Request extends it).
struct SequenceState {
  // The prompt, then every generated token: their one copy (the cache manager reads it). While a
  // decode is pending the last one has no slot yet: the manager's count is one behind.
  std::vector<int32_t> tokens;
  uint64_t cache_salt = 0;       // extra prefix-cache key (model, adapter, tenant)
  int64_t seq_id = 0;            // in the cache manager; 0 while waiting
  // The next step decodes a sampled token without a slot: tokens.back(), or with overlapped steps
  // the token a step in flight draws (tokens_in_flight > 0).
  bool decode_pending = false;
  // Tokens drawn by steps begun and not ended (the engine's overlapped steps), not in tokens yet:
  // a decode of one has a slot before its id is known (the model reads the id on the device).
  // A waiting sequence with one (preempted while it was drawn) is not admitted until it is in.
  int32_t tokens_in_flight = 0;
  bool admitted_once = false;
  int32_t cached_tokens = 0;     // prompt tokens the prefix cache held at the first admission
};

using SequencePtr = std::shared_ptr<SequenceState>;
using RunningQueue = std::vector<SequencePtr>;  // admission order: the newest last
using WaitingQueue = std::deque<SequencePtr>;   // arrival order; preempted ones at the front

struct ScheduledSequence {
  SequencePtr seq;
  int32_t num_tokens = 0;  // new tokens this step: 1 for a decode, the chunk's length for a prompt
  bool samples = false;    // the step ends with a sampled token (a decode, or a prompt's last chunk)
};

// One step's work. The batch is decodes then prefills; slot_mapping follows the same order.
struct StepPlan {
  std::vector<ScheduledSequence> decodes;   // running order
  std::vector<ScheduledSequence> prefills;  // running sequences mid-prompt, then the admitted ones
  std::vector<SequencePtr> preempted;       // in the order preempted; now at the waiting queue's front
  // Sequences the cache refused with an error (not for want of blocks): out of both queues, their
  // blocks freed; the engine finishes them with this status.
  std::vector<std::pair<SequencePtr, Status>> failed;
  std::vector<int64_t> slot_mapping;        // [tokens of the step] where each new token's K/V goes
  std::vector<BlockCopy> copies;            // copy-on-write pairs, applied before the step writes
  bool made_room = false;                   // nothing fit, so the newest running one was preempted (3.)
  int32_t prefill_budget = 0;               // the most prompt-chunk tokens this step could take (2.)
  StepShape shape() const;                  // what the step cost model is told about the step
  bool empty() const { return decodes.empty() && prefills.empty(); }
  // f(const ScheduledSequence&) for each in batch order: the decodes, then the prefills.
  template <class F>
  void for_each_scheduled(F&& f) const {
    for (const auto* list : {&decodes, &prefills})
      for (const ScheduledSequence& s : *list) f(s);
  }
};

struct SchedulerConfig {
  int32_t max_num_batched_tokens = 256;  // tokens a step (decodes + prompt chunks)
  int32_t max_num_seqs = 64;             // running sequences
  // The prefill budget of a step that has decodes (issue 27): prompt-chunk tokens at most, on
  // top of what the decodes leave of max_num_batched_tokens. 0: no limit but that.
  int32_t max_prefill_tokens = 0;
  // > 0 (seconds), with a cost model: the budget is the most prompt tokens whose predicted
  // forward time, with the step's decodes, stays <= this (StepCostModel::prefill_budget), at least
  // prefill_floor.
  double tpot_target_s = 0;
  int32_t prefill_floor = 16;
};

class Scheduler {
 public:
  // The cache (and the cost model, which a TPOT target reads) must outlive the scheduler; all
  // belong to the engine's step thread.
  Scheduler(const SchedulerConfig& config, KVCacheManager* cache, const StepCostModel* cost = nullptr)
      : config_(config), cache_(cache), cost_(cost) {}

  // Plans one step and applies its bookkeeping: admitted sequences move from waiting to running
  // (with a cache sequence), preempted ones back (without), failed ones leave both; the slots of
  // every scheduled token are allocated.
  StepPlan schedule(RunningQueue& running, WaitingQueue& waiting);

  // The id the next admitted sequence gets in the cache manager (ids are never reused).
  int64_t next_seq_id() const { return next_seq_id_; }

 private:
  void preempt(RunningQueue& running, WaitingQueue& waiting, StepPlan* plan);
  bool schedule_chunk(const SequencePtr& s, int32_t* budget, StepPlan* plan);
  int32_t prefill_budget(const StepPlan& plan, int32_t left) const;

  SchedulerConfig config_;
  KVCacheManager* cache_;
  const StepCostModel* cost_;
  int64_t next_seq_id_ = 1;
};

}  // namespace flashserve::engine
