// The online softmax of the CUDA attention kernels (prefill's three and decode's split kernel),
// on mma fragments: the logit transform of a row (scale, softcap, ALiBi, the mask), its running
// max and sum in base 2 (exp2 of scaled scores: one FFMA and one EX2 an element), the lazy
// rescale, and the row's final normaliser and natural-log lse. The host kernels and the merge
// keep theirs in SoftmaxState (attention/softmax_state.h), in natural log.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "attention/cuda/device_utils.cuh"
#include "attention/params.h"

namespace flashserve::cuda {

inline constexpr float kLog2e = 1.4426950408889634f;

// Whether a call's logits need the transform (softcap, ALiBi, or a scale <= 0): LogitArgs below,
// and the host's choice of a prefill instance with or without its code.
__host__ __device__ __forceinline__ bool logit_transform(const MaskParams& m) {
  return m.softcap > 0.f || m.alibi_slopes != nullptr || !(m.softmax_scale > 0.f);
}

// Per-row constants of the logit transform.
struct LogitArgs {
  float scale2;    // softmax_scale · log2 e (the plain path)
  float scale;     // softmax_scale (softcap / ALiBi path)
  float softcap, inv_cap;
  float slope2;    // ALiBi slope · log2 e
  // Softcap, ALiBi, or a scale <= 0: logits computed element by element. Otherwise (the
  // common case) raw scores are kept, the row max taken on them, and the scale folded into
  // the exponent: p = 2^(s·scale2 - m), one FFMA and one EX2 an element.
  bool transform;

  LogitArgs() = default;  // (set before use)
  __device__ __forceinline__ LogitArgs(const MaskParams& m, int h) {
    scale = m.softmax_scale;
    scale2 = m.softmax_scale * kLog2e;
    softcap = m.softcap;
    inv_cap = m.softcap > 0.f ? 1.f / m.softcap : 0.f;
    slope2 = m.alibi_slopes != nullptr ? m.alibi_slopes[h] * kLog2e : 0.f;
    transform = logit_transform(m);
  }
};

// The logits of one fragment row of a tile of kNTiles·8 keys, in place (at(nt, e): key key0 +
// nt·8 + tig·2 + e): the transform (softcap, ALiBi) where there is one, and -inf outside
// [row_lo, row_hi) when `masked`. Returns the factor from a value to a base-2 logit (> 0). The
// branches are uniform and outside the element loops. kTransform / kMask false: the caller
// knows there is no transform (a.transform false) / no mask (masked false): no code for it (the
// warp-specialized kernel's tile loops by kind, their registers).
template <int kNTiles, bool kTransform = true, bool kMask = true, typename At>
__device__ __forceinline__ float logits_row(At at, const LogitArgs& a, int key0, int tig, int row_pos, int row_lo,
                                            int row_hi, bool masked) {
  float to_log2 = a.scale2;  // stored value -> base-2 logit
  if (kTransform && a.transform) {
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = key0 + nt * 8 + tig * 2 + e;
        float x = at(nt, e) * a.scale;
        if (a.softcap > 0.f) x = a.softcap * tanhf(x * a.inv_cap);
        at(nt, e) = x * kLog2e - a.slope2 * static_cast<float>(key > row_pos ? key - row_pos : row_pos - key);
      }
    }
    to_log2 = 1.f;
  }
  if (kMask && masked) {
    // Element (nt, e) holds key base + c, c = nt·8 + e a constant: with the bounds moved to the
    // lane's first key, each element is a compare against an immediate and a select (the keys
    // made one by one and compared with both bounds were 4.3 instructions an element: d 64's
    // masked tile 747 instructions a warp against the plain tile's 466). Measured against that
    // (bench/history/prefill.md "Session 40", call 4): d 128's causal rows +0.2..+0.9%, d 64's
    // level, decode level. On tiles of 64 keys or more the lower bound only where some row of the
    // warp starts past the lane's first key (a window; causal rows start at key 0): all 32 lanes
    // call this there (the vote). Decode's 16-key tiles compare both bounds.
    const int base = key0 + tig * 2;
    const int lo = row_lo - base, hi = row_hi - base;
    if (kNTiles < 8 || __any_sync(0xffffffffu, lo > 0)) {
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (nt * 8 + e < lo || nt * 8 + e >= hi) at(nt, e) = -INFINITY;
        }
      }
    } else {
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (nt * 8 + e >= hi) at(nt, e) = -INFINITY;
        }
      }
    }
  }
  return to_log2;
}

// kP (1 to 4) partials of a row combined pairwise, by op (lane_max's max, exp_row's sum).
template <int kP, typename Op>
__device__ __forceinline__ float combine_partials(const float (&r)[4], Op op) {
  if constexpr (kP == 4) return op(op(r[0], r[1]), op(r[2], r[3]));
  if constexpr (kP == 3) return op(op(r[0], r[1]), r[2]);
  if constexpr (kP == 2) return op(r[0], r[1]);
  return r[0];
}

// This lane's values of the row's max, over (up to) four independent partials: short
// dependency chains (two warps a scheduler cannot hide a serial chain of 32 operations). Any
// kNTiles (10 and 22: the 80- and 176-key tiles). Each partial starts from its first tile's
// pair, not from -inf: fmaxf(-inf, x) is not x for a NaN x, so the compiler kept the four
// starting FMNMX a row (prefill v4.36: 8 of a d 64 plain tile's 465 instructions a thread).
template <int kNTiles, typename At>
__device__ __forceinline__ float lane_max(At at) {
  static_assert(kNTiles >= 1, "a row of at least one 8-key tile");
  constexpr int kP = kNTiles < 4 ? kNTiles : 4;
  float m4[4];
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) {
    const float x = fmaxf(at(nt, 0), at(nt, 1));
    m4[nt % kP] = nt < kP ? x : fmaxf(m4[nt % kP], x);
  }
  return combine_partials<kP>(m4, [](float a, float b) { return fmaxf(a, b); });
}

// p = 2^(value·to_log2 - m_use) in place (-inf -> 0); returns this lane's sum of them. The
// partials start from their first p, not from 0 (0 + p is not p for p = -0 to the compiler: the
// four starting FADD a row, as lane_max's FMNMX).
template <int kNTiles, typename At>
__device__ __forceinline__ float exp_row(At at, float to_log2, float m_use) {
  static_assert(kNTiles >= 1, "a row of at least one 8-key tile");
  constexpr int kP = kNTiles < 4 ? kNTiles : 4;
  float r4[4];
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float pe = fast_exp2(fmaf(at(nt, e), to_log2, -m_use));
      at(nt, e) = pe;
      r4[nt % kP] = nt < kP && e == 0 ? pe : r4[nt % kP] + pe;
    }
  }
  return combine_partials<kP>(r4, [](float a, float b) { return a + b; });
}

// The lazy rescale's margin (base 2): softmax_row<kNTiles, true> below.
inline constexpr float kLazyMargin = 8.f;

// The row's max over the quad's four lanes (the fragment row's other columns).
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

// The running max's step: m_run moves to cover the tile's max mx (a stored value; to_log2 > 0,
// so the max commutes with the scale), m_use is the max the tile's exps subtract, and the
// result the factor the row's O and sum are scaled by.
template <bool kLazy>
__device__ __forceinline__ float running_max_step(float& m_run, float mx, float to_log2, float& m_use) {
  float m_new = fmaxf(m_run, mx * to_log2);
  if (kLazy && m_new <= m_run + kLazyMargin) m_new = m_run;
  m_use = m_new == -INFINITY ? 0.f : m_new;  // nothing visible yet: all p = 0
  float f = fast_exp2(m_run - m_use);        // 0 when m_run was -inf
  if (kLazy && m_new == m_run) f = 1.f;
  m_run = m_new;
  return f;
}

// One fragment row of a tile of kNTiles·8 keys: raw scores become probabilities against the
// running max (base 2), masked to [row_lo, row_hi) when `masked` (logits_row); m_run (base-2
// logit units) and l_run (this lane's part of the sum) are updated. Returns the factor the
// row's O accumulator must be scaled by.
// kLazy: the running max moves only when the tile's max exceeds it by more than kLazyMargin
// (base 2), so p <= 2^kLazyMargin and most tiles return exactly 1 (the caller may skip its
// rescale); m_run stays a bound the result is exact against. A row that has seen nothing
// returns 1 as well (its accumulator is zero).
template <int kNTiles, bool kLazy = false, typename At>
__device__ __forceinline__ float softmax_row(At at, const LogitArgs& a, int key0, int tig, int row_pos, int row_lo,
                                             int row_hi, bool masked, float& m_run, float& l_run) {
  const float to_log2 = logits_row<kNTiles>(at, a, key0, tig, row_pos, row_lo, row_hi, masked);
  const float mx = quad_max(lane_max<kNTiles>(at));
  float m_use;
  const float f = running_max_step<kLazy>(m_run, mx, to_log2, m_use);
  l_run = l_run * f + exp_row<kNTiles>(at, to_log2, m_use);
  return f;
}

// softmax_row for a thread's two fragment rows at once (at(i, nt, e): row i), phase
// by phase, so that the rows' dependency chains (the lane max, the quad's two shuffles, the
// running max and its exp, then each element's FFMA and EX2) interleave: one after the other,
// each row's shuffles and the exps that wait on them were exposed in turn, with only two
// consumer warps a scheduler to cover them (prefill v4.12). The same arithmetic as two
// softmax_row calls. kTransform, kMask: as logits_row's. kLazy: as softmax_row's (the running
// maxima move only by more than kLazyMargin; f is then exactly 1 on most tiles).
template <int kNTiles, bool kTransform = true, bool kMask = true, bool kLazy = false, typename At>
__device__ __forceinline__ void softmax_row_pair(At at, const LogitArgs& a, int key0, int tig, const int (&row_pos)[2],
                                                 const int (&row_lo)[2], const int (&row_hi)[2], bool masked,
                                                 float (&m_run)[2], float (&l_run)[2], float (&f)[2]) {
  float to_log2[2], mx[2], m_use[2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
    to_log2[i] = logits_row<kNTiles, kTransform, kMask>([&](int nt, int e) -> float& { return at(i, nt, e); }, a, key0, tig,
                                             row_pos[i], row_lo[i], row_hi[i], masked);
#pragma unroll
  for (int i = 0; i < 2; ++i) mx[i] = lane_max<kNTiles>([&](int nt, int e) -> float& { return at(i, nt, e); });
#pragma unroll
  for (int i = 0; i < 2; ++i) mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
#pragma unroll
  for (int i = 0; i < 2; ++i) mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));  // quad_max, in step
#pragma unroll
  for (int i = 0; i < 2; ++i) f[i] = running_max_step<kLazy>(m_run[i], mx[i], to_log2[i], m_use[i]);
#pragma unroll
  for (int i = 0; i < 2; ++i)
    l_run[i] = l_run[i] * f[i] +
               exp_row<kNTiles>([&](int nt, int e) -> float& { return at(i, nt, e); }, to_log2[i], m_use[i]);
}

// As softmax_row<kNTiles, true>, with the decision whether any max moves taken by a warp vote
// on each lane's own values before any shuffle: on the usual tile (no value of the warp's rows
// above its row's max + kLazyMargin) the quad's max reduction, the rescale factor's exp and the
// caller's own vote are skipped, which takes two shuffles and an exp off the tile's dependency
// chain (decode, where the chain, not the issue rate, bounds the compute). The result is the
// same as softmax_row<kNTiles, true>'s. Returns whether the warp took the slow path (uniform):
// only then may f differ from 1.
template <int kNTiles, typename At>
__device__ __forceinline__ bool softmax_row_voted(At at, const LogitArgs& a, int key0, int tig, int row_pos,
                                                  int row_lo, int row_hi, bool masked, float& m_run, float& l_run,
                                                  float& f) {
  const float to_log2 = logits_row<kNTiles>(at, a, key0, tig, row_pos, row_lo, row_hi, masked);
  float mx = lane_max<kNTiles>(at) * to_log2;  // to_log2 > 0: the max commutes
  const bool slow = __any_sync(0xffffffffu, mx > m_run + kLazyMargin);
  f = 1.f;
  if (slow) {
    mx = quad_max(mx);
    float m_new = fmaxf(m_run, mx);
    if (m_new <= m_run + kLazyMargin) m_new = m_run;
    if (m_new != m_run) f = fast_exp2(m_run - m_new);  // 0 when m_run was -inf
    m_run = m_new;
  }
  const float m_use = m_run == -INFINITY ? 0.f : m_run;  // nothing visible yet: all p = 0
  l_run = l_run * f + exp_row<kNTiles>(at, to_log2, m_use);
  return slow;
}

// Final l (the quad's sum), o's normaliser and the natural-log lse of one fragment row.
__device__ __forceinline__ float finish_row(float m_run, float& l_run, float* lse_out) {
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 1);
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 2);
  *lse_out = l_run > 0.f ? (m_run + __log2f(l_run)) * 0.6931471805599453f : -INFINITY;
  return l_run > 0.f ? 1.f / l_run : 0.f;
}

}  // namespace flashserve::cuda
