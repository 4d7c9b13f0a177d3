// The engine on the CPU (synthetic tiny model): greedy output through continuous batching,
// chunked prefill, prefix reuse and forced preemption equals the plain reference forward with
// no cache, token for token; sampling rules; logprobs against a teacher-forced forward; bad
// requests rejected before they touch the cache; cancel frees the pool.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <chrono>

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>

#include "server/engine/engine.h"
#include "server/model/llama.h"
#include "tests/model_support.h"

namespace flashserve::engine {
namespace {

std::unique_ptr<Engine> make_engine(int num_blocks, int block_size, int budget, int max_seqs = 64) {
  auto m = test::tiny_model(7, num_blocks, block_size);
  EngineConfig ec;
  ec.num_blocks = num_blocks;
  ec.block_size = block_size;
  ec.max_num_batched_tokens = budget;
  ec.max_num_seqs = max_seqs;
  std::unique_ptr<Engine> e;
  EXPECT_TRUE(Engine::create(ec, std::move(m), &e).ok());
  return e;
}

// The reference: greedy decoding by the no-cache forward of a separate copy of the model.
std::vector<int32_t> reference_greedy(const std::vector<int32_t>& prompt, int n) {
  return test::reference_greedy(7, prompt, n);
}

struct Collected {
  std::vector<int32_t> tokens;
  StreamEvent last;
};

Collected collect(ResultStream& s) {
  Collected c;
  StreamEvent ev;
  while (s.next(&ev)) {
    c.tokens.insert(c.tokens.end(), ev.tokens.begin(), ev.tokens.end());
    if (ev.finished) c.last = ev;
  }
  return c;
}

GenerateRequest greedy(const std::string& id, std::vector<int32_t> prompt, int max_tokens) {
  GenerateRequest r;
  r.request_id = id;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  return r;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (auto& t : p) t = std::uniform_int_distribution<int>(3, 511)(rng);
  return p;
}

// Batched, paged, chunked (budget 16 tokens a step), with shared prefixes, and a pool so small
// that requests are preempted and recomputed: every output equals the reference.
TEST(Engine, GreedyEqualsReferenceUnderBatchingChunkingPrefixReuseAndPreemption) {
  std::mt19937 rng(11);
  const std::vector<int32_t> shared = random_prompt(rng, 24);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> p = i % 2 ? shared : random_prompt(rng, 5 + 7 * i);
    const auto tail = random_prompt(rng, 3 + i);
    p.insert(p.end(), tail.begin(), tail.end());
    prompts.push_back(p);
  }
  for (int num_blocks : {200, 14}) {  // roomy, then tight enough to force preemption
    auto e = make_engine(num_blocks, 4, 16);
    std::vector<std::shared_ptr<ResultStream>> streams;
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::shared_ptr<ResultStream> s;
      ASSERT_TRUE(e->enqueue(greedy("r" + std::to_string(i), prompts[i], 12), &s).ok());
      streams.push_back(s);
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      const Collected c = collect(*streams[i]);
      EXPECT_EQ(c.last.reason, FinishReason::kLength);
      EXPECT_EQ(c.last.completion_tokens, 12);
      EXPECT_EQ(c.tokens, reference_greedy(prompts[i], 12)) << "request " << i << ", " << num_blocks << " blocks";
    }
    const EngineStats st = e->stats();
    EXPECT_GT(st.prefix_hits, 0) << "the shared prefix was never reused";
    if (num_blocks == 14) EXPECT_GT(st.preemptions, 0) << "the small pool forced no preemption";
    EXPECT_NEAR(st.kv_usage, 0.0, 1e-12) << "blocks leaked";
  }
}

// Mixed steps (issue 27): a prefill budget of 3 tokens, a TPOT target no step can meet (the
// floor, 16 tokens, every step with decodes) and one every step meets (the whole budget). Prompts
// arrive while others decode; every output equals the reference, and the engine reports the
// budget and a fitted step cost model.
TEST(Engine, GreedyEqualsReferenceUnderAPrefillBudgetOrATpotTarget) {
  std::mt19937 rng(27);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) prompts.push_back(random_prompt(rng, 5 + 11 * i));
  struct Setting {
    int32_t max_prefill_tokens;
    double tpot_target_s;
    int32_t want_budget;  // the gauge at the end: -1 for whatever the decodes left
  };
  for (const Setting& st : {Setting{3, 0.0, 3}, Setting{0, 1e-9, 16}, Setting{0, 10.0, -1}}) {
    auto m = test::tiny_model(7, 200, 4);
    EngineConfig ec;
    ec.num_blocks = 200;
    ec.block_size = 4;
    ec.max_num_batched_tokens = 64;
    ec.max_prefill_tokens = st.max_prefill_tokens;
    ec.tpot_target_s = st.tpot_target_s;
    std::unique_ptr<Engine> e;
    ASSERT_TRUE(Engine::create(ec, std::move(m), &e).ok());
    const std::string what = "max_prefill_tokens " + std::to_string(st.max_prefill_tokens) + ", tpot target " +
                             std::to_string(st.tpot_target_s) + " s";
    std::vector<std::shared_ptr<ResultStream>> streams(prompts.size());
    ASSERT_TRUE(e->enqueue(greedy("r0", prompts[0], 16), &streams[0]).ok());
    StreamEvent first;
    ASSERT_TRUE(streams[0]->next(&first));  // r0 decodes from here on
    std::vector<int32_t> r0 = first.tokens;
    for (size_t i = 1; i < prompts.size(); ++i)
      ASSERT_TRUE(e->enqueue(greedy("r" + std::to_string(i), prompts[i], 16), &streams[i]).ok());
    for (size_t i = 0; i < prompts.size(); ++i) {
      Collected c = collect(*streams[i]);
      if (i == 0) c.tokens.insert(c.tokens.begin(), r0.begin(), r0.end());
      EXPECT_EQ(c.tokens, reference_greedy(prompts[i], 16)) << "request " << i << ", " << what;
    }
    const EngineStats s = e->stats();
    if (st.want_budget >= 0) EXPECT_EQ(s.prefill_budget_tokens, st.want_budget) << what;
    EXPECT_GT(s.step_cost_samples, 16) << what;
    EXPECT_GT(s.step_cost[0] + s.step_cost[1] + s.step_cost[2], 0.0) << what << ": the cost model never fitted";
  }
}

TEST(Engine, SamplingRules) {
  auto e = make_engine(128, 16, 64);
  std::mt19937 rng(5);
  const auto prompt = random_prompt(rng, 9);
  auto run = [&](const std::string& id, SamplingParams sp) {
    GenerateRequest r;
    r.request_id = id;
    r.prompt = prompt;
    r.sampling = sp;
    std::shared_ptr<ResultStream> s;
    EXPECT_TRUE(e->enqueue(r, &s).ok());
    return collect(*s);
  };
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.seed = 1234;
  sp.max_tokens = 20;
  sp.ignore_eos = true;
  const auto a = run("a", sp), b = run("b", sp);
  EXPECT_EQ(a.tokens, b.tokens) << "a seed must make sampling reproducible";
  sp.seed = 999;
  EXPECT_NE(run("c", sp).tokens, a.tokens);
  SamplingParams k1 = sp;
  k1.top_k = 1;
  EXPECT_EQ(run("d", k1).tokens, reference_greedy(prompt, 20)) << "top_k 1 is greedy";
  SamplingParams tp = sp;
  tp.top_p = 1e-6f;  // only the top token survives
  EXPECT_EQ(run("e", tp).tokens, reference_greedy(prompt, 20));
  // Stop tokens end the stream with reason stop, the stop token included.
  const auto greedy_out = reference_greedy(prompt, 20);
  SamplingParams stop = k1;
  stop.stop_token_ids = {greedy_out[4]};
  const auto s = run("f", stop);
  EXPECT_EQ(s.last.reason, FinishReason::kStop);
  EXPECT_EQ(s.tokens.back(), greedy_out[4]);
  // min_tokens: the stop token cannot end the stream before it.
  SamplingParams min = stop;
  min.min_tokens = 10;
  const auto m = run("g", min);
  EXPECT_GE(m.last.completion_tokens, 10);
  for (int i = 0; i < 9; ++i) EXPECT_NE(m.tokens[i], greedy_out[4]);
  // EOS ends a stream unless ignored.
  SamplingParams eos;
  eos.temperature = 0.f;
  eos.max_tokens = 200;
  const auto x = run("h", eos);
  EXPECT_TRUE(x.last.reason == FinishReason::kEos || x.last.reason == FinishReason::kLength);
  if (x.last.reason == FinishReason::kEos) EXPECT_EQ(x.tokens.back(), 2);
}

// min_tokens (issue 24, point 4) over random sampling settings (seed 24): before min_tokens no
// eos (unless ignored) and no stop id is ever generated, so a stream only ends early by the
// length limit, never by eos or stop. Stop lists range from none through the greedy path's own
// tokens to every token of the vocabulary; a list that, with eos, leaves nothing to sample
// before min_tokens must be refused (INVALID_ARGUMENT), and only such a list. (vLLM masks the
// same logits; it does not refuse the degenerate case, and samples a masked token.)
TEST(Engine, MinTokensHoldsUnderRandomSamplingSettings) {
  auto e = make_engine(512, 16, 256);
  const int32_t V = e->model_config().vocab_size;
  const std::vector<int32_t> eos = e->model_config().eos_token_ids;
  std::mt19937 rng(24);
  auto uniform = [&](float a, float b) { return std::uniform_real_distribution<float>(a, b)(rng); };
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  struct Case {
    GenerateRequest req;
    std::shared_ptr<ResultStream> stream;
    std::vector<bool> banned;  // before min_tokens
    std::string what;
  };
  std::vector<std::vector<int32_t>> greedy_prompts, greedy_outs;
  for (int i = 0; i < 3; ++i) {
    greedy_prompts.push_back(random_prompt(rng, 4 + i));
    greedy_outs.push_back(reference_greedy(greedy_prompts.back(), 4));
  }
  std::vector<Case> cases;
  int refused = 0;
  for (int i = 0; i < 240; ++i) {
    Case c;
    GenerateRequest& r = c.req;
    r.request_id = "m" + std::to_string(i);
    r.prompt = random_prompt(rng, pick(1, 12));
    SamplingParams& sp = r.sampling;
    sp.temperature = pick(0, 3) == 0 ? 0.f : uniform(0.05f, 2.5f);
    sp.top_k = std::vector<int>{0, 0, 1, 5, 50, 600}[pick(0, 5)];
    sp.top_p = pick(0, 1) ? 1.f : uniform(0.05f, 1.f);
    sp.min_p = pick(0, 1) ? 0.f : uniform(0.f, 0.6f);
    if (pick(0, 3)) sp.seed = rng();
    sp.ignore_eos = pick(0, 2) == 0;
    sp.max_tokens = pick(1, 24);
    sp.min_tokens = pick(0, sp.max_tokens);
    const int kind = i % 6;
    if (kind == 1) {  // a few random ids
      for (int k = pick(1, 8); k > 0; --k) sp.stop_token_ids.push_back(pick(0, V - 1));
    } else if (kind == 2) {  // the tokens greedy decoding gives: stops are likely
      const size_t which = static_cast<size_t>(pick(0, 2));
      r.prompt = greedy_prompts[which];
      sp.stop_token_ids.assign(greedy_outs[which].begin(), greedy_outs[which].end());
    } else if (kind == 3) {  // a random share of the vocabulary, duplicates included
      for (int k = pick(V / 2, 2 * V); k > 0; --k) sp.stop_token_ids.push_back(pick(0, V - 1));
    } else if (kind == 4) {  // every token but one, or but eos
      const int keep = pick(0, 1) ? eos[0] : pick(3, V - 1);
      for (int32_t t = 0; t < V; ++t)
        if (t != keep) sp.stop_token_ids.push_back(t);
    } else if (kind == 5) {  // every token
      for (int32_t t = 0; t < V; ++t) sp.stop_token_ids.push_back(t);
    }
    std::shuffle(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), rng);
    c.banned.assign(static_cast<size_t>(V), false);
    for (int32_t t : sp.stop_token_ids) c.banned[t] = true;
    if (!sp.ignore_eos)
      for (int32_t t : eos) c.banned[t] = true;
    const bool nothing_left = std::count(c.banned.begin(), c.banned.end(), true) == V;
    c.what = "case " + std::to_string(i) + ": temperature " + std::to_string(sp.temperature) + ", top_k " +
             std::to_string(sp.top_k) + ", top_p " + std::to_string(sp.top_p) + ", min_p " +
             std::to_string(sp.min_p) + ", min_tokens " + std::to_string(sp.min_tokens) + " of " +
             std::to_string(sp.max_tokens) + ", " + std::to_string(sp.stop_token_ids.size()) + " stop ids" +
             (sp.ignore_eos ? ", ignore_eos" : "");
    const Status st = e->enqueue(r, &c.stream);
    if (sp.min_tokens > 0 && nothing_left) {
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.what << ": nothing can be sampled before min_tokens";
      refused += !st.ok();
    } else {
      ASSERT_TRUE(st.ok()) << c.what << ": " << st.to_string();
    }
    if (st.ok()) cases.push_back(std::move(c));
  }
  EXPECT_GT(refused, 20);
  int ended_by_stop_or_eos = 0;
  for (Case& c : cases) {
    const Collected got = collect(*c.stream);
    const SamplingParams& sp = c.req.sampling;
    ASSERT_FALSE(got.tokens.empty()) << c.what;
    for (int32_t k = 0; k < std::min<int32_t>(sp.min_tokens, static_cast<int32_t>(got.tokens.size())); ++k)
      ASSERT_FALSE(c.banned[got.tokens[k]]) << c.what << ": token " << k << " = " << got.tokens[k]
                                            << " is a stop id or eos, before min_tokens";
    EXPECT_GE(got.last.completion_tokens, sp.min_tokens) << c.what << ", finish " << finish_reason_name(got.last.reason);
    if (got.last.reason == FinishReason::kStop || got.last.reason == FinishReason::kEos) ++ended_by_stop_or_eos;
  }
  EXPECT_GT(ended_by_stop_or_eos, 20) << "too few streams ended by a stop id or eos to test anything";
}

// Stop lists (issue 24, point 8): at most kMaxStopTokenIds ids (4 M ids were taken and took
// 4.3 s, stalling the neighbours); a full list still stops at the first of its ids generated.
TEST(Engine, StopListsAreCapped) {
  auto e = make_engine(128, 16, 64);
  std::mt19937 rng(8);
  const auto prompt = random_prompt(rng, 7);
  const auto greedy_out = reference_greedy(prompt, 6);
  GenerateRequest r = greedy("too-many", prompt, 6);
  r.sampling.stop_token_ids.assign(kMaxStopTokenIds + 1, 300);
  std::shared_ptr<ResultStream> s;
  const Status st = e->enqueue(r, &s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("at most 1024"), std::string::npos) << st.message();
  // 1024 ids, duplicates among them, the greedy path's 4th token the only one it meets.
  r.request_id = "full";
  r.sampling.stop_token_ids.clear();
  for (size_t i = 0; r.sampling.stop_token_ids.size() < kMaxStopTokenIds; ++i) {
    const int32_t t = static_cast<int32_t>(i % 512);
    if (std::find(greedy_out.begin(), greedy_out.begin() + 4, t) == greedy_out.begin() + 4 || t == greedy_out[3])
      r.sampling.stop_token_ids.push_back(t);
  }
  ASSERT_TRUE(e->enqueue(r, &s).ok());
  const Collected c = collect(*s);
  EXPECT_EQ(c.last.reason, FinishReason::kStop);
  EXPECT_EQ(c.tokens, std::vector<int32_t>(greedy_out.begin(), greedy_out.begin() + 4));
}

// ---- logprobs (issue 28) ----------------------------------------------------------------------

// The logits after the last of `seq` by the model's own forward(), teacher-forced: one prefill of
// the whole sequence into blocks 1.. of a fresh copy of the model (no engine, no cache manager).
std::vector<float> teacher_forced_logits(model::LlamaModel& m, const std::vector<int32_t>& seq, int32_t block_size) {
  model::ForwardBatch b;
  const int32_t n = static_cast<int32_t>(seq.size());
  const int32_t blocks = (n + block_size - 1) / block_size;
  b.tokens = seq;
  b.cu_seqlens_q = {0, n};
  b.seq_lens = {n};
  b.block_table_stride = blocks;
  for (int32_t i = 0; i < blocks; ++i) b.block_tables.push_back(1 + i);
  for (int32_t i = 0; i < n; ++i) b.slot_mapping.push_back(int64_t{1 + i / block_size} * block_size + i % block_size);
  std::vector<float> logits;
  const Status st = m.forward(b, &logits);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return logits;
}

struct WithLogprobs {
  std::vector<int32_t> tokens;
  std::vector<model::TokenLogprobs> logprobs;
  StreamEvent last;
};

// Every event's logprobs parallel to its tokens (when asked), none otherwise.
WithLogprobs collect_logprobs(ResultStream& s, bool asked) {
  WithLogprobs c;
  StreamEvent ev;
  while (s.next(&ev)) {
    EXPECT_EQ(ev.logprobs.size(), asked ? ev.tokens.size() : 0u) << "an event's logprobs are not parallel to its tokens";
    c.tokens.insert(c.tokens.end(), ev.tokens.begin(), ev.tokens.end());
    for (auto& lp : ev.logprobs) c.logprobs.push_back(std::move(lp));
    if (ev.finished) c.last = ev;
  }
  return c;
}

// Each token's logprobs against the float64 log-softmax of the teacher-forced logits (prompt and
// the tokens before it): the sampled token's, and the top n by value at each rank and by id.
// Returns how many sampled tokens were outside their top n.
int check_teacher_forced(const std::vector<int32_t>& prompt, const WithLogprobs& got, int32_t n, const std::string& what) {
  const int32_t block_size = 16;
  auto m = test::tiny_model(7, 16, block_size);
  EXPECT_EQ(got.logprobs.size(), got.tokens.size()) << what;
  std::vector<int32_t> seq = prompt;
  int outside = 0;
  for (size_t i = 0; i < got.tokens.size() && i < got.logprobs.size(); ++i) {
    const std::string at = what + ", token " + std::to_string(i);
    const std::vector<float> l = teacher_forced_logits(*m, seq, block_size);
    double mx = -INFINITY;
    for (float x : l) mx = std::max(mx, static_cast<double>(x));
    double sum = 0;
    for (float x : l) sum += std::exp(static_cast<double>(x) - mx);
    auto ref = [&](int32_t t) { return static_cast<double>(l[t]) - mx - std::log(sum); };
    std::vector<double> sorted(l.begin(), l.end());
    std::sort(sorted.begin(), sorted.end(), std::greater<double>());
    const model::TokenLogprobs& lp = got.logprobs[i];
    EXPECT_EQ(lp.token, got.tokens[i]) << at;
    EXPECT_NEAR(lp.logprob, ref(got.tokens[i]), 1e-4) << at;
    EXPECT_LE(lp.logprob, 0.f) << at;
    EXPECT_EQ(static_cast<int32_t>(lp.top.size()), n) << at;
    bool in_top = false;
    for (size_t j = 0; j < lp.top.size(); ++j) {
      EXPECT_NEAR(lp.top[j].second, sorted[j] - mx - std::log(sum), 1e-4) << at << ", rank " << j;
      EXPECT_NEAR(lp.top[j].second, ref(lp.top[j].first), 1e-4) << at << ", rank " << j;
      EXPECT_LE(lp.top[j].second, 0.f) << at << ", rank " << j;
      in_top |= lp.top[j].first == lp.token;
    }
    outside += !in_top;
    seq.push_back(got.tokens[i]);
  }
  return outside;
}

// Greedy with logprobs 5, batched and chunked (16 tokens a step), then in a pool so small that
// requests are preempted and recomputed: one entry a token, each token its top[0] with the same
// logprob, the values the raw log-softmax of a teacher-forced forward.
TEST(Engine, GreedyLogprobsMatchATeacherForcedForwardUnderPreemption) {
  std::mt19937 rng(28);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 5; ++i) prompts.push_back(random_prompt(rng, 6 + 9 * i));
  for (int num_blocks : {200, 14}) {
    auto e = make_engine(num_blocks, 4, 16);
    std::vector<std::shared_ptr<ResultStream>> streams;
    for (size_t i = 0; i < prompts.size(); ++i) {
      GenerateRequest r = greedy("lp" + std::to_string(i), prompts[i], 10);
      r.sampling.logprobs = 5;
      std::shared_ptr<ResultStream> s;
      ASSERT_TRUE(e->enqueue(r, &s).ok());
      streams.push_back(s);
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::string what = "request " + std::to_string(i) + ", " + std::to_string(num_blocks) + " blocks";
      const WithLogprobs c = collect_logprobs(*streams[i], true);
      EXPECT_EQ(c.last.completion_tokens, 10) << what;
      ASSERT_EQ(c.logprobs.size(), 10u) << what << ": one entry a generated token";
      EXPECT_EQ(c.tokens, reference_greedy(prompts[i], 10)) << what;
      for (size_t k = 0; k < c.logprobs.size(); ++k) {
        const model::TokenLogprobs& lp = c.logprobs[k];
        ASSERT_EQ(lp.top.size(), 5u) << what;
        EXPECT_EQ(lp.top[0].first, c.tokens[k]) << what << ", token " << k << ": greedy takes the top";
        EXPECT_EQ(lp.logprob, lp.top[0].second) << what << ", token " << k;
      }
      EXPECT_EQ(check_teacher_forced(prompts[i], c, 5, what), 0) << what << ": a greedy token outside its top 5";
    }
    if (num_blocks == 14) EXPECT_GT(e->stats().preemptions, 0) << "the small pool forced no preemption";
    EXPECT_NEAR(e->stats().kv_usage, 0.0, 1e-12);
  }
}

// Sampled (temperature 0.8, a seed) with logprobs 3, batched with a request asking 0 and one
// asking none: the sampled token's logprob is the raw one (not at the temperature) whether or not
// it is in the top 3, and tokens outside the top 3 do occur.
TEST(Engine, SampledLogprobsAreTheRawLogSoftmaxInOrOutOfTheTopN) {
  auto e = make_engine(128, 16, 64);
  std::mt19937 rng(280);
  const auto prompt = random_prompt(rng, 11);
  auto request = [&](const std::string& id, int32_t logprobs) {
    GenerateRequest r;
    r.request_id = id;
    r.prompt = prompt;
    r.sampling.temperature = 0.8f;
    r.sampling.seed = 2828;
    r.sampling.max_tokens = 32;
    r.sampling.ignore_eos = true;
    r.sampling.logprobs = logprobs;
    std::shared_ptr<ResultStream> s;
    EXPECT_TRUE(e->enqueue(r, &s).ok());
    return s;
  };
  auto s3 = request("three", 3), s0 = request("zero", 0), none = request("none", -1);
  const WithLogprobs c3 = collect_logprobs(*s3, true), c0 = collect_logprobs(*s0, true);
  const WithLogprobs cn = collect_logprobs(*none, false);
  EXPECT_EQ(c3.tokens, cn.tokens) << "asking for logprobs changed the draws";
  EXPECT_EQ(c0.tokens, cn.tokens);
  EXPECT_GT(check_teacher_forced(prompt, c3, 3, "logprobs 3"), 0) << "no sampled token outside the top 3: untested";
  check_teacher_forced(prompt, c0, 0, "logprobs 0");
  // Same tokens, same values (rows of one batch, a cached prefix: within float rounding).
  for (size_t k = 0; k < c0.logprobs.size() && k < c3.logprobs.size(); ++k)
    EXPECT_NEAR(c0.logprobs[k].logprob, c3.logprobs[k].logprob, 1e-5) << k;
}

TEST(Engine, LogprobsOutsideTheRangeAreRefused) {
  auto e = make_engine(32, 16, 64);
  std::shared_ptr<ResultStream> s;
  for (int32_t bad : {kMaxLogprobs + 1, -2, 1000, INT32_MIN}) {
    GenerateRequest r = greedy("x", {1, 2, 3}, 2);
    r.sampling.logprobs = bad;
    const Status st = e->enqueue(r, &s);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("logprobs must be in [-1, 20]"), std::string::npos) << st.message();
  }
  EXPECT_EQ(e->stats().waiting + e->stats().running, 0);
  for (int32_t ok : {-1, 0, kMaxLogprobs}) {  // the bounds are taken
    GenerateRequest r = greedy("ok" + std::to_string(ok), {1, 2, 3}, 2);
    r.sampling.logprobs = ok;
    ASSERT_TRUE(e->enqueue(r, &s).ok()) << ok;
    const WithLogprobs c = collect_logprobs(*s, ok >= 0);
    EXPECT_EQ(c.tokens.size(), 2u);
    for (const auto& lp : c.logprobs) EXPECT_EQ(static_cast<int32_t>(lp.top.size()), ok);
  }
}

TEST(Engine, BadRequestsAreRejectedBeforeTheCache) {
  auto e = make_engine(32, 16, 64);
  std::shared_ptr<ResultStream> s;
  GenerateRequest r = greedy("x", {}, 4);
  EXPECT_EQ(e->enqueue(r, &s).code(), StatusCode::kInvalidArgument);  // empty prompt
  r = greedy("x", {1, 512}, 4);
  EXPECT_EQ(e->enqueue(r, &s).code(), StatusCode::kInvalidArgument);  // id past the vocabulary
  r = greedy("x", {1, -1}, 4);
  EXPECT_EQ(e->enqueue(r, &s).code(), StatusCode::kInvalidArgument);
  r = greedy("x", std::vector<int32_t>(4000, 5), 200);
  EXPECT_EQ(e->enqueue(r, &s).code(), StatusCode::kInvalidArgument);  // past the context limit
  r = greedy("x", std::vector<int32_t>(600, 5), 10);
  EXPECT_EQ(e->enqueue(r, &s).code(), StatusCode::kInvalidArgument);  // past the whole pool
  const std::vector<std::function<void(SamplingParams&)>> bad = {
      [](SamplingParams& p) { p.temperature = -1; }, [](SamplingParams& p) { p.top_p = 0; },
      [](SamplingParams& p) { p.top_p = 1.5f; },     [](SamplingParams& p) { p.top_k = -3; },
      [](SamplingParams& p) { p.min_p = 2; },        [](SamplingParams& p) { p.max_tokens = 0; },
      [](SamplingParams& p) { p.min_tokens = 9; },   [](SamplingParams& p) { p.stop_token_ids = {9999}; },
      [](SamplingParams& p) { p.temperature = NAN; }};
  for (const auto& f : bad) {
    r = greedy("x", {1, 2, 3}, 4);
    f(r.sampling);
    EXPECT_EQ(e->enqueue(r, &s).code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(e->stats().waiting + e->stats().running, 0);
  EXPECT_NEAR(e->stats().kv_usage, 0.0, 1e-12);
  EXPECT_EQ(e->cancel("nobody").code(), StatusCode::kInvalidArgument);
  // A duplicate id while the first is live.
  r = greedy("dup", {1, 2, 3}, 100);
  ASSERT_TRUE(e->enqueue(r, &s).ok());
  std::shared_ptr<ResultStream> s2;
  EXPECT_EQ(e->enqueue(r, &s2).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(e->cancel("dup").ok());
  collect(*s);
}

// Request ids are keyed by (owner, id) (issue 24, points 12 and 15): two owners use one id at
// once, the same owner twice is a duplicate, cancel() with another owner is an unknown id and
// leaves the request running, and cancel_in_every_namespace reaches both.
// Requests without an id (embedders) get sequential ones: many enqueued back to back, before
// any is admitted, are all taken and all complete. (Before session 28 the number was the
// scheduler's next cache id, which only admission advances: the second was a duplicate.)
TEST(Engine, RequestsWithoutAnIdAreAllTaken) {
  auto e = make_engine(256, 16, 64);
  std::vector<std::shared_ptr<ResultStream>> streams;
  for (int i = 0; i < 6; ++i) {
    std::shared_ptr<ResultStream> s;
    const Status st = e->enqueue(greedy("", {5, 6, 7 + i}, 3), &s);
    ASSERT_TRUE(st.ok()) << i << ": " << st.to_string();
    streams.push_back(s);
  }
  for (auto& s : streams) EXPECT_EQ(collect(*s).last.reason, FinishReason::kLength);
}

TEST(Engine, RequestIdsLiveInTheirOwnersNamespace) {
  auto e = make_engine(1024, 16, 64);  // room for three of 3000 tokens: none ends by itself here
  GenerateRequest a = greedy("job", {1, 2, 3}, 3000), b = greedy("job", {4, 5, 6}, 3000);
  a.owner = "token 1";
  b.owner = "token 2";
  std::shared_ptr<ResultStream> sa, sb, s;
  ASSERT_TRUE(e->enqueue(a, &sa).ok());
  ASSERT_TRUE(e->enqueue(b, &sb).ok()) << "another owner's live id is no duplicate";
  EXPECT_EQ(e->enqueue(a, &s).code(), StatusCode::kInvalidArgument) << "the same owner's live id is";
  EXPECT_EQ(e->cancel("job", "token 3").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->cancel("job").code(), StatusCode::kInvalidArgument);  // the empty owner is a namespace too
  ASSERT_TRUE(e->cancel("job", "token 1").ok());
  Collected ca = collect(*sa);
  EXPECT_EQ(ca.last.reason, FinishReason::kAborted);
  GenerateRequest c = greedy("job", {7, 8}, 3000);
  c.owner = "token 3";
  ASSERT_TRUE(e->enqueue(c, &s).ok());
  EXPECT_EQ(e->cancel_in_every_namespace("job"), 2);  // token 2's and token 3's
  EXPECT_EQ(collect(*sb).last.reason, FinishReason::kAborted);
  EXPECT_EQ(collect(*s).last.reason, FinishReason::kAborted);
  EXPECT_EQ(e->cancel_in_every_namespace("job"), 0);
  EXPECT_NEAR(e->stats().kv_usage, 0.0, 1e-12);
}

TEST(Engine, CancelMidStreamReturnsThePool) {
  auto e = make_engine(640, 4, 32);
  std::shared_ptr<ResultStream> s;
  std::mt19937 rng(2);
  // 2000 tokens (~0.6 s unloaded): the cancel lands mid-stream on a loaded machine too.
  ASSERT_TRUE(e->enqueue(greedy("long", random_prompt(rng, 30), 2000), &s).ok());
  StreamEvent ev;
  ASSERT_TRUE(s->next(&ev));  // the first token: it is running
  ASSERT_TRUE(e->cancel("long").ok());
  const Collected c = collect(*s);
  EXPECT_EQ(c.last.reason, FinishReason::kAborted);
  EXPECT_LT(c.last.completion_tokens, 2000);
  EXPECT_NEAR(e->stats().kv_usage, 0.0, 1e-12);
  e->shutdown();
  std::shared_ptr<ResultStream> s3;
  EXPECT_EQ(e->enqueue(greedy("late", {1, 2}, 2), &s3).code(), StatusCode::kUnavailable);
}

// A model whose steps the engine treats as asynchronous (as a GPU model's): the engine hands the
// last step's events to their streams between begin_step and end_step. The steps themselves
// are the tiny model's; begin_step counts the steps.
class AsyncSteps : public test::AsyncModel {
 public:
  explicit AsyncSteps(std::unique_ptr<model::Model> inner) : AsyncModel(std::move(inner)) {}
  Status begin_step(const model::ForwardBatch& b, const std::vector<model::SampleRow>& rows) override {
    ++begun_;
    if (before_begin) before_begin(begun_);
    return AsyncModel::begin_step(b, rows);
  }
  std::function<void(int)> before_begin;  // called with the step's number (from 1) as it begins
  Status end_step(std::vector<int32_t>* tokens, std::vector<model::TokenLogprobs>* logprobs) override {
    if (before_end) before_end(begun_);
    return AsyncModel::end_step(tokens, logprobs);
  }
  std::function<void(int)> before_end;  // called with the step's number (from 1) before it ends
  int begun() const { return begun_; }

 private:
  std::atomic<int> begun_{0};
};

// The engine's overlapped delivery (issue 27) changes nothing a client sees: under batching,
// chunking, prefix reuse and preemption every output equals the reference, in order, each
// stream ends after its last token (the last step's events go out when the engine goes idle),
// and a cancel still ends its stream and returns its blocks.
TEST(Engine, OverlappedDeliveryKeepsEveryStreamWholeAndInOrder) {
  std::mt19937 rng(12);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 5; ++i) prompts.push_back(random_prompt(rng, 4 + 9 * i));
  for (int num_blocks : {200, 14}) {
    auto inner = test::tiny_model(7, num_blocks, 4);
    auto model = std::make_unique<AsyncSteps>(std::move(inner));
    const AsyncSteps* async = model.get();
    EngineConfig ec;
    ec.num_blocks = num_blocks;
    ec.block_size = 4;
    ec.max_num_batched_tokens = 16;
    std::unique_ptr<Engine> e;
    ASSERT_TRUE(Engine::create(ec, std::move(model), &e).ok());
    std::vector<std::shared_ptr<ResultStream>> streams;
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::shared_ptr<ResultStream> st;
      ASSERT_TRUE(e->enqueue(greedy("a" + std::to_string(i), prompts[i], 10), &st).ok());
      streams.push_back(st);
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      const Collected c = collect(*streams[i]);
      EXPECT_EQ(c.last.reason, FinishReason::kLength);
      EXPECT_EQ(c.last.completion_tokens, 10);
      EXPECT_EQ(c.tokens, reference_greedy(prompts[i], 10)) << "request " << i << ", " << num_blocks << " blocks";
    }
    EXPECT_GT(async->begun(), 10);
    EXPECT_NEAR(e->stats().kv_usage, 0.0, 1e-12);
    if (num_blocks < 200) continue;  // the cancel: a long request, in the roomy pool
    std::shared_ptr<ResultStream> s;
    const Status st = e->enqueue(greedy("long", random_prompt(rng, 30), 600), &s);
    ASSERT_TRUE(st.ok()) << st.to_string();
    StreamEvent ev;
    ASSERT_TRUE(s->next(&ev));
    ASSERT_TRUE(e->cancel("long").ok());
    const Collected c = collect(*s);
    EXPECT_EQ(c.last.reason, FinishReason::kAborted);
    EXPECT_LT(c.last.completion_tokens, 600);
    EXPECT_NEAR(e->stats().kv_usage, 0.0, 1e-12);
  }
}

// The overlap itself, step by step of one request: when a step begins, the token of the step
// before it is not on its stream yet (the reader is given 20 ms to show it, had it been pushed:
// nothing is pushed while the step thread waits here); by the time that step ends, it is
// (pushed between this step's begin_step and end_step, beside the device's work).
TEST(Engine, OverlappedDeliveryPushesTheLastStepsTokenBeforeTheNextStepEnds) {
  auto model = std::make_unique<AsyncSteps>(test::tiny_model(7, 64, 16));
  AsyncSteps* async = model.get();
  std::atomic<int> received{0};
  std::atomic<bool> late{false}, early{false};
  async->before_begin = [&](int step) {
    if (step < 2) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (received.load() > step - 2) early = true;
  };
  async->before_end = [&](int step) {
    if (step < 2) return;  // step 1 is the prompt's: no token before it
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (received.load() < step - 1 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (received.load() < step - 1) late = true;
  };
  EngineConfig ec;
  ec.num_blocks = 64;
  ec.block_size = 16;
  ec.max_num_batched_tokens = 64;
  std::unique_ptr<Engine> e;
  ASSERT_TRUE(Engine::create(ec, std::move(model), &e).ok());
  std::mt19937 rng(13);
  const std::vector<int32_t> prompt = random_prompt(rng, 9);
  std::shared_ptr<ResultStream> s;
  ASSERT_TRUE(e->enqueue(greedy("one", prompt, 12), &s).ok());
  std::vector<int32_t> tokens;
  std::thread reader([&] {
    StreamEvent ev;
    while (s->next(&ev)) {
      tokens.insert(tokens.end(), ev.tokens.begin(), ev.tokens.end());
      received += static_cast<int>(ev.tokens.size());
    }
  });
  reader.join();
  EXPECT_FALSE(late) << "a step ended before the tokens of the step before it were on their stream";
  EXPECT_FALSE(early) << "a step's token went out before the next step began: not beside the device's work";
  EXPECT_EQ(tokens, reference_greedy(prompt, 12));
  EXPECT_EQ(async->begun(), 12);
}

// ---- Overlapped steps (EngineConfig::overlap_steps, issue 27) -------------------------------

// An engine over `model` (blocks of 4 tokens), overlapped or not.
std::unique_ptr<Engine> engine_over(std::unique_ptr<model::Model> model, int num_blocks, int budget, bool overlap) {
  EngineConfig ec;
  ec.num_blocks = num_blocks;
  ec.block_size = 4;
  ec.max_num_batched_tokens = budget;
  ec.overlap_steps = overlap;
  std::unique_ptr<Engine> e;
  const Status st = Engine::create(ec, std::move(model), &e);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return e;
}

// A mixed workload (seed 29): greedy and seeded sampled requests (top_k, top_p, min_p), eos not
// ignored, stop ids on the greedy path (a request that ends early has a dropped row in the step
// after), min_tokens, logprobs, max_tokens 1, a shared prefix (prefix reuse) and prompts long
// enough to be chunked.
std::vector<GenerateRequest> mixed_workload() {
  std::mt19937 rng(29);
  const std::vector<int32_t> shared = random_prompt(rng, 21);
  std::vector<GenerateRequest> out;
  for (int i = 0; i < 14; ++i) {
    std::vector<int32_t> prompt = random_prompt(rng, 3 + (7 * i) % 37);
    if (i % 3 == 0) prompt.insert(prompt.begin(), shared.begin(), shared.end());
    GenerateRequest r = greedy("w" + std::to_string(i), prompt, 6 + (5 * i) % 17);
    SamplingParams& sp = r.sampling;
    switch (i % 7) {
      case 0: break;  // greedy, ignore eos
      case 1: sp.temperature = 0.8f, sp.top_k = 20, sp.seed = 100 + i; break;
      case 2: sp.temperature = 1.0f, sp.top_p = 0.9f, sp.min_p = 0.02f, sp.seed = 100 + i, sp.ignore_eos = false; break;
      case 3: sp.stop_token_ids = {reference_greedy(prompt, 6)[3]}; break;  // stops at its 4th token (or before)
      case 4:
        sp.logprobs = 3, sp.min_tokens = 5, sp.stop_token_ids = {reference_greedy(prompt, 2)[1]};
        break;
      case 5: sp.max_tokens = 1; break;
      case 6: sp.temperature = 1.3f, sp.seed = 100 + i, sp.ignore_eos = false, sp.logprobs = 0; break;
    }
    out.push_back(std::move(r));
  }
  return out;
}

// The workload's streams through an engine over `model` (a pool of num_blocks blocks of 4, 16
// tokens a step), every request enqueued before the first step can take them.
std::vector<WithLogprobs> run_workload(std::unique_ptr<model::Model> model, int num_blocks, bool overlap,
                                       EngineStats* stats = nullptr) {
  std::unique_ptr<Engine> e = engine_over(std::move(model), num_blocks, 16, overlap);
  std::vector<std::shared_ptr<ResultStream>> streams;
  std::vector<GenerateRequest> reqs = mixed_workload();
  for (auto& r : reqs) {
    std::shared_ptr<ResultStream> s;
    const Status st = e->enqueue(r, &s);
    EXPECT_TRUE(st.ok()) << st.to_string();
    streams.push_back(s);
  }
  std::vector<WithLogprobs> out;
  for (size_t i = 0; i < streams.size(); ++i) out.push_back(collect_logprobs(*streams[i], reqs[i].sampling.logprobs >= 0));
  if (stats != nullptr) *stats = e->stats();
  EXPECT_NEAR(e->stats().kv_usage, 0.0, 1e-12) << "blocks left behind";
  return out;
}

// Overlapped steps change nothing a client sees: over a synchronous model and over one whose
// steps run on a thread of their own (as a GPU's: the engine's host work truly beside them), in
// a roomy pool and in one so small that requests are preempted (some while their token is being
// drawn) and recomputed, every stream equals the one of steps run one at a time: its tokens
// (seeded draws included: the draw counter counts the tokens in flight), its finish reason and
// count, its logprobs; greedy ones equal the no-cache reference too; and every block comes back.
TEST(Engine, OverlappedStepsEqualStepsOneAtATime) {
  const std::vector<GenerateRequest> reqs = mixed_workload();
  for (int num_blocks : {256, 26}) {
    EngineStats base_stats;
    const std::vector<WithLogprobs> base = run_workload(test::tiny_model(7, num_blocks, 4), num_blocks, false, &base_stats);
    for (size_t i = 0; i < reqs.size(); ++i) {
      const SamplingParams& sp = reqs[i].sampling;
      if (sp.temperature == 0.f && sp.stop_token_ids.empty())
        EXPECT_EQ(base[i].tokens, reference_greedy(reqs[i].prompt, sp.max_tokens)) << i;
    }
    if (num_blocks < 256) EXPECT_GT(base_stats.preemptions, 0) << "the small pool preempts nothing";
    for (int threaded : {0, 1}) {
      auto inner = test::tiny_model(7, num_blocks, 4);
      std::unique_ptr<model::Model> m;
      if (threaded) m = std::make_unique<test::ThreadedModel>(std::move(inner));
      else m = std::move(inner);
      EngineStats st;
      const std::vector<WithLogprobs> got = run_workload(std::move(m), num_blocks, true, &st);
      const std::string what = std::string(threaded ? "threaded" : "synchronous") + " model, " +
                               std::to_string(num_blocks) + " blocks";
      ASSERT_EQ(got.size(), base.size());
      for (size_t i = 0; i < base.size(); ++i) {
        const std::string at = what + ", request " + std::to_string(i);
        EXPECT_EQ(got[i].tokens, base[i].tokens) << at;
        EXPECT_EQ(got[i].last.reason, base[i].last.reason) << at;
        EXPECT_EQ(got[i].last.completion_tokens, base[i].last.completion_tokens) << at;
        EXPECT_EQ(got[i].last.completion_tokens, static_cast<int32_t>(got[i].tokens.size())) << at;
        ASSERT_EQ(got[i].logprobs.size(), base[i].logprobs.size()) << at;
        for (size_t t = 0; t < base[i].logprobs.size(); ++t) {
          EXPECT_EQ(got[i].logprobs[t].token, base[i].logprobs[t].token) << at << ", token " << t;
          EXPECT_NEAR(got[i].logprobs[t].logprob, base[i].logprobs[t].logprob, 1e-5) << at << ", token " << t;
          ASSERT_EQ(got[i].logprobs[t].top.size(), base[i].logprobs[t].top.size()) << at;
          for (size_t j = 0; j < base[i].logprobs[t].top.size(); ++j)
            EXPECT_EQ(got[i].logprobs[t].top[j].first, base[i].logprobs[t].top[j].first) << at << ", token " << t;
        }
      }
      EXPECT_EQ(st.generation_tokens, base_stats.generation_tokens) << what;
      if (num_blocks < 256) EXPECT_GT(st.preemptions, 0) << what;
    }
  }
}

// Overlapped over a threaded model, a request ended by a stop id costs its row in the step after
// (computed and dropped), never a token on its stream; one ended by its length costs none (known
// ahead): a single request of each, with the steps counted.
TEST(Engine, OverlappedStepsDropOneRowAfterAStopAndNoneAfterTheLength) {
  std::mt19937 rng(30);
  const std::vector<int32_t> prompt = random_prompt(rng, 7);
  const std::vector<int32_t> path = reference_greedy(prompt, 8);
  for (bool stop : {false, true}) {
    auto model = std::make_unique<test::ThreadedModel>(test::tiny_model(7, 64, 4));
    const test::ThreadedModel* threaded = model.get();
    std::unique_ptr<Engine> e = engine_over(std::move(model), 64, 64, true);
    GenerateRequest r = greedy("one", prompt, 8);
    if (stop) r.sampling.stop_token_ids = {path[4]};
    const int32_t expect = stop ? static_cast<int32_t>(std::find(path.begin(), path.end(), path[4]) - path.begin()) + 1 : 8;
    std::shared_ptr<ResultStream> s;
    ASSERT_TRUE(e->enqueue(r, &s).ok());
    const Collected c = collect(*s);
    EXPECT_EQ(c.tokens, std::vector<int32_t>(path.begin(), path.begin() + expect));
    EXPECT_EQ(c.last.reason, stop ? FinishReason::kStop : FinishReason::kLength);
    e->shutdown();
    // A step a token (the prompt's draws the first), and the dropped one after a stop.
    EXPECT_EQ(threaded->steps(), expect + (stop ? 1 : 0)) << (stop ? "stop" : "length");
    EXPECT_EQ(e->stats().generation_tokens, expect);
    EXPECT_NEAR(e->stats().kv_usage, 0.0, 1e-12);
  }
}

// Overlapped over a threaded model: a cancel mid-stream ends its stream (aborted) and returns its
// blocks while another request goes on to the reference's tokens; a shutdown with a step in
// flight ends every stream (its tokens so far, then aborted) and returns the pool.
TEST(Engine, OverlappedStepsCancelAndShutDownMidStream) {
  std::mt19937 rng(31);
  const std::vector<int32_t> a = random_prompt(rng, 11), b = random_prompt(rng, 5);
  auto model = std::make_unique<test::ThreadedModel>(test::tiny_model(7, 128, 4));
  std::unique_ptr<Engine> e = engine_over(std::move(model), 128, 32, true);
  std::shared_ptr<ResultStream> sa, sb;
  ASSERT_TRUE(e->enqueue(greedy("a", a, 300), &sa).ok());
  ASSERT_TRUE(e->enqueue(greedy("b", b, 20), &sb).ok());
  StreamEvent ev;
  ASSERT_TRUE(sa->next(&ev));
  std::vector<int32_t> got_a = ev.tokens;
  ASSERT_TRUE(e->cancel("a").ok());
  const Collected ca = collect(*sa);
  got_a.insert(got_a.end(), ca.tokens.begin(), ca.tokens.end());
  EXPECT_EQ(ca.last.reason, FinishReason::kAborted);
  EXPECT_LT(ca.last.completion_tokens, 300);
  EXPECT_EQ(ca.last.completion_tokens, static_cast<int32_t>(got_a.size()));
  const std::vector<int32_t> ref_a = reference_greedy(a, static_cast<int>(got_a.size()));
  EXPECT_EQ(got_a, ref_a);
  const Collected cb = collect(*sb);
  EXPECT_EQ(cb.tokens, reference_greedy(b, 20));
  EXPECT_NEAR(e->stats().kv_usage, 0.0, 1e-12);
  // Shutdown mid-stream.
  std::shared_ptr<ResultStream> sc;
  ASSERT_TRUE(e->enqueue(greedy("c", a, 400), &sc).ok());
  ASSERT_TRUE(sc->next(&ev));
  std::vector<int32_t> got_c = ev.tokens;
  e->shutdown();
  const Collected cc = collect(*sc);
  got_c.insert(got_c.end(), cc.tokens.begin(), cc.tokens.end());
  EXPECT_EQ(cc.last.reason, FinishReason::kAborted);
  EXPECT_EQ(cc.last.completion_tokens, static_cast<int32_t>(got_c.size()));
  EXPECT_EQ(got_c, reference_greedy(a, static_cast<int>(got_c.size())));
  EXPECT_NEAR(e->stats().kv_usage, 0.0, 1e-12);
}

// A model that refuses its fail_at-th begun step (an injected device error) and runs the rest.
class FailAtStep : public test::AsyncModel {
 public:
  FailAtStep(std::unique_ptr<model::Model> inner, int fail_at) : AsyncModel(std::move(inner)), fail_at_(fail_at) {}
  Status begin_step(const model::ForwardBatch& b, const std::vector<model::SampleRow>& rows) override {
    if (++begun_ == fail_at_) return internal_error("injected failure");
    return AsyncModel::begin_step(b, rows);
  }
  bool async_steps() const override { return false; }

 private:
  int fail_at_, begun_ = 0;
};

// A step that fails, one at a time or overlapped. Overlapped, it fails to begin (the model
// refuses it) or to end (refused on a threaded model's step thread: it surfaces in end_step,
// with the step after it in flight, whose placeholders then name draws that never came, so that
// it fails too). The failed steps' requests end with an error after the reference's tokens so
// far, every other stream ends whole, nothing hangs, the pool comes back, and the engine serves
// every prompt again after, none from a cached prefix the failed steps never wrote.
TEST(Engine, StepsSurviveAStepThatFails) {
  std::mt19937 rng(35);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(random_prompt(rng, 5 + 6 * i));
  for (int mode = 0; mode < 3; ++mode) {  // overlapped (synchronous, threaded), one at a time
    const bool threaded = mode == 1;
    auto failing = std::make_unique<FailAtStep>(test::tiny_model(7, 128, 4), 2);
    std::unique_ptr<model::Model> m;
    if (threaded) m = std::make_unique<test::ThreadedModel>(std::move(failing));
    else m = std::move(failing);
    // 16 tokens a step: the prompts take a few steps, so some start after the failure.
    std::unique_ptr<Engine> e = engine_over(std::move(m), 128, 16, mode < 2);
    std::vector<std::shared_ptr<ResultStream>> streams;
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::shared_ptr<ResultStream> st;
      ASSERT_TRUE(e->enqueue(greedy("f" + std::to_string(i), prompts[i], 12), &st).ok());
      streams.push_back(st);
    }
    int errors = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const Collected c = collect(*streams[i]);
      const std::string what = "mode " + std::to_string(mode) + ", request " + std::to_string(i);
      const std::vector<int32_t> ref = reference_greedy(prompts[i], 12);
      ASSERT_LE(c.tokens.size(), ref.size()) << what;
      EXPECT_EQ(c.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + static_cast<long>(c.tokens.size()))) << what;
      if (c.last.reason == FinishReason::kError) {
        ++errors;
        // (The injected failure, or on the threaded model the step after it, begun before the
        // failure was known: its placeholders name draws that never came.)
        const std::string& msg = c.last.error.message();
        EXPECT_TRUE(msg.find("injected") != std::string::npos || msg.find("placeholder") != std::string::npos)
            << what << ": " << c.last.error.to_string();
      } else {
        EXPECT_EQ(c.last.reason, FinishReason::kLength) << what;
        EXPECT_EQ(c.tokens.size(), 12u) << what;
      }
    }
    EXPECT_GT(errors, 0);
    // Every prompt again, one at a time: the blocks the failed steps were to write (hashed when
    // planned) must not serve them as a cached prefix.
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::shared_ptr<ResultStream> after;
      ASSERT_TRUE(e->enqueue(greedy("after" + std::to_string(i), prompts[i], 5), &after).ok());
      EXPECT_EQ(collect(*after).tokens, reference_greedy(prompts[i], 5)) << "mode " << mode << ", again " << i;
    }
    EXPECT_NEAR(e->stats().kv_usage, 0.0, 1e-12);
  }
}

// Overlapped steps under a random load (seed 36), on a threaded model: 40 requests of random
// prompts (some sharing a prefix) and lengths, eos not ignored for some, stop ids on the greedy
// path for some, in a pool small enough to preempt, 16 tokens a step; a third of them cancelled
// from another thread after a random delay, once the pool has preempted. Every stream ends
// within a deadline (no request is stuck), its count is its tokens, its tokens are the
// reference's (all of them, or a prefix for a cancelled one), the engine's token count is the
// streams' sum, and the pool comes back.
TEST(Engine, OverlappedStepsUnderARandomLoad) {
  std::mt19937 rng(36);
  const std::vector<int32_t> shared = random_prompt(rng, 12);
  auto e = engine_over(std::make_unique<test::ThreadedModel>(test::tiny_model(7, 40, 4)), 40, 16, true);
  struct Req {
    GenerateRequest r;
    std::shared_ptr<ResultStream> s;
    bool cancel = false;
  };
  std::vector<Req> reqs(40);
  for (size_t i = 0; i < reqs.size(); ++i) {
    std::vector<int32_t> prompt = random_prompt(rng, std::uniform_int_distribution<int>(1, 30)(rng));
    if (i % 4 == 0) prompt.insert(prompt.begin(), shared.begin(), shared.end());
    const int max_tokens = std::uniform_int_distribution<int>(1, 14)(rng);
    reqs[i].r = greedy("r" + std::to_string(i), prompt, max_tokens);
    if (i % 5 == 1) reqs[i].r.sampling.ignore_eos = false;
    if (i % 5 == 2) reqs[i].r.sampling.stop_token_ids = {reference_greedy(prompt, 3)[2]};
    reqs[i].cancel = i % 3 == 0;
  }
  for (auto& q : reqs) ASSERT_TRUE(e->enqueue(q.r, &q.s).ok());
  std::thread canceller([&] {
    // The cancels start once the pool has preempted (the check below), so that a run whose early
    // cancels happen to free enough blocks still takes the preemption path (CI saw one that did
    // not); a deadline keeps a pool that never preempts from hanging the test.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (e->stats().preemptions == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    std::mt19937 crng(37);
    for (auto& q : reqs) {
      if (!q.cancel) continue;
      std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 3000)(crng)));
      (void)e->cancel(q.r.request_id);  // may have finished already: INVALID_ARGUMENT then
    }
  });
  int64_t total = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Req& q = reqs[i];
    std::vector<int32_t> got;
    StreamEvent ev, last;
    bool ended = false;
    while (!ended && q.s->next_for(&ev, 20.0)) {
      got.insert(got.end(), ev.tokens.begin(), ev.tokens.end());
      if (ev.finished) ended = true, last = ev;
    }
    ASSERT_TRUE(ended) << "request " << i << " never ended";
    total += static_cast<int64_t>(got.size());
    EXPECT_EQ(last.completion_tokens, static_cast<int32_t>(got.size())) << i;
    const std::vector<int32_t> ref = reference_greedy(q.r.prompt, q.r.sampling.max_tokens);
    ASSERT_LE(got.size(), ref.size()) << i;
    EXPECT_EQ(got, std::vector<int32_t>(ref.begin(), ref.begin() + static_cast<long>(got.size()))) << i;
    if (last.reason == FinishReason::kLength) {
      EXPECT_EQ(got.size(), ref.size()) << i;
    }
    if (last.reason == FinishReason::kAborted) {
      EXPECT_TRUE(q.cancel) << i;
    }
    if (last.reason == FinishReason::kStop) {
      EXPECT_EQ(got.back(), q.r.sampling.stop_token_ids[0]) << i;
    }
    EXPECT_NE(last.reason, FinishReason::kError) << i << ": " << last.error.to_string();
  }
  canceller.join();
  EXPECT_EQ(e->stats().generation_tokens, total);
  EXPECT_GT(e->stats().preemptions, 0) << "the pool preempted nothing";
  EXPECT_NEAR(e->stats().kv_usage, 0.0, 1e-12);
}

}  // namespace
}  // namespace flashserve::engine
