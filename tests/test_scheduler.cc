// The scheduler alone, over a real KV cache manager and no model: admission order, chunking
// under the token budget, preemption order when the blocks run out, max_num_seqs, the step that
// makes room, and a randomized run in which every request finishes (no starvation) with the
// budget, the sequence limit and the pool respected at every step. Then the batch builder on its
// plans, over a stand-in model that only says its block-table width.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "server/engine/batch_builder.h"
#include "server/engine/request.h"
#include "server/engine/scheduler.h"

namespace flashserve::engine {
namespace {

KVCacheConfig cache_config(int num_blocks, int block_size, bool prefix_caching = true) {
  KVCacheConfig c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.enable_prefix_caching = prefix_caching;
  return c;
}

// A request that wants max_tokens generated tokens after its prompt.
struct TestSeq : SequenceState {
  std::string name;
  int32_t max_tokens = 1;
  int32_t num_generated = 0;
};

std::shared_ptr<TestSeq> seq(const std::string& name, int prompt_len, int max_tokens = 4, int first_token = 100) {
  auto s = std::make_shared<TestSeq>();
  s->name = name;
  s->max_tokens = max_tokens;
  for (int i = 0; i < prompt_len; ++i) s->tokens.push_back(first_token + i);
  return s;
}

const TestSeq& as_test(const SequencePtr& s) { return static_cast<const TestSeq&>(*s); }

std::vector<std::string> names(const std::vector<ScheduledSequence>& v) {
  std::vector<std::string> out;
  for (const auto& s : v) out.push_back(as_test(s.seq).name);
  return out;
}
template <class Queue>
std::vector<std::string> names(const Queue& q) {
  std::vector<std::string> out;
  for (const auto& s : q) out.push_back(as_test(s).name);
  return out;
}
std::vector<int32_t> lengths(const std::vector<ScheduledSequence>& v) {
  std::vector<int32_t> out;
  for (const auto& s : v) out.push_back(s.num_tokens);
  return out;
}

// What the engine does after the forward pass, with token 7 for every draw: the sampled ones
// get a pending decode, or finish (their blocks freed) at max_tokens. Returns the finished.
std::vector<std::string> run_step(const StepPlan& plan, RunningQueue& running, KVCacheManager& cache) {
  std::vector<std::string> finished;
  for (const auto* list : {&plan.decodes, &plan.prefills})
    for (const ScheduledSequence& s : *list) {
      auto& t = static_cast<TestSeq&>(*s.seq);
      t.decode_pending = false;
      if (!s.samples) continue;
      t.tokens.push_back(7);
      if (++t.num_generated < t.max_tokens) {
        t.decode_pending = true;
        continue;
      }
      EXPECT_TRUE(cache.free_sequence(t.seq_id).ok());
      t.seq_id = 0;
      finished.push_back(t.name);
      running.erase(std::find(running.begin(), running.end(), s.seq));
    }
  return finished;
}

// A cost model fitted on exact samples: forward = 10 ms + 1 ms a decode + 0.5 ms a prompt token.
StepCostModel fitted_cost_model() {
  StepCostModel m;
  for (int d = 0; d < 4; ++d)
    for (int p : {0, 8, 32, 100}) m.observe({d, p, 0}, 10e-3 + 1e-3 * d + 0.5e-3 * p);
  EXPECT_TRUE(m.ready());
  return m;
}

TEST(Scheduler, AdmitsInArrivalOrderWithTheirCachedPrefix) {
  KVCacheManager cache(cache_config(64, 4));
  Scheduler sched({64, 8}, &cache);
  RunningQueue running;
  WaitingQueue waiting = {seq("a", 9), seq("b", 5, 4, 500), seq("c", 10)};  // c: a's 9 tokens + 1
  StepPlan p = sched.schedule(running, waiting);
  EXPECT_EQ(names(running), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(waiting.empty());
  EXPECT_TRUE(p.decodes.empty() && p.preempted.empty() && p.failed.empty());
  // a's full blocks are in the prefix cache once they have slots, so c, in the same step, takes
  // them (their K/V are written in this step's forward before c's attention reads them).
  EXPECT_EQ(names(p.prefills), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(lengths(p.prefills), (std::vector<int32_t>{9, 5, 2}));
  EXPECT_EQ(running[2]->cached_tokens, 8);
  EXPECT_EQ((*cache.block_table(running[2]->seq_id))[1], (*cache.block_table(running[0]->seq_id))[1]);
  EXPECT_EQ(p.slot_mapping.size(), 16u);
  run_step(p, running, cache);
  waiting.push_back(seq("d", 11));
  p = sched.schedule(running, waiting);
  EXPECT_EQ(names(p.decodes), (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_EQ(names(p.prefills), (std::vector<std::string>{"d"}));
  EXPECT_EQ(running.back()->cached_tokens, 8);
  EXPECT_EQ(p.prefills[0].num_tokens, 3) << "only the tokens after the cached prefix are computed";
}

// First come, first served: a waiting request that gets only part of its prompt (the blocks are
// short) is not overtaken by a smaller one behind it, though the budget has room.
TEST(Scheduler, AWaitingRequestIsNotOvertaken) {
  KVCacheManager cache(cache_config(9, 4));  // 8 usable blocks: 32 tokens
  Scheduler sched({64, 8}, &cache);
  RunningQueue running;
  WaitingQueue waiting = {seq("a", 20, 20)};
  StepPlan p = sched.schedule(running, waiting);  // a takes 5 blocks
  ASSERT_EQ(names(running), (std::vector<std::string>{"a"}));
  run_step(p, running, cache);
  waiting = {seq("big", 28, 4, 300), seq("small", 2, 4, 400)};
  p = sched.schedule(running, waiting);
  EXPECT_EQ(names(p.decodes), (std::vector<std::string>{"a"}));  // its 21st token: a sixth block
  // 2 blocks left: big's chunk is halved from 28 to 14, then shortened one at a time to 8.
  ASSERT_EQ(names(p.prefills), (std::vector<std::string>{"big"}));
  EXPECT_EQ(p.prefills[0].num_tokens, 8);
  EXPECT_FALSE(p.prefills[0].samples);
  EXPECT_EQ(names(waiting), (std::vector<std::string>{"small"}));
  EXPECT_EQ(names(running), (std::vector<std::string>{"a", "big"}));
}

TEST(Scheduler, ChunksPromptsUnderTheTokenBudget) {
  KVCacheManager cache(cache_config(64, 4));
  Scheduler sched({16, 8}, &cache);
  RunningQueue running;
  WaitingQueue waiting = {seq("a", 40), seq("b", 5, 4, 500)};
  std::vector<std::vector<int32_t>> chunks;
  std::vector<std::vector<std::string>> order;
  for (int step = 0; step < 4; ++step) {
    const StepPlan p = sched.schedule(running, waiting);
    int32_t total = 0;
    for (const auto* list : {&p.decodes, &p.prefills})
      for (const auto& s : *list) total += s.num_tokens;
    EXPECT_LE(total, 16) << "step " << step;
    EXPECT_EQ(p.slot_mapping.size(), static_cast<size_t>(total));
    std::vector<std::string> o = names(p.decodes);
    for (const auto& s : p.prefills) o.push_back(as_test(s.seq).name + ":" + std::to_string(s.num_tokens) +
                                                 (s.samples ? "*" : ""));
    order.push_back(o);
    run_step(p, running, cache);
  }
  // a: 16 + 16 + 8 (sampled on the last chunk, * ); b waits for the budget, then is chunked too.
  EXPECT_EQ(order[0], (std::vector<std::string>{"a:16"}));
  EXPECT_EQ(order[1], (std::vector<std::string>{"a:16"}));
  EXPECT_EQ(order[2], (std::vector<std::string>{"a:8*", "b:5*"}));
  // Decodes first: a and b each take a token, the rest of the budget is nobody's.
  EXPECT_EQ(order[3], (std::vector<std::string>{"a", "b"}));
}

TEST(Scheduler, DecodesComeFirstAndChunksTakeWhatTheyLeave) {
  KVCacheManager cache(cache_config(64, 4));
  Scheduler sched({8, 8}, &cache);
  RunningQueue running;
  WaitingQueue waiting = {seq("a", 3, 10), seq("b", 3, 10, 200)};
  StepPlan p = sched.schedule(running, waiting);
  run_step(p, running, cache);  // both sampled: decodes pending
  waiting.push_back(seq("c", 20, 4, 300));
  p = sched.schedule(running, waiting);
  EXPECT_EQ(names(p.decodes), (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(names(p.prefills), (std::vector<std::string>{"c"}));
  EXPECT_EQ(p.prefills[0].num_tokens, 6);  // 8 - 2
  // Slots: the decodes' tokens first (one each), then c's chunk.
  EXPECT_EQ(p.slot_mapping.size(), 8u);
  EXPECT_EQ(p.slot_mapping[0], int64_t{(*cache.block_table(running[0]->seq_id))[0]} * 4 + 3);
  // Decodes use the whole budget: the third request waits though it would fit.
  KVCacheManager cache2(cache_config(64, 4));
  Scheduler two({2, 8}, &cache2);
  RunningQueue r2;
  WaitingQueue w2 = {seq("a", 1, 10), seq("b", 1, 10, 200), seq("c", 1, 10, 300)};
  run_step(two.schedule(r2, w2), r2, cache2);
  p = two.schedule(r2, w2);
  EXPECT_EQ(names(p.decodes), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(p.prefills.empty());
  EXPECT_EQ(names(w2), (std::vector<std::string>{"c"}));
}

// The pool runs out on a decode: the newest running sequences go first, back to the front of the
// waiting queue in their old order; when the one that needs the block is itself the newest, it
// goes and decoding stops there.
TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOut) {
  KVCacheManager cache(cache_config(4, 4, false));  // 3 usable blocks
  Scheduler sched({64, 8}, &cache);
  RunningQueue running;
  WaitingQueue waiting = {seq("a", 4, 10), seq("b", 4, 10, 200), seq("c", 4, 10, 300)};
  StepPlan p = sched.schedule(running, waiting);  // one full block each
  ASSERT_EQ(names(running), (std::vector<std::string>{"a", "b", "c"}));
  run_step(p, running, cache);
  waiting.push_back(seq("late", 2, 4, 400));
  p = sched.schedule(running, waiting);
  // a's decode needs a fourth block: c goes (its block frees), a decodes; b's needs one more: b
  // itself is now the newest, so it goes too.
  EXPECT_EQ(names(p.preempted), (std::vector<std::string>{"c", "b"}));
  EXPECT_EQ(names(p.decodes), (std::vector<std::string>{"a"}));
  EXPECT_FALSE(p.made_room);
  // The preempted are at the queue's front, oldest first, without cache sequences or pending
  // decodes, all their tokens kept; "late" stays behind them. b is readmitted in the same step
  // (its tokens to prefill again), c and late wait.
  EXPECT_EQ(names(waiting), (std::vector<std::string>{"c", "late"}));
  ASSERT_EQ(names(p.prefills), (std::vector<std::string>{"b"}));
  EXPECT_EQ(p.prefills[0].num_tokens, 4) << "of b's 5 (prompt and the sampled one), the 4 one block holds";
  EXPECT_EQ(names(running), (std::vector<std::string>{"a", "b"}));
  for (const auto& s : waiting) {
    EXPECT_EQ(s->seq_id, 0);
    EXPECT_FALSE(s->decode_pending);
  }
  EXPECT_EQ(waiting.front()->tokens.size(), 5u);
}

TEST(Scheduler, RunsAtMostMaxNumSeqs) {
  KVCacheManager cache(cache_config(64, 4));
  Scheduler sched({64, 2}, &cache);
  RunningQueue running;
  WaitingQueue waiting;
  for (int i = 0; i < 5; ++i) waiting.push_back(seq("r" + std::to_string(i), 3, 1 + i, 10 * i));
  std::vector<std::string> admitted;
  for (int step = 0; step < 40 && !(running.empty() && waiting.empty()); ++step) {
    const StepPlan p = sched.schedule(running, waiting);
    EXPECT_LE(running.size(), 2u) << "step " << step;
    for (const auto& s : p.prefills) admitted.push_back(as_test(s.seq).name);
    run_step(p, running, cache);
  }
  EXPECT_TRUE(running.empty() && waiting.empty());
  EXPECT_EQ(admitted, (std::vector<std::string>{"r0", "r1", "r2", "r3", "r4"}));
}

// Two sequences mid-prompt hold every block between them and neither can go on: the newest is
// preempted so that the other finishes its prompt (made_room); nothing runs that step.
TEST(Scheduler, MakesRoomWhenNothingFits) {
  KVCacheManager cache(cache_config(5, 4, false));  // 4 usable blocks
  Scheduler sched({8, 8}, &cache);
  auto a = seq("a", 12, 2), b = seq("b", 12, 2, 300);
  std::vector<int64_t> slots;
  std::vector<BlockCopy> copies;
  for (auto [s, id] : {std::pair{a, 1001}, std::pair{b, 1002}}) {  // 8 of 12 prompt tokens each: 2 blocks
    ASSERT_TRUE(cache.add_sequence(id, s->tokens.data(), 12, 0, nullptr).ok());
    ASSERT_TRUE(cache.allocate_slots(id, s->tokens, 8, &slots, &copies).ok());
    s->seq_id = id;
  }
  ASSERT_EQ(cache.pool().num_free(), 0);
  RunningQueue running = {a, b};
  WaitingQueue waiting;
  const StepPlan p = sched.schedule(running, waiting);
  EXPECT_TRUE(p.made_room);
  EXPECT_TRUE(p.empty());
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(as_test(p.preempted[0]).name, "b");
  EXPECT_EQ(names(waiting), (std::vector<std::string>{"b"}));
  EXPECT_EQ(names(running), (std::vector<std::string>{"a"}));
  EXPECT_EQ(cache.pool().num_free(), 2);
  // And both finish afterwards.
  for (int i = 0; i < 20 && !(running.empty() && waiting.empty()); ++i)
    run_step(sched.schedule(running, waiting), running, cache);
  EXPECT_TRUE(running.empty() && waiting.empty());
  EXPECT_EQ(a->num_generated, 2);
  EXPECT_EQ(b->num_generated, 2);
  EXPECT_EQ(cache.pool().num_free(), cache.pool().num_usable());
}

TEST(Scheduler, ACacheErrorFailsOnlyThatSequence) {
  KVCacheManager cache(cache_config(64, 4));
  Scheduler sched({64, 8}, &cache);
  RunningQueue running;
  WaitingQueue waiting = {seq("empty", 0), seq("ok", 3)};
  const StepPlan p = sched.schedule(running, waiting);
  ASSERT_EQ(p.failed.size(), 1u);
  EXPECT_EQ(as_test(p.failed[0].first).name, "empty");
  EXPECT_EQ(p.failed[0].second.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(names(p.prefills), (std::vector<std::string>{"ok"}));
  EXPECT_TRUE(waiting.empty());
}

// Random arrivals, prompt lengths, outputs, budgets and pools small enough to preempt (made_room
// is rare here: MakesRoomWhenNothingFits sets it up): every
// request finishes in a bounded number of steps; each step keeps the token budget, max_num_seqs
// and distinct slots; first admissions follow arrival order; no block leaks.
// Mode 1 adds a prefill budget (max_prefill_tokens 1..20), mode 2 a TPOT target over a fitted
// cost model (budgets from the floor up): each step's prompt chunks keep to the plan's budget,
// which keeps to the limit, and a step with decodes left room still gives prompts the floor.
TEST(Scheduler, EveryRequestFinishesUnderPressure) {
  int preemptions = 0;
  const StepCostModel cost = fitted_cost_model();
  for (int mode = 0; mode < 3; ++mode)
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const int bs = 1 << pick(0, 3);
    const int budget = pick(1, 40), max_seqs = pick(1, 6);
    const int n = pick(3, 12);
    SchedulerConfig sc;
    sc.max_num_batched_tokens = budget;
    sc.max_num_seqs = max_seqs;
    if (mode == 1) sc.max_prefill_tokens = pick(1, 20);
    if (mode == 2) {
      sc.tpot_target_s = pick(10, 30) * 1e-3;
      sc.prefill_floor = pick(1, 8);
    }
    std::vector<std::shared_ptr<TestSeq>> all;
    int max_need = 0;
    for (int i = 0; i < n; ++i) {
      all.push_back(seq("r" + std::to_string(i), pick(1, 30), pick(1, 12), pick(0, 3) * 50));
      max_need = std::max(max_need, static_cast<int>((all.back()->tokens.size() + all.back()->max_tokens + bs - 1) / bs));
    }
    // The engine's admission rule: every request fits the pool alone.
    KVCacheManager cache(cache_config(max_need + 1 + pick(0, 6), bs));
    Scheduler sched(sc, &cache, &cost);
    RunningQueue running;
    WaitingQueue waiting;
    std::set<std::string> done;
    std::vector<std::string> first_admissions;
    std::set<const SequenceState*> seen;
    size_t arrived = 0;
    int step = 0;
    for (; step < 5000 && done.size() < all.size(); ++step) {
      if (arrived < all.size() && pick(0, 2) == 0) waiting.push_back(all[arrived++]);
      if (arrived < all.size() && running.empty() && waiting.empty()) waiting.push_back(all[arrived++]);
      const StepPlan p = sched.schedule(running, waiting);
      int32_t tokens = 0;
      for (const auto* list : {&p.decodes, &p.prefills})
        for (const auto& s : *list) tokens += s.num_tokens;
      ASSERT_LE(tokens, budget) << "seed " << seed << " step " << step;
      const int32_t prefill = tokens - static_cast<int32_t>(p.decodes.size());
      const int32_t left = budget - static_cast<int32_t>(p.decodes.size());
      ASSERT_LE(prefill, p.prefill_budget) << "mode " << mode << " seed " << seed << " step " << step;
      if (p.decodes.empty()) ASSERT_EQ(p.prefill_budget, left);
      if (!p.decodes.empty() && mode == 1) ASSERT_EQ(p.prefill_budget, std::min(left, sc.max_prefill_tokens));
      if (!p.decodes.empty() && mode == 2) ASSERT_GE(p.prefill_budget, std::min(left, sc.prefill_floor));
      if (!p.decodes.empty() && mode == 2) ASSERT_EQ(p.prefill_budget, cost.prefill_budget(p.shape(), sc.tpot_target_s, sc.prefill_floor, left));
      ASSERT_LE(static_cast<int>(running.size()), max_seqs) << "seed " << seed;
      ASSERT_EQ(p.slot_mapping.size(), static_cast<size_t>(tokens));
      ASSERT_EQ(std::set<int64_t>(p.slot_mapping.begin(), p.slot_mapping.end()).size(), p.slot_mapping.size())
          << "two tokens in one slot, seed " << seed;
      ASSERT_TRUE(p.failed.empty());
      for (const auto& s : p.prefills)
        if (seen.insert(s.seq.get()).second) first_admissions.push_back(as_test(s.seq).name);
      preemptions += static_cast<int>(p.preempted.size());
      for (const std::string& f : run_step(p, running, cache)) done.insert(f);
    }
    ASSERT_EQ(done.size(), all.size()) << "mode " << mode << " seed " << seed << ": not every request finished in " << step << " steps";
    std::vector<std::string> arrival;
    for (const auto& s : all) arrival.push_back(s->name);
    EXPECT_EQ(first_admissions, arrival) << "seed " << seed;
    for (const auto& s : all) EXPECT_EQ(s->num_generated, s->max_tokens) << s->name << ", seed " << seed;
    EXPECT_EQ(cache.pool().num_free(), cache.pool().num_usable()) << "blocks leaked, seed " << seed;
  }
  EXPECT_GT(preemptions, 0) << "the pools never forced a preemption";
}

// Mixed steps (issue 27): a prefill budget of 10 tokens. Decodes first; the prompt chunks that
// share their step take at most 10 tokens together, the oldest prompt first; a step without
// decodes takes the whole token budget.
TEST(Scheduler, AFixedPrefillBudgetChunksPromptsBehindTheDecodes) {
  KVCacheManager cache(cache_config(64, 4));
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 64;
  sc.max_num_seqs = 8;
  sc.max_prefill_tokens = 10;
  Scheduler sched(sc, &cache);
  RunningQueue running;
  WaitingQueue waiting = {seq("a", 23, 20)};
  std::vector<std::vector<std::string>> order;
  std::vector<int32_t> budgets;
  for (int step = 0; step < 6; ++step) {
    if (step == 1) waiting = {seq("b", 25, 4, 200), seq("c", 5, 4, 300)};
    const StepPlan p = sched.schedule(running, waiting);
    int32_t prefill = 0;
    for (const auto& s : p.prefills) prefill += s.num_tokens;
    EXPECT_LE(prefill, p.prefill_budget) << "step " << step;
    EXPECT_EQ(p.slot_mapping.size(), p.decodes.size() + static_cast<size_t>(prefill));
    std::vector<std::string> o = names(p.decodes);
    for (const auto& s : p.prefills)
      o.push_back(as_test(s.seq).name + ":" + std::to_string(s.num_tokens) + (s.samples ? "*" : ""));
    order.push_back(o);
    budgets.push_back(p.prefill_budget);
    run_step(p, running, cache);
  }
  EXPECT_EQ(order[0], (std::vector<std::string>{"a:23*"})) << "no decodes: the whole budget, 23 > 10 tokens";
  EXPECT_EQ(order[1], (std::vector<std::string>{"a", "b:10"}));
  EXPECT_EQ(order[2], (std::vector<std::string>{"a", "b:10"}));
  EXPECT_EQ(order[3], (std::vector<std::string>{"a", "b:5*", "c:5*"}));
  EXPECT_EQ(order[4], (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(budgets, (std::vector<int32_t>{64, 10, 10, 10, 10, 10}));
  // A budget larger than what the decodes leave is that.
  KVCacheManager cache2(cache_config(64, 4));
  sc.max_num_batched_tokens = 6;
  Scheduler small(sc, &cache2);
  RunningQueue r2;
  WaitingQueue w2 = {seq("a", 2, 10), seq("b", 2, 10, 200)};
  run_step(small.schedule(r2, w2), r2, cache2);
  w2.push_back(seq("c", 30, 4, 300));
  const StepPlan p = small.schedule(r2, w2);
  EXPECT_EQ(p.prefill_budget, 4);
  ASSERT_EQ(names(p.prefills), (std::vector<std::string>{"c"}));
  EXPECT_EQ(p.prefills[0].num_tokens, 4);
}

// With a TPOT target the budget is what the cost model allows: 20.2 ms with 2 decodes leaves 8.2 ms,
// 16 prompt tokens; a target under the decodes' own cost gives the floor; no decodes, everything.
TEST(Scheduler, ATpotTargetTakesTheBudgetFromTheCostModel) {
  const StepCostModel cost = fitted_cost_model();
  for (auto [target_ms, want] : {std::pair{20.2, 16}, {11.0, 4}, {21.7, 19}, {1000.0, 62}}) {
    KVCacheManager cache(cache_config(64, 4));
    SchedulerConfig sc;
    sc.max_num_batched_tokens = 64;
    sc.tpot_target_s = target_ms * 1e-3;
    sc.prefill_floor = 4;
    Scheduler sched(sc, &cache, &cost);
    RunningQueue running;
    WaitingQueue waiting = {seq("a", 3, 10), seq("b", 3, 10, 200)};
    StepPlan p = sched.schedule(running, waiting);
    EXPECT_EQ(p.prefill_budget, 64) << "no decodes";
    run_step(p, running, cache);
    waiting.push_back(seq("c", 100, 4, 300));
    p = sched.schedule(running, waiting);
    EXPECT_EQ(names(p.decodes), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(p.prefill_budget, want) << "target " << target_ms << " ms";
    ASSERT_EQ(names(p.prefills), (std::vector<std::string>{"c"}));
    EXPECT_EQ(p.prefills[0].num_tokens, want);
  }
  // Not fitted yet: the floor while decodes run; with --max-prefill-tokens too, the smaller.
  StepCostModel cold;
  KVCacheManager cache(cache_config(64, 4));
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 64;
  sc.tpot_target_s = 1.0;
  sc.prefill_floor = 16;
  sc.max_prefill_tokens = 12;
  Scheduler sched(sc, &cache, &cold);
  RunningQueue running;
  WaitingQueue waiting = {seq("a", 3, 10)};
  run_step(sched.schedule(running, waiting), running, cache);
  waiting.push_back(seq("c", 100, 4, 300));
  EXPECT_EQ(sched.schedule(running, waiting).prefill_budget, 12);
}

// What the builder asks of a model: its config (eos) and the width of a step's tables; pure
// decode steps at 9 blocks, as the CUDA model lays them out at its graphs' width.
class WidthModel : public model::Model {
 public:
  WidthModel() {
    EXPECT_TRUE(model::synthetic_preset("tiny", &config_).ok());
    config_.eos_token_ids = {2};
  }
  const model::LlamaConfig& config() const override { return config_; }
  const KVStorageShape& kv_shape() const override { return shape_; }
  Status forward(const model::ForwardBatch&, std::vector<float>*) override { return internal_error("not run"); }
  Status copy_blocks(const BlockCopy*, int32_t) override { return Status::Ok(); }
  int64_t block_table_width(int32_t batch, int32_t num_decode, int64_t widest) const override {
    return batch == num_decode ? 9 : widest;
  }

 private:
  model::LlamaConfig config_;
  KVStorageShape shape_;
};

std::shared_ptr<Request> request(int prompt_len, int first_token) {
  auto r = std::make_shared<Request>();
  for (int i = 0; i < prompt_len; ++i) r->tokens.push_back(first_token + i);
  r->req.sampling.temperature = 0.5f;
  r->req.sampling.top_k = 7;
  r->seed = 1234;
  return r;
}

// Rows in plan order, each sequence's new tokens and length, its block table once at the model's
// width (null-padded), the plan's slots, and sampling rows that ban eos and the stop ids before
// min_tokens.
TEST(BatchBuilder, LaysOutThePlanAtTheModelsWidth) {
  WidthModel m;
  KVCacheManager cache(cache_config(64, 4));
  Scheduler sched({64, 8}, &cache);
  BatchBuilder builder(&m);
  auto a = request(6, 100), b = request(9, 200);
  b->req.sampling.min_tokens = 2;
  b->stop_ids = {5};
  RunningQueue running;
  WaitingQueue waiting = {a, b};
  StepPlan p = sched.schedule(running, waiting);
  builder.build(p, cache);
  const model::ForwardBatch& fb = builder.batch();
  EXPECT_EQ(fb.num_decode, 0);
  EXPECT_EQ(fb.block_table_stride, 3);  // b's 9 tokens: 3 blocks
  EXPECT_EQ(fb.tokens.size(), 15u);
  EXPECT_EQ(fb.tokens[6], 200);
  EXPECT_EQ(fb.cu_seqlens_q, (std::vector<int32_t>{0, 6, 15}));
  EXPECT_EQ(fb.seq_lens, (std::vector<int32_t>{6, 9}));
  const auto& ta = *cache.block_table(a->seq_id);
  const auto& tb = *cache.block_table(b->seq_id);
  EXPECT_EQ(fb.block_tables, (std::vector<int32_t>{ta[0], ta[1], 0, tb[0], tb[1], tb[2]}));
  EXPECT_EQ(fb.slot_mapping, p.slot_mapping);
  EXPECT_TRUE(fb.validate(m.config().vocab_size).ok());
  ASSERT_EQ(builder.rows().size(), 2u);
  EXPECT_EQ(builder.rows()[0].temperature, 0.5f);
  EXPECT_EQ(builder.rows()[0].top_k, 7);
  EXPECT_EQ(builder.rows()[0].seed, 1234u);
  EXPECT_TRUE(builder.rows()[0].banned.empty());
  EXPECT_EQ(builder.rows()[1].banned, (std::vector<int32_t>{2, 5}));

  // Both sampled: a pure decode step, its tables 9 wide.
  for (auto& r : {a, b}) {
    r->tokens.push_back(40);
    r->decode_pending = true;
    r->num_generated = 1;
  }
  p = sched.schedule(running, waiting);
  builder.build(p, cache);
  EXPECT_EQ(fb.num_decode, 2);
  EXPECT_EQ(fb.block_table_stride, 9);
  EXPECT_EQ(fb.tokens, (std::vector<int32_t>{40, 40}));
  EXPECT_EQ(fb.seq_lens, (std::vector<int32_t>{7, 10}));
  std::vector<int32_t> tables(18, 0);
  std::copy(ta.begin(), ta.end(), tables.begin());
  std::copy(tb.begin(), tb.end(), tables.begin() + 9);
  EXPECT_EQ(fb.block_tables, tables);
  EXPECT_EQ(builder.rows()[0].step, 1u);
  EXPECT_EQ(builder.rows()[1].banned, (std::vector<int32_t>{2, 5})) << "1 of min_tokens 2";
  b->num_generated = 2;
  builder.build(p, cache);
  EXPECT_TRUE(builder.rows()[1].banned.empty());
}

// Overlapped steps (issue 27): a sequence whose next token a step in flight draws decodes it
// before its id is known: its slot is allocated past its known tokens, the builder gives the row
// the placeholder of its row in the step in flight, and the draw counter and min_tokens count the
// token in flight. A waiting sequence with a token in flight (preempted while it was drawn) is
// not admitted, nor anyone behind it, until the token is in; then it is.
TEST(Scheduler, TokensInFlightAreDecodedByPlaceholderAndHoldAdmission) {
  WidthModel m;
  KVCacheManager cache(cache_config(64, 4, false));
  Scheduler sched({64, 8}, &cache);
  BatchBuilder builder(&m);
  auto a = request(8, 100), b = request(5, 200);
  a->req.sampling.min_tokens = 2;
  a->stop_ids = {5};
  RunningQueue running;
  WaitingQueue waiting = {a, b};
  StepPlan p = sched.schedule(running, waiting);  // both prompts whole: both draw
  ASSERT_EQ(running.size(), 2u);
  // As the engine marks a step's drawing rows when it begins it: rows 0 and 1.
  a->flight_row = 0, a->tokens_in_flight = 1, a->decode_pending = true;
  b->flight_row = 1, b->tokens_in_flight = 1, b->decode_pending = true;
  p = sched.schedule(running, waiting);
  ASSERT_EQ(p.decodes.size(), 2u);
  EXPECT_EQ(cache.num_slotted_tokens(a->seq_id), 9) << "a slot for the token in flight";
  EXPECT_EQ(a->tokens.size(), 8u);
  builder.build(p, cache);
  const model::ForwardBatch& fb = builder.batch();
  EXPECT_EQ(fb.tokens, (std::vector<int32_t>{-1, -2}));
  EXPECT_EQ(fb.seq_lens, (std::vector<int32_t>{9, 6}));
  EXPECT_TRUE(fb.validate(m.config().vocab_size, 2).ok());
  EXPECT_FALSE(fb.validate(m.config().vocab_size, 1).ok()) << "-2 names a row the step before lacks";
  EXPECT_FALSE(fb.validate(m.config().vocab_size).ok());
  EXPECT_EQ(builder.rows()[0].step, 1u) << "the token in flight is the first drawn";
  EXPECT_EQ(builder.rows()[0].banned, (std::vector<int32_t>{2, 5})) << "1 of min_tokens 2";
  // As the engine goes on: this step begun (a and b draw again, rows 0 and 1), then the first
  // draws delivered (a's 9th token, b's 6th): one token each in flight.
  a->tokens.push_back(41), a->num_generated = 1;
  b->tokens.push_back(42), b->num_generated = 1;
  // b is preempted (the pool ran out, say) while its second token is drawn: it waits.
  ASSERT_EQ(running.back(), b);
  ASSERT_TRUE(cache.free_sequence(b->seq_id).ok());
  b->seq_id = 0;
  b->decode_pending = false;
  running.pop_back();
  waiting = {b, request(3, 300)};
  p = sched.schedule(running, waiting);
  ASSERT_EQ(p.decodes.size(), 1u);
  EXPECT_TRUE(p.prefills.empty()) << "admitted with its token in flight, or overtaken";
  EXPECT_EQ(waiting.size(), 2u);
  builder.build(p, cache);
  EXPECT_EQ(fb.tokens, (std::vector<int32_t>{-1}));
  EXPECT_EQ(builder.rows()[0].step, 2u);
  EXPECT_TRUE(builder.rows()[0].banned.empty()) << "min_tokens 2 reached with the token in flight";
  // The second draws come in (a draws again, in the step just built); b is admitted, then the
  // one behind it, b's prompt and both its tokens recomputed.
  b->tokens.push_back(43), b->tokens_in_flight = 0, b->num_generated = 2;
  a->tokens.push_back(44), a->num_generated = 2;
  p = sched.schedule(running, waiting);
  ASSERT_EQ(p.prefills.size(), 2u);
  EXPECT_EQ(p.prefills[0].seq, b);
  EXPECT_EQ(p.prefills[0].num_tokens, 7);
  EXPECT_TRUE(waiting.empty());
}

// Overlapped steps: nothing fits, but a running sequence's last token (by length) is still being
// drawn: no one is preempted to make room (the engine ends that step first: its end may free
// blocks); with no token in flight, the newest is.
TEST(Scheduler, NoRoomIsMadeWhileATokenIsInFlight) {
  KVCacheManager cache(cache_config(5, 4, false));  // 4 usable blocks: 16 tokens
  Scheduler sched({64, 8}, &cache);
  RunningQueue running;
  WaitingQueue waiting = {seq("a", 8), seq("b", 12, 4, 200)};
  StepPlan p = sched.schedule(running, waiting);  // a's prompt whole, b's first 8 (the blocks run out)
  ASSERT_EQ(running.size(), 2u);
  ASSERT_EQ(p.prefills.size(), 2u);
  ASSERT_FALSE(p.prefills[1].samples);
  running[0]->tokens_in_flight = 1;  // a draws its last token (decode_pending stays false)
  p = sched.schedule(running, waiting);
  EXPECT_TRUE(p.empty());
  EXPECT_TRUE(p.preempted.empty()) << "made room while a token was in flight";
  running[0]->tokens_in_flight = 0;
  p = sched.schedule(running, waiting);
  EXPECT_EQ(p.preempted.size(), 1u);
  EXPECT_TRUE(p.made_room);
}

}  // namespace
}  // namespace flashserve::engine
