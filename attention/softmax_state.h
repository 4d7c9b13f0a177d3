// The online-softmax state of one query row, as the CPU kernels (attention/cpu) keep it, and the
// merge of partial results (attention/merge.cc). The CUDA kernels keep the same two numbers of a
// row in registers, in base 2 for speed (attention/cuda/online_softmax.cuh: m_run, l_run,
// finish_row), and store the natural-log lse this header defines; the CUDA merge
// (merge_cuda.cu) reads and writes that lse.
//
// Log base: NATURAL (base e) everywhere in flashserve: lse = m + ln(d). (FlashInfer keeps
// base 2 internally; vLLM and FlashAttention return base e. A kernel that works in base 2 for
// speed converts before it stores.)
//
//   m: the running maximum of the scores seen so far (-inf before any key)
//   d: the running sum of exp(s_j - m) over those keys
// The output accumulator sits beside the state, unnormalised and scaled by exp(-m); when the
// maximum grows from m to m', both d and the accumulator are multiplied by exp(m - m').
// A row that has seen no key has m = -inf, d = 0, lse = -inf and, by definition, output 0.
#pragma once

#include <cmath>

#include "common/host_device.h"

namespace flashserve {

struct SoftmaxState {
  float m = -INFINITY;
  float d = 0.f;

  FS_HOST_DEVICE float lse() const { return d > 0.f ? m + logf(d) : -INFINITY; }

  // Raises the running maximum to m_new (>= m) and returns the factor by which the
  // accumulator must be multiplied. A state that had seen no key returns 0.
  FS_HOST_DEVICE float rescale_to(float m_new) {
    const float f = (m == -INFINITY) ? 0.f : expf(m - m_new);
    d *= f;
    m = m_new;
    return f;
  }
};

// Weights for merging partial results (o_i, lse_i), each o_i normalised over its own keys:
//   lse = ln Σ exp(lse_i),   o = Σ exp(lse_i - lse) · o_i.
// merge_weight(lse_i, lse) is exp(lse_i - lse), and 0 for an empty part (lse_i = -inf) or when
// every part is empty (lse = -inf): empty splits and fully masked rows merge to o = 0.
FS_HOST_DEVICE float merge_weight(float lse_i, float lse_total) {
  return (lse_i == -INFINITY || lse_total == -INFINITY) ? 0.f : expf(lse_i - lse_total);
}

// ln(exp(a) + exp(b)) without overflow; -inf when both are -inf.
FS_HOST_DEVICE float log_add_exp(float a, float b) {
  const float mx = a > b ? a : b;
  if (mx == -INFINITY) return -INFINITY;
  return mx + logf(expf(a - mx) + expf(b - mx));
}

}  // namespace flashserve
