#include "server/engine/scheduler.h"

#include <algorithm>

namespace flashserve::engine {

// Recompute preemption of the newest running sequence: it keeps its tokens (prompt and
// everything generated, the pending one included) and is prefilled again when readmitted.
void Scheduler::preempt(RunningQueue& running, WaitingQueue& waiting, StepPlan* plan) {
  SequencePtr victim = running.back();
  running.pop_back();
  cache_->free_sequence(victim->seq_id).ok();
  victim->seq_id = 0;
  victim->decode_pending = false;
  waiting.push_front(victim);
  plan->preempted.push_back(std::move(victim));
}

// As many of the sequence's tokens without slots as the budget and the free blocks allow;
// false when not even one fits.
bool Scheduler::schedule_chunk(const SequencePtr& s, int32_t* budget, StepPlan* plan) {
  const int32_t done = cache_->num_slotted_tokens(s->seq_id);
  const int32_t remaining = static_cast<int32_t>(s->tokens.size()) - done;
  int32_t n = std::min(remaining, *budget);
  while (n > 0 && !cache_->can_allocate(s->seq_id, n)) n = n > 16 ? n / 2 : n - 1;  // what fits now
  if (n <= 0) return false;
  if (!cache_->allocate_slots(s->seq_id, s->tokens, n, &plan->slot_mapping, &plan->copies).ok()) return false;
  plan->prefills.push_back({s, n, n == remaining});
  *budget -= n;
  return true;
}

StepShape StepPlan::shape() const {
  StepShape s;
  s.decode_tokens = static_cast<int32_t>(decodes.size());
  for (const ScheduledSequence& d : decodes)
    s.decode_context_tokens += static_cast<int64_t>(d.seq->tokens.size()) + d.seq->tokens_in_flight;
  for (const ScheduledSequence& p : prefills) s.prefill_tokens += p.num_tokens;
  return s;
}

// What prompt chunks may take once the decodes have `left` of the token budget.
int32_t Scheduler::prefill_budget(const StepPlan& plan, int32_t left) const {
  if (plan.decodes.empty()) return left;
  int32_t cap = left;
  if (config_.max_prefill_tokens > 0) cap = std::min(cap, config_.max_prefill_tokens);
  if (config_.tpot_target_s > 0 && cost_ != nullptr)
    cap = cost_->prefill_budget(plan.shape(), config_.tpot_target_s, config_.prefill_floor, cap);
  return cap;
}

StepPlan Scheduler::schedule(RunningQueue& running, WaitingQueue& waiting) {
  StepPlan plan;
  int32_t budget = config_.max_num_batched_tokens;

  // 1. Decodes, preempting the newest running sequences when the pool is out of blocks.
  for (size_t i = 0; i < running.size() && budget > 0; ++i) {
    const SequencePtr s = running[i];
    if (!s->decode_pending) continue;
    while (!cache_->can_allocate(s->seq_id, 1)) {
      const bool self = running.back() == s;
      preempt(running, waiting, &plan);
      if (self) break;
    }
    if (s->seq_id == 0) break;  // s itself was preempted: the rest are newer, gone too
    const Status st =
        cache_->allocate_slots(s->seq_id, s->tokens, 1, &plan.slot_mapping, &plan.copies, s->tokens_in_flight);
    if (!st.ok()) {
      cache_->free_sequence(s->seq_id).ok();
      s->seq_id = 0;
      plan.failed.emplace_back(s, st);
      running.erase(running.begin() + static_cast<long>(i--));
      continue;
    }
    plan.decodes.push_back({s, 1, true});
    --budget;
  }

  // 2. Prompt chunks: running sequences mid-prompt, then waiting ones (admission by blocks),
  // within the step's prefill budget.
  plan.prefill_budget = prefill_budget(plan, budget);
  budget = plan.prefill_budget;
  for (const SequencePtr& s : running)
    if (budget > 0 && !s->decode_pending) schedule_chunk(s, &budget, &plan);
  while (budget > 0 && !waiting.empty() && static_cast<int32_t>(running.size()) < config_.max_num_seqs) {
    const SequencePtr s = waiting.front();
    if (s->tokens_in_flight > 0) break;  // its prompt is not all known yet
    const int64_t id = next_seq_id_++;
    int32_t cached = 0;
    const Status st =
        cache_->add_sequence(id, s->tokens.data(), static_cast<int32_t>(s->tokens.size()), s->cache_salt, &cached);
    if (!st.ok()) {
      waiting.pop_front();
      plan.failed.emplace_back(s, st);
      continue;
    }
    s->seq_id = id;
    if (!schedule_chunk(s, &budget, &plan)) {  // not even one token fits: wait for blocks
      cache_->free_sequence(id).ok();
      s->seq_id = 0;
      break;
    }
    if (!s->admitted_once) s->cached_tokens = cached;
    s->admitted_once = true;
    waiting.pop_front();
    running.push_back(s);
  }

  // 3. Nothing fit: free the newest running sequence's blocks so that the others can go on; but
  // not while a step in flight draws a running sequence's token (overlapped steps): its end may
  // finish that one and free its blocks, or give it a token to decode.
  const bool drawing =
      std::any_of(running.begin(), running.end(), [](const SequencePtr& s) { return s->tokens_in_flight > 0; });
  if (plan.empty() && running.size() > 1 && !drawing) {
    preempt(running, waiting, &plan);
    plan.made_room = true;
  }
  return plan;
}

}  // namespace flashserve::engine
