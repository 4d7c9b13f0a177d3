// Skinny GEMMs for the decode projections (issue 27): c = a · wᵀ for at most 32 rows of a, where
// cuBLAS leaves the H200's read bandwidth unused (the decode step at batch 1 took 1.6× its weight
// floor). The weights stream once, 16 bytes a load straight into the tensor cores' A fragments
// (c is computed transposed: wᵀ's 16 rows a warp against a's rows as the MMA's 8-wide N), split
// along k across CTAs where n alone gives too few; the splits' fp32 partials are summed by an
// epilogue that also does what follows the GEMM in the model, inside the GEMM's launch (the last
// CTA to store a 64-column group's partials finishes the group; with a norm, the last group
// normalises the rows: SkinnyWorkspace's counters) or, where that cannot be (launch_epilogue, a
// norm over more than 8 rows, SwiGLU's halves not whole groups), in one or two launches after it:
//   kStore     c in bf16, its columns cut into up to three outputs (a fused QKV: q, k, v);
//   kFp32      c in fp32 (logits);
//   kResidual  x += c (fp32 residual stream), then, with a norm weight, h = bf16(w · x · rsqrt(
//              mean(x²) + eps)) (the model's rms_norm after the residual add);
//   kSwiGLU    c = [gate | up] (n = 2·I): act = bf16(silu(gate) · up);
//   kRopeAppend a fused QKV's c as kStore's three pieces q, k, v, then what rope_append does
//              (model_kernels.h): rotary on q and k, and the new K/V into their slots (bf16 or
//              FP8 pages); bit for bit kStore followed by rope_append, one launch fewer. Always
//              a launch of its own (skinny_gemm_fuses: no).
// Shapes it takes (skinny_gemm_supported): 1 <= m <= 32, n a multiple of 16, k a multiple of 64,
// a's rows 16-byte aligned (lda a multiple of 8), w 16-byte aligned; the caller keeps cuBLAS
// otherwise and for larger m (the crossover: bench/NOTES.md "Skinny GEMMs").
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/status.h"
#include "kvcache/page_view.h"

namespace flashserve::model::cuda {

enum class SkinnyEpilogue { kStore, kFp32, kResidual, kSwiGLU, kRopeAppend };

struct SkinnyOutput {
  SkinnyEpilogue kind = SkinnyEpilogue::kStore;
  // kStore: columns [0, cols[0]) to out[0] as [m, cols[0]], the next cols[1] to out[1], ...
  // (cols summing to n; unused pieces 0).
  __nv_bfloat16* out[3] = {nullptr, nullptr, nullptr};
  int64_t cols[3] = {0, 0, 0};
  float* out_fp32 = nullptr;               // kFp32: [m, n]
  float* residual = nullptr;               // kResidual: x [m, n], updated in place
  const __nv_bfloat16* norm_weight = nullptr;  // kResidual: [n], or null (no norm)
  __nv_bfloat16* normed = nullptr;         // kResidual with a norm: h [m, n]
  float eps = 1e-5f;
  __nv_bfloat16* act = nullptr;            // kSwiGLU: [m, n / 2]
  // kRopeAppend (with out/cols as kStore: cols[0] = heads·head_dim, cols[1] = cols[2] =
  // kv_heads·head_dim): rope_append's arguments, row t of c being token t.
  const int32_t* positions = nullptr;      // [m]
  const float* inv_freq = nullptr;         // [head_dim / 2]
  const int64_t* slots = nullptr;          // [m] pool slots (append); outside the pool: skipped
  int32_t head_dim = 0;
  KVPageView pages;                        // the layer's pool (append)
  bool append = false;
  bool launch_epilogue = false;            // the epilogue in launches of its own (A/B; see the top)
  // kResidual with a norm, launched: the add and the norm in one launch, a cluster of 8 blocks a
  // row meeting in distributed shared memory (sm_90+ where such clusters fit; else two launches
  // as without it). A/B against two launches; not measured yet.
  bool norm_one_launch = false;
};

// A call's scratch: partials (skinny_gemm_workspace_bytes, 16-byte aligned) and the fused
// epilogue's counters (at least skinny_gemm_counters(n)), zeroed once by their owner before the
// first call: each call leaves them at zero. Null counters: the launched epilogue. Calls that
// share them must run one after another (one stream).
struct SkinnyWorkspace {
  void* partials = nullptr;
  int64_t bytes = 0;
  unsigned* counters = nullptr;
  int64_t counter_count = 0;
};

// Whether skinny_gemm takes these shapes (see the header comment).
bool skinny_gemm_supported(int64_t m, int64_t n, int64_t k, int64_t lda, const void* a, const void* w);
// The k splits for n and k on `sms` SMs: enough CTAs (64 rows of w each) for a wave of 4 an SM
// (the kernel's occupancy), at most 16 and at most ceil(k / 128) (sub-slices of 128 k, the last
// one half where k is an odd multiple of 64), a divisor of that where one is in range.
// FLASHSERVE_SKINNY_SPLITS=N (read at each call; A/B benchmarks) forces min(N, that cap) splits
// instead; a workspace sized without it may then be too small (skinny_gemm says so).
// FLASHSERVE_SKINNY_SPLIT_RULE=wave (A/B) takes the most splits within one wave instead.
int skinny_gemm_splits(int64_t n, int64_t k, int sms);
// The fp32 workspace (bytes) a call of m rows needs: splits · m · n · 4, and m · ceil(n / 64) · 4
// for a norm's sums of squares.
int64_t skinny_gemm_workspace_bytes(int64_t m, int64_t n, int64_t k, int sms);
// The counters a call over n columns needs for the fused epilogue: ceil(n / 64) + 1.
int64_t skinny_gemm_counters(int64_t n);
// Whether SkinnyOutput::norm_one_launch can take effect here (sm_90+ code, clusters of 8 blocks
// placeable; asked of the device once, again after a failed query); else such calls take two
// launches. The CUDA model asks at create, outside any graph capture.
bool skinny_norm_one_launch_available();
// Whether a call finishes inside the GEMM's launch (the fused epilogue) or in launches after it.
bool skinny_gemm_fuses(int64_t m, int64_t n, const SkinnyOutput& out, const SkinnyWorkspace& ws);

// c = a · wᵀ: a [m, k] bf16 (row stride lda), w [n, k] bf16 row-major (a linear layer's weight),
// then out's epilogue; ws as SkinnyWorkspace says. One launch on `stream` with the fused
// epilogue, else two (three for kResidual with a norm); capturable. INVALID_ARGUMENT for shapes
// it does not take or a short workspace, before any launch.
Status skinny_gemm(const __nv_bfloat16* a, int64_t lda, const __nv_bfloat16* w, int64_t m, int64_t n, int64_t k,
                   const SkinnyOutput& out, const SkinnyWorkspace& ws, int sms, cudaStream_t stream);

}  // namespace flashserve::model::cuda
