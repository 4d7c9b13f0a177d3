#include "server/engine/step_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace flashserve::engine {

namespace {

std::array<double, StepCostModel::kTerms> features(const StepShape& s) {
  return {1.0, static_cast<double>(s.decode_tokens), static_cast<double>(s.prefill_tokens),
          static_cast<double>(s.decode_context_tokens)};
}

// Solves a·x = b in place for the n leading rows and columns (Gaussian elimination with partial
// pivoting); false when a pivot vanishes.
bool solve(int n, std::array<std::array<double, StepCostModel::kTerms>, StepCostModel::kTerms> a,
           std::array<double, StepCostModel::kTerms> b, std::array<double, StepCostModel::kTerms>* x) {
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
    if (!(std::fabs(a[p][c]) > 0.0)) return false;
    std::swap(a[p], a[c]);
    std::swap(b[p], b[c]);
    for (int r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (int k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (int r = n - 1; r >= 0; --r) {
    double s = b[r];
    for (int k = r + 1; k < n; ++k) s -= a[r][k] * (*x)[k];
    (*x)[r] = s / a[r][r];
  }
  return true;
}

}  // namespace

void StepCostModel::observe(const StepShape& shape, double forward_s) {
  if (!std::isfinite(forward_s) || forward_s < 0) return;
  samples_.push_back({features(shape), forward_s});
  while (static_cast<int32_t>(samples_.size()) > std::max(config_.window, 1)) samples_.pop_front();
  fit();
}

// Least squares over the window with the terms that the window can tell: a slope whose feature is
// nonzero in fewer than min_prefill_samples steps keeps its last value (0 before it was ever fitted)
// and its share is taken off the times first; a slope that comes out negative is fixed at 0 and
// the rest refitted, until all are >= 0.
void StepCostModel::fit() {
  std::array<int32_t, kTerms> nonzero{};
  double most_prefill = 0;
  for (const Sample& s : samples_) {
    for (int j = 0; j < kTerms; ++j) nonzero[j] += s.x[j] != 0.0;
    most_prefill = std::max(most_prefill, s.x[2]);
  }
  if (most_prefill > 0) most_prefill_seen_ = static_cast<int32_t>(most_prefill);
  const bool enough = static_cast<int32_t>(samples_.size()) >= config_.min_samples &&
                      nonzero[2] >= config_.min_prefill_samples;
  if (!ready_ && !enough) return;  // the prior: not ready, zeros

  std::array<bool, kTerms> fitted{};
  for (int j = 0; j < kTerms; ++j) fitted[j] = j == 0 || nonzero[j] >= config_.min_prefill_samples;
  Coefficients next = coef_;
  for (int round = 0; round < kTerms; ++round) {
    std::array<int, kTerms> idx{};
    int n = 0;
    for (int j = 0; j < kTerms; ++j)
      if (fitted[j]) idx[n++] = j;
    std::array<std::array<double, kTerms>, kTerms> a{};
    std::array<double, kTerms> b{};
    for (const Sample& s : samples_) {
      double y = s.y;
      for (int j = 0; j < kTerms; ++j)
        if (!fitted[j]) y -= next[j] * s.x[j];
      for (int r = 0; r < n; ++r) {
        b[r] += s.x[idx[r]] * y;
        for (int c = 0; c < n; ++c) a[r][c] += s.x[idx[r]] * s.x[idx[c]];
      }
    }
    for (int r = 0; r < n; ++r) a[r][r] += config_.damping * a[r][r] + std::numeric_limits<double>::min();
    std::array<double, kTerms> x{};
    if (!solve(n, a, b, &x)) return;  // keep the last fit
    int worst = -1;
    for (int r = 0; r < n; ++r) {
      next[idx[r]] = x[r];
      if (x[r] < 0 && (worst < 0 || x[r] < x[worst])) worst = r;
    }
    if (worst < 0) break;
    fitted[idx[worst]] = false;
    next[idx[worst]] = 0.0;
  }
  for (double& c : next) c = std::max(c, 0.0);
  coef_ = next;
  ready_ = true;
}

double StepCostModel::predict(const StepShape& shape) const {
  const auto x = features(shape);
  double t = 0;
  for (int j = 0; j < kTerms; ++j) t += coef_[j] * x[j];
  return t;
}

int32_t StepCostModel::prefill_budget(const StepShape& decodes, double target_s, int32_t floor, int32_t cap) const {
  cap = std::max(cap, 0);
  floor = std::clamp(floor, 0, cap);
  if (decodes.decode_tokens == 0) return cap;
  if (!ready_) return floor;
  StepShape base = decodes;
  base.prefill_tokens = 0;
  const double room = target_s - predict(base);
  if (!(room > 0)) return floor;
  // No further than twice the largest prompt step the fit has seen: a line fitted on small chunks
  // (on a GPU they cost next to nothing until the GEMMs turn compute-bound) is not trusted far
  // past them, so the budget grows by doubling while the predictions hold.
  const int64_t most = std::max<int64_t>(floor, int64_t{2} * most_prefill_seen_);
  const double per_token = coef_[2];
  const double n = per_token > 0 ? std::floor(room / per_token) : static_cast<double>(cap);
  return static_cast<int32_t>(std::clamp<double>(std::min<double>(n, static_cast<double>(most)), floor, cap));
}

}  // namespace flashserve::engine
