// The step cost model (issue 27, mixed steps): a step's forward time as a linear function of its
// shape, fitted online from the steps the engine has run, and the prefill budget that follows
// from a time-per-output-token target (what SLO-aware schedulers do: Sarathi-Serve's token budget
// from a latency target, DistServe's and Splitwise's cost models of a step).
//
//   forward_s ≈ c0 + c_decode·decode_tokens + c_prefill·prefill_tokens + c_context·decode_context_tokens
//
// c0 is the step's fixed cost (launches, the weights read once), c_decode and c_prefill what a
// row adds (the GEMMs, sampling; a prompt token also its attention over its chunk), c_context what
// a decode row's K/V read adds per cached token. The fit is least squares over the last `window`
// steps, with the slopes kept >= 0 (a slope that comes out negative is fixed at 0 and the rest
// refitted) and a little ridge damping (damping × the feature's own sum of squares, as
// Levenberg-Marquardt scales it), so that a feature that does not vary in the window (all decodes
// the same context, no prompt in any step) leaves the others' fit alone instead of making the
// system singular. Worked example (bench/NOTES.md "Mixed steps (issue 27)"): the CPU server with
// SmolLM2-135M Q4_1 on a 2-core machine, 8 streams of ~300-token prompts, fits c0 = 36-49 ms (the
// weights, dequantized to fp32, read once a step) and c_prefill = 1.8-2.8 ms a prompt token; the
// decode rows' cost goes to c_decode (4.4-4.7 ms a row) or to c_context (4-12 µs a cached token),
// never both, since the decodes' count and lengths move together. A target of 120 ms with 8
// decodes of ~400 tokens then gives (120 - 49 - 8·400·4.3e-3 ms) / 2.2 ms = 26 prompt tokens.
//
// No thread, no clock: the engine's step thread feeds it, tests feed it synthetic samples.
#pragma once

#include <array>
#include <cstdint>
#include <deque>

namespace flashserve::engine {

// A step's shape, as the cost model sees it.
struct StepShape {
  int32_t decode_tokens = 0;          // decode rows (one token each)
  int32_t prefill_tokens = 0;         // prompt-chunk tokens, all chunks together
  int64_t decode_context_tokens = 0;  // Σ over decode rows of the sequence's length (K/V read)
};

struct StepCostConfig {
  int32_t window = 256;       // recent steps the fit uses
  int32_t min_samples = 8;    // steps before the fit is trusted, of which
  int32_t min_prefill_samples = 4;  // steps with prompt tokens (c_prefill needs them)
  double damping = 1e-9;      // ridge, relative to each feature's sum of squares
};

class StepCostModel {
 public:
  static constexpr int kTerms = 4;  // [1, decode_tokens, prefill_tokens, decode_context_tokens]
  using Coefficients = std::array<double, kTerms>;

  explicit StepCostModel(const StepCostConfig& config = {}) : config_(config) {}

  // One measured step (forward seconds); non-finite or negative times are ignored. Refits.
  void observe(const StepShape& shape, double forward_s);

  // Enough samples, with prompt tokens among them, for predictions to be trusted.
  bool ready() const { return ready_; }
  // c0, c_decode, c_prefill, c_context (seconds, seconds a token); zeros until ready().
  const Coefficients& coefficients() const { return coef_; }
  double predict(const StepShape& shape) const;
  int64_t num_samples() const { return static_cast<int64_t>(samples_.size()); }

  // The most prompt tokens a step of these decodes can take with its predicted forward time
  // <= target_s, within [floor, cap] (floor itself clamped to cap) and at most twice the largest
  // prompt step the model has seen (no far extrapolation). No decodes: cap (no one waits on the
  // step). Not ready() yet: floor (the cautious start; the floor's steps are what teach the model
  // c_prefill).
  int32_t prefill_budget(const StepShape& decodes, double target_s, int32_t floor, int32_t cap) const;

 private:
  void fit();

  struct Sample {
    std::array<double, kTerms> x;
    double y;
  };
  StepCostConfig config_;
  std::deque<Sample> samples_;
  Coefficients coef_{};
  bool ready_ = false;
  int32_t most_prefill_seen_ = 0;  // prompt tokens of the largest prompt step in the latest window that had one
};

}  // namespace flashserve::engine
