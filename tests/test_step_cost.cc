// The step cost model (issue 27) alone: it recovers known coefficients from exact and from noisy
// synthetic steps (fixed seeds), follows a change of regime within its window, keeps its slopes
// >= 0, holds a slope that its window cannot see, ignores bad times, and turns a TPOT target into
// a prefill budget within [floor, cap].
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "server/engine/step_cost.h"

namespace flashserve::engine {
namespace {

using Coefficients = StepCostModel::Coefficients;

double truth(const Coefficients& c, const StepShape& s) {
  return c[0] + c[1] * s.decode_tokens + c[2] * s.prefill_tokens + c[3] * static_cast<double>(s.decode_context_tokens);
}

// A step as a serving load makes them: 0..48 decodes of 64..4096 cached tokens each; half the
// steps carry 1..512 prompt tokens.
StepShape random_step(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  StepShape s;
  s.decode_tokens = pick(0, 48);
  for (int i = 0; i < s.decode_tokens; ++i) s.decode_context_tokens += pick(64, 4096);
  s.prefill_tokens = pick(0, 1) ? pick(1, 512) : 0;
  return s;
}

TEST(StepCost, RecoversExactCoefficients) {
  const Coefficients c = {6e-3, 0.8e-3, 0.35e-3, 4e-7};
  StepCostModel m;
  std::mt19937 rng(3);
  for (int i = 0; i < 100; ++i) {
    const StepShape s = random_step(rng);
    m.observe(s, truth(c, s));
  }
  ASSERT_TRUE(m.ready());
  for (int j = 0; j < StepCostModel::kTerms; ++j)
    EXPECT_NEAR(m.coefficients()[j], c[j], 1e-5 * c[j]) << "term " << j;
}

// Noise of 0.2 ms a step (a tenth of a typical CPU step's spread): each coefficient within 3% (the
// intercept within 0.3 ms) of the truth, for several seeds and windows.
TEST(StepCost, RecoversKnownCoefficientsFromNoisySteps) {
  const Coefficients c = {6e-3, 0.8e-3, 0.35e-3, 4e-7};
  for (uint32_t seed : {1u, 2u, 17u}) {
    for (int window : {64, 256}) {
      StepCostConfig cfg;
      cfg.window = window;
      StepCostModel m(cfg);
      std::mt19937 rng(seed);
      std::normal_distribution<double> noise(0.0, 2e-4);
      for (int i = 0; i < 1000; ++i) {
        const StepShape s = random_step(rng);
        m.observe(s, truth(c, s) + noise(rng));
      }
      EXPECT_EQ(m.num_samples(), window);
      const Coefficients& f = m.coefficients();
      EXPECT_NEAR(f[0], c[0], 3e-4) << "seed " << seed << " window " << window;
      for (int j = 1; j < StepCostModel::kTerms; ++j)
        EXPECT_NEAR(f[j], c[j], 0.03 * c[j]) << "term " << j << ", seed " << seed << " window " << window;
      // The budget for 16 decodes of 1000 tokens under a 40 ms target: (40 - 25.2) / 0.35 = 42.3.
      const StepShape d{16, 0, 16000};
      const int32_t b = m.prefill_budget(d, 40e-3, 16, 8192);
      EXPECT_EQ(b, static_cast<int32_t>(std::floor((40e-3 - m.predict(d)) / f[2])));
      EXPECT_NEAR(b, 42, 2) << "seed " << seed << " window " << window;
      EXPECT_LE(m.predict({16, b, 16000}), 40e-3);
      EXPECT_GT(m.predict({16, b + 1, 16000}), 40e-3);
    }
  }
}

// The window forgets: after a slower regime's steps fill it, the fit is the new regime's.
TEST(StepCost, FollowsAChangeWithinItsWindow) {
  const Coefficients fast = {2e-3, 0.1e-3, 0.05e-3, 1e-8}, slow = {9e-3, 1.1e-3, 0.6e-3, 2e-7};
  StepCostConfig cfg;
  cfg.window = 128;
  StepCostModel m(cfg);
  std::mt19937 rng(5);
  for (int i = 0; i < 300; ++i) {
    const StepShape s = random_step(rng);
    m.observe(s, truth(fast, s));
  }
  EXPECT_NEAR(m.coefficients()[2], fast[2], 1e-4 * fast[2]);
  for (int i = 0; i < 128; ++i) {
    const StepShape s = random_step(rng);
    m.observe(s, truth(slow, s));
  }
  for (int j = 0; j < StepCostModel::kTerms; ++j) EXPECT_NEAR(m.coefficients()[j], slow[j], 1e-4 * slow[j]) << j;
}

TEST(StepCost, SlopesStayNonNegative) {
  // Times that fall with the decode count (a slope of -0.2 ms): c_decode is fixed at 0, the rest
  // fitted without it.
  StepCostModel m;
  for (int d = 0; d < 8; ++d)
    for (int p : {0, 16, 64}) m.observe({d, p, 0}, 10e-3 - 0.2e-3 * d + 0.5e-3 * p);
  ASSERT_TRUE(m.ready());
  EXPECT_EQ(m.coefficients()[1], 0.0);
  EXPECT_NEAR(m.coefficients()[2], 0.5e-3, 1e-9);
  for (double c : m.coefficients()) EXPECT_GE(c, 0.0);
}

// Not ready until it has min_samples steps, min_prefill_samples of them with prompt tokens (until
// then c_prefill is unknown and the budget is the floor). Once ready, a window of decodes alone
// keeps the last c_prefill instead of dropping it to 0 (which would give the whole budget).
TEST(StepCost, WaitsForPromptStepsAndHoldsWhatTheWindowCannotSee) {
  const Coefficients c = {5e-3, 1e-3, 0.5e-3, 0.0};
  StepCostConfig cfg;
  cfg.window = 32;
  StepCostModel m(cfg);
  for (int i = 0; i < 40; ++i) m.observe({1 + i % 5, 0, 0}, truth(c, {1 + i % 5, 0, 0}));
  EXPECT_FALSE(m.ready()) << "no step had prompt tokens";
  EXPECT_EQ(m.prefill_budget({4, 0, 0}, 1.0, 16, 512), 16) << "not ready: the floor";
  for (int p : {8, 20, 50}) m.observe({2, p, 0}, truth(c, {2, p, 0}));
  EXPECT_FALSE(m.ready()) << "3 prompt steps of the 4 it needs";
  m.observe({3, 70, 0}, truth(c, {3, 70, 0}));
  ASSERT_TRUE(m.ready());
  EXPECT_NEAR(m.coefficients()[2], 0.5e-3, 1e-9);
  for (int i = 0; i < 64; ++i) m.observe({1 + i % 7, 0, 0}, truth(c, {1 + i % 7, 0, 0}));
  EXPECT_NEAR(m.coefficients()[2], 0.5e-3, 1e-9) << "held through a window without prompts";
  EXPECT_NEAR(m.coefficients()[1], 1e-3, 1e-9);
  EXPECT_EQ(m.prefill_budget({4, 0, 0}, 20.2e-3, 16, 512), 22);  // (20.2 - 9) / 0.5
}

// Every step the same 8 decodes of 1000 tokens each: the intercept, c_decode and c_context cannot
// be told apart (the damping keeps the system solvable), but what the model is asked, the cost of
// those decodes with some prompt tokens, is right, and so is the budget.
TEST(StepCost, CollinearStepsStillPredictWhatTheyShow) {
  const Coefficients c = {5e-3, 1e-3, 0.5e-3, 1e-6};
  StepCostModel m;
  for (int p : {0, 0, 16, 0, 64, 0, 128, 200, 0, 32}) m.observe({8, p, 8000}, truth(c, {8, p, 8000}));
  ASSERT_TRUE(m.ready());
  for (int p : {0, 50, 300}) EXPECT_NEAR(m.predict({8, p, 8000}), truth(c, {8, p, 8000}), 1e-9) << p;
  EXPECT_NEAR(m.coefficients()[2], 0.5e-3, 1e-9);
  EXPECT_EQ(m.prefill_budget({8, 0, 8000}, 30.2e-3, 16, 512), 18);  // (30.2 - 21) / 0.5 = 18.4
  EXPECT_EQ(m.prefill_budget({8, 0, 8000}, 30.2e-3, 24, 512), 24) << "the floor";
}

TEST(StepCost, IgnoresBadTimes) {
  StepCostModel m;
  for (double t : {std::nan(""), -1e-3, std::numeric_limits<double>::infinity()}) m.observe({1, 10, 10}, t);
  EXPECT_EQ(m.num_samples(), 0);
  EXPECT_FALSE(m.ready());
}

// The budget's clamps: the floor when the target is below the decodes' own cost (prompts still
// move), twice the largest prompt step seen (100 tokens) or the cap when the target is far, the
// cap when nothing decodes, a floor above the cap is the
// cap, a cap of 0 (the decodes took the whole token budget) is 0.
TEST(StepCost, BudgetKeepsToTheFloorAndTheCap) {
  StepCostModel m;
  for (int d = 0; d < 4; ++d)
    for (int p : {0, 8, 32, 100}) m.observe({d, p, 0}, 10e-3 + 1e-3 * d + 0.5e-3 * p);
  ASSERT_TRUE(m.ready());
  EXPECT_EQ(m.prefill_budget({2, 0, 0}, 5e-3, 16, 512), 16) << "target below the decodes' cost";
  EXPECT_EQ(m.prefill_budget({2, 0, 0}, 13e-3, 16, 512), 16) << "2 tokens' room is under the floor";
  EXPECT_EQ(m.prefill_budget({2, 0, 0}, 30.2e-3, 16, 512), 36);
  EXPECT_EQ(m.prefill_budget({2, 0, 0}, 10.0, 16, 512), 200) << "far target: twice the largest prompt step seen";
  EXPECT_EQ(m.prefill_budget({2, 0, 0}, 10.0, 16, 150), 150) << "far target: the cap";
  EXPECT_EQ(m.prefill_budget({2, 0, 0}, 10.0, 300, 512), 300) << "the floor above twice the largest";
  EXPECT_EQ(m.prefill_budget({0, 0, 0}, 1e-3, 16, 512), 512) << "no decodes: the cap";
  EXPECT_EQ(m.prefill_budget({2, 0, 0}, 5e-3, 16, 10), 10) << "floor above the cap";
  EXPECT_EQ(m.prefill_budget({2, 0, 0}, 5e-3, 16, 0), 0);
  EXPECT_EQ(m.prefill_budget({2, 0, 0}, 10.0, 16, -3), 0);
}

}  // namespace
}  // namespace flashserve::engine
