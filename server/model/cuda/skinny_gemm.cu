// Skinny GEMMs (skinny_gemm.h). The main kernel: a CTA of 4 warps takes 64 rows of w (16 a
// warp) and a range of k, in sub-slices of 128: per sub-slice each thread loads 8 × 16 bytes of
// w (rows gid and gid + 8 of its warp's 16, at k offsets 64c + 32h + 8·tig) straight into
// registers, one sub-slice ahead of the MMAs that use them, while the CTA stages a's rows for
// that sub-slice in shared memory (cp.async, double-buffered). MMAs are m16n8k16 with w as A
// (16 rows) and a as B (8 rows of a a tile, up to four tiles): D = w·aᵀ. The k order inside an
// MMA is permuted (any permutation gives the same sum, as long as A and B share it): a thread's
// 16-byte load holds 8 consecutive k, and k-step s of its chunk takes k base + 4s + {0, 1} as
// the fragment's columns 2·tig + {0, 1} and base + 4s + {2, 3} as 2·tig + 8 + {0, 1}, so A
// comes from the loaded registers as they are and B is one 8-byte shared load of the same four
// k of one row of a. a in shared memory is [k / 4][row][4 k] with rows padded to 8·tiles + 2,
// which puts a half-warp's 8-byte loads on distinct banks. Each split writes its fp32 partial
// c to the workspace; the epilogue kernel sums the splits and finishes (SkinnyEpilogue).
#include "server/model/cuda/skinny_gemm.h"

#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "attention/cuda/device_utils.cuh"
#include "attention/cuda/pdl.cuh"
#include "common/cuda_check.h"
#include "server/model/cuda/rope_append.cuh"

namespace flashserve::model::cuda {

namespace {

using ::flashserve::cuda::cp_async_commit;
using ::flashserve::cuda::cp_async_wait;
using ::flashserve::cuda::launch_kernel;
using ::flashserve::cuda::mma_16816;
using ::flashserve::cuda::pdl_launch_dependents;
using ::flashserve::cuda::pdl_wait;
using ::flashserve::cuda::prefetch_l2;

constexpr int kThreads = 128;     // 4 warps
constexpr int kRowsPerCta = 64;   // of w: 16 a warp
constexpr int kSubK = 128;        // k a sub-slice
constexpr int kLoads = 8;         // 16-byte loads of w a thread a sub-slice: 2 chunks × 2 halves × 2 rows
constexpr int kFinishThreads = 256;  // the epilogue's blocks; kResidual: a block a row's 256 columns
// Sub-slices of w after its first that a CTA launched early (a programmatic dependent, its
// predecessor still running) prefetches into the L2 before it waits: 3 (48 KB a CTA, ~25 MB for
// a wave of 528 CTAs: within the 60 MB L2 beside what the predecessor streams).
constexpr int kPrefetchSubs = 3;
// The parts of the programmatic dependent launch beyond the main kernel's wait
// (FLASHSERVE_SKINNY_PDL_FLAGS=bits, read once, A/B): 1 the main kernel triggers its dependents
// at its start, 2 it prefetches its next sub-slices into the L2 before it waits, 4 the epilogue
// kernels are launched as dependents. Measured (H200, session 26, bench_model decode step,
// launched epilogues, ms at (1,1k) / (16,1k) / (1,8k) / (16,8k), three runs): 4 alone 4.978-5.016 /
// 5.634-5.672 / 5.155-5.184 / 9.047-9.068; none 5.011-5.047 / 5.683-5.718 / 5.209-5.243 /
// 9.082-9.104; 1 level with none; 1 + 4 worse at 16 rows (6.006-6.037); 2 worse everywhere
// (5.361 / 6.093 at 1 and 16 rows: the prefetches of a wave's CTAs compete with the stream they
// were to continue); all three 5.326-5.350 / 6.449-6.474. So 4 by default.
constexpr int kPdlTrigger = 1, kPdlPrefetch = 2, kPdlEpilogue = 4;

template <int kTiles>  // tiles of 8 rows of a: m <= 8·kTiles
struct SkinnyTraits {
  static constexpr int kPad = 8 * kTiles + 2;  // a's rows a 4-k group in shared memory (banks: see the top)
  static constexpr int kGroups = kSubK / 4;
  static constexpr int kStageBytes = kGroups * kPad * 8;
};

// 16 bytes of a stream read once (the weights): no L1 line.
__device__ __forceinline__ uint4 load_stream(const __nv_bfloat16* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// 8 bytes by cp.async, zeros where !valid (src-size 0: nothing read).
__device__ __forceinline__ void cp_async_8(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 8 : 0) : "memory");
}

// The splits' sum of c at `at` (row · n + col): L2 loads (__ldcg), as the partials come from
// other CTAs of the same launch in the fused epilogue.
__device__ __forceinline__ float sum_splits(const float* partial, int splits, int64_t plane, int64_t at) {
  float y = 0.f;
  for (int s = 0; s < splits; ++s) y += __ldcg(partial + s * plane + at);
  return y;
}

// One output element of c's row `row`, column `col` (kSwiGLU: col < n / 2, gate col and up
// n / 2 + col): kStore, kFp32 and kSwiGLU write it; kResidual adds it into x and returns x's
// new value (the norm, if any, is the caller's).
__device__ __forceinline__ float finish_one(const SkinnyOutput& out, const float* partial, int splits, int64_t plane,
                                            int64_t n, int64_t row, int64_t col) {
  switch (out.kind) {
    case SkinnyEpilogue::kSwiGLU: {
      const int64_t half = n / 2;
      const float g = sum_splits(partial, splits, plane, row * n + col);
      const float u = sum_splits(partial, splits, plane, row * n + half + col);
      out.act[row * half + col] = __float2bfloat16_rn(g / (1.f + __expf(-g)) * u);  // the model's silu_mul
      return 0.f;
    }
    case SkinnyEpilogue::kFp32:
      out.out_fp32[row * n + col] = sum_splits(partial, splits, plane, row * n + col);
      return 0.f;
    case SkinnyEpilogue::kResidual: {
      const float v = __ldcg(out.residual + row * n + col) + sum_splits(partial, splits, plane, row * n + col);
      out.residual[row * n + col] = v;
      return v;
    }
    default: {
      // The output piece of column col (selects, not an indexed array: that put out in local memory).
      const int64_t c1 = out.cols[0], c2 = c1 + out.cols[1];
      __nv_bfloat16* dst = col < c1 ? out.out[0] : col < c2 ? out.out[1] : out.out[2];
      const int64_t width = col < c1 ? out.cols[0] : col < c2 ? out.cols[1] : out.cols[2];
      const int64_t c = col < c1 ? col : col < c2 ? col - c1 : col - c2;
      dst[row * width + c] = __float2bfloat16_rn(sum_splits(partial, splits, plane, row * n + col));
      return 0.f;
    }
  }
}

// The norm after kResidual: h = bf16(w · (x · inv)) (the model's rms_norm), x read from L2.
__device__ __forceinline__ void norm_one(const SkinnyOutput& out, int64_t n, int64_t row, int64_t col, float inv) {
  out.normed[row * n + col] =
      __float2bfloat16_rn(__bfloat162float(out.norm_weight[col]) * (__ldcg(out.residual + row * n + col) * inv));
}

// The fused epilogue's state in the workspace (skinny_gemm_workspace_bytes): a counter a group
// of 64 columns (kSwiGLU: gate block x and up block x + n / 128 together) and one for the norm,
// each left at zero by the launch's last arrival; with a norm, each group's sums of squares.
struct FusedState {
  unsigned* counters;  // [groups + 1]
  float* squares;      // [groups][m]
};

template <int kTiles>
__global__ void __launch_bounds__(kThreads, 4)
    skinny_gemm_kernel(const __nv_bfloat16* a, int64_t lda, const __nv_bfloat16* w, int m, int64_t n, int64_t k,
                       float* partial, const __grid_constant__ SkinnyOutput fout, FusedState fused, int pdl_flags) {
  using Tr = SkinnyTraits<kTiles>;
  __shared__ __align__(16) unsigned char stage[2][Tr::kStageBytes];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRowsPerCta + warp * 16;
  const bool rows = row0 < n;  // n is a multiple of 16: a warp's rows are all in or all out
  // Sub-slices of 128 k; where k is an odd multiple of 64 the last is half of one (its loads and
  // staging of chunk 0 alone).
  const int subs = static_cast<int>((k + kSubK - 1) / kSubK);
  const bool half_tail = k % kSubK != 0;
  const int first = static_cast<int>(static_cast<int64_t>(blockIdx.y) * subs / gridDim.y);
  const int last = static_cast<int>(static_cast<int64_t>(blockIdx.y + 1) * subs / gridDim.y);
  const __nv_bfloat16* w_row = w + (rows ? (row0 + gid) * k : 0) + 8 * tig;  // row gid + 8: 8·k further

  // Load i of a sub-slice: chunk c = i / 4, half h = (i / 2) % 2, row gid + 8·(i % 2).
  auto chunks_of = [&](int j) { return half_tail && j == subs - 1 ? 1 : 2; };  // 64-k chunks of sub-slice j
  auto load_w = [&](int j, uint4 (&dst)[kLoads]) {
    if (!rows) return;
    const __nv_bfloat16* p = w_row + static_cast<int64_t>(j) * kSubK;
    const int loads = 4 * chunks_of(j);
#pragma unroll
    for (int i = 0; i < kLoads; ++i)
      if (i < loads) dst[i] = load_stream(p + (i % 2) * 8 * k + (i / 4) * 64 + ((i / 2) % 2) * 32);
  };
  auto stage_a = [&](int j, int buf) {
    const int64_t k0 = static_cast<int64_t>(j) * kSubK;
    const int groups = Tr::kGroups / 2 * chunks_of(j);
    for (int e = tid; e < groups * 8 * kTiles; e += kThreads) {
      const int g = e % groups, row = e / groups;  // consecutive threads: consecutive k of a row
      const bool valid = row < m;
      cp_async_8(stage[buf] + (g * Tr::kPad + row) * 8, a + (valid ? row * lda + k0 + 4 * g : 0), valid);
    }
    cp_async_commit();
  };
  float acc[kTiles][4];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
  auto compute = [&](const uint4 (&wr)[kLoads], int buf, int pairs) {
    const unsigned char* s = stage[buf];
#pragma unroll
    for (int ch = 0; ch < 4; ++ch) {  // (chunk, half) pairs: 32 k each, loads 2·ch (row gid), 2·ch + 1 (gid + 8)
      if (ch >= pairs) break;  // a half sub-slice: chunk 0's two pairs
      const uint4 r0 = wr[2 * ch], r8 = wr[2 * ch + 1];
#pragma unroll
      for (int st = 0; st < 2; ++st) {  // k-step st: k base + 4·st .. + 3 (base = 32·ch + 8·tig)
        const uint32_t af[4] = {st ? r0.z : r0.x, st ? r8.z : r8.x, st ? r0.w : r0.y, st ? r8.w : r8.y};
        const int g = 8 * ch + 2 * tig + st;
#pragma unroll
        for (int t = 0; t < kTiles; ++t) {
          const uint2 b = *reinterpret_cast<const uint2*>(s + (g * Tr::kPad + 8 * t + gid) * 8);
          mma_16816<__nv_bfloat16>(acc[t], af, b.x, b.y);
        }
      }
    }
  };
  // One sub-slice: the next one's w loads and a staging issued first, then this one's MMAs.
  auto step = [&](int j, int buf, const uint4 (&cur)[kLoads], uint4 (&next)[kLoads]) {
    if (j + 1 < last) {
      load_w(j + 1, next);
      stage_a(j + 1, buf ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // a's sub-slice j is in stage[buf] for every warp
    if (rows) compute(cur, buf, 2 * chunks_of(j));
    __syncthreads();  // every warp is done with stage[buf] before sub-slice j + 2 is staged there
  };
  // (kPdlTrigger, off by default) The kernel after this one (its epilogue, or the step's next
  // kernel), if launched as a dependent, may start its CTAs once all of these have: they wait
  // for this grid's end.
  if (pdl_flags & kPdlTrigger) pdl_launch_dependents();
  uint4 wa[kLoads], wb[kLoads];
  if (first < last) load_w(first, wa);  // the weights: nothing before this kernel writes them
  // Launched as a programmatic dependent (skinny_gemm), this CTA may start while the kernel
  // before it ends: (kPdlPrefetch, off by default: slower) then its next kPrefetchSubs
  // sub-slices of w go to the L2 meanwhile (a row's
  // k range is contiguous: one bulk prefetch a row, by the warp's lanes 0..15), so that the
  // stream of weights runs on across the kernels' boundary. Then it waits here, every CTA,
  // before it reads a (that kernel's output) or writes.
  if ((pdl_flags & kPdlPrefetch) && rows && lane < 16 && first + 1 < last) {
    const int subs_ahead = last - first - 1 < kPrefetchSubs ? last - first - 1 : kPrefetchSubs;
    const int64_t k0 = static_cast<int64_t>(first + 1) * kSubK, span = static_cast<int64_t>(subs_ahead) * kSubK;
    const int64_t bytes = (span < k - k0 ? span : k - k0) * 2;
    prefetch_l2(w + (row0 + lane) * k + k0, static_cast<uint32_t>(bytes));
  }
  pdl_wait();
  if (first < last) {
    stage_a(first, 0);
    for (int j = first; j < last; j += 2) {
      step(j, 0, wa, wb);
      if (j + 1 < last) step(j + 1, 1, wb, wa);
    }
  }
  if (rows) {
    // acc[t]: rows gid (0, 1) and gid + 8 (2, 3) of the warp, rows of a 8·t + 2·tig (0, 2) and + 1 (1, 3).
    float* out = partial + static_cast<int64_t>(blockIdx.y) * m * n;
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int arow = 8 * t + 2 * tig + (e % 2);
        if (arow < m) out[static_cast<int64_t>(arow) * n + row0 + gid + 8 * (e / 2)] = acc[t][e];
      }
  }
  if (fused.counters == nullptr) return;  // the epilogue kernels finish

  // The fused epilogue (the last-block pattern): the last CTA to store a group's partials sums
  // the splits for the group's 64 columns (and, with a norm, their squares); the last group to
  // finish does the norm of every row. Each counter goes back to zero for the next launch.
  __shared__ unsigned s_last;
  const bool swiglu = fout.kind == SkinnyEpilogue::kSwiGLU;
  const unsigned groups = static_cast<unsigned>(swiglu ? n / 2 / kRowsPerCta : gridDim.x);
  const unsigned group = blockIdx.x % groups;
  __threadfence();  // this CTA's partials, device-wide, before its arrival
  __syncthreads();
  if (tid == 0) {
    const unsigned arrivals = gridDim.y * (swiglu ? 2u : 1u);
    s_last = atomicAdd(fused.counters + group, 1u) + 1 == arrivals;
    if (s_last) atomicExch(fused.counters + group, 0u);
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();  // every arrival's partials before this CTA's loads
  const int splits = static_cast<int>(gridDim.y);
  const int64_t plane = static_cast<int64_t>(m) * n, cols = swiglu ? n / 2 : n;
  const int64_t col0 = static_cast<int64_t>(group) * kRowsPerCta;
  const bool norm = fout.kind == SkinnyEpilogue::kResidual && fout.norm_weight != nullptr;  // then m <= 8
  __shared__ float squared[8][kRowsPerCta];  // a norm's x² of the group, summed in column order below
  for (int i = tid; i < m * kRowsPerCta; i += kThreads) {
    const int64_t row = i / kRowsPerCta, col = col0 + i % kRowsPerCta;
    const float v = col < cols ? finish_one(fout, partial, splits, plane, n, row, col) : 0.f;
    if (norm) squared[row][i % kRowsPerCta] = v * v;
  }
  if (!norm) return;
  __syncthreads();
  if (tid < m) {  // the group's sums of squares, a row a thread
    float ss = 0.f;
    for (int c = 0; c < kRowsPerCta; ++c) ss += squared[tid][c];
    fused.squares[static_cast<int64_t>(group) * m + tid] = ss;
  }
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    s_last = atomicAdd(fused.counters + groups, 1u) + 1 == groups;
    if (s_last) atomicExch(fused.counters + groups, 0u);
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  __shared__ float inv[8];  // m <= 8 on this path (skinny_gemm)
  if (tid < m) {
    float total = 0.f;
    for (unsigned g = 0; g < groups; ++g) total += __ldcg(fused.squares + static_cast<int64_t>(g) * m + tid);
    inv[tid] = rsqrtf(total / static_cast<float>(n) + fout.eps);
  }
  __syncthreads();
  for (int64_t i = tid; i < m * n; i += kThreads) norm_one(fout, n, i / n, i % n, inv[i / n]);
}

// kStore, kFp32, kSwiGLU: element by element over the outputs.
// The three epilogue kernels are launched as programmatic dependents too (skinny_gemm).
__global__ void skinny_finish_kernel(const float* partial, int splits, int m, int64_t n, SkinnyOutput out) {
  pdl_wait();
  pdl_launch_dependents();
  const int64_t plane = static_cast<int64_t>(m) * n;
  const int64_t cols = out.kind == SkinnyEpilogue::kSwiGLU ? n / 2 : n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < m * cols;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    finish_one(out, partial, splits, plane, n, i / cols, i % cols);
}

// The sum of v over a block of kFinishThreads threads, in thread 0 (the others: their warp's).
__device__ __forceinline__ float block_total(float v) {
  __shared__ float part[kFinishThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int i = 1; i < kFinishThreads / 32; ++i) v += part[i];
  return v;
}

// kResidual, first kernel: block (b, row) adds c's columns 256·b .. + 255 of the row into x and,
// with a norm, writes their sum of squares to squares[row][b] (a row's blocks spread the splits'
// partials over the SMs: one block a row read 16 splits × 16 KB alone at batch 1).
__global__ void skinny_residual_kernel(const float* partial, int splits, int m, int64_t n, SkinnyOutput out,
                                       float* squares) {
  pdl_wait();
  pdl_launch_dependents();
  const int64_t plane = static_cast<int64_t>(m) * n, row = blockIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kFinishThreads + threadIdx.x;
  const float v = col < n ? finish_one(out, partial, splits, plane, n, row, col) : 0.f;
  if (out.norm_weight == nullptr) return;
  const float total = block_total(v * v);
  if (threadIdx.x == 0) squares[row * gridDim.x + blockIdx.x] = total;
}

// kResidual with a norm, second kernel: the row's sum of squares from its blocks' (in order:
// the same value in every block), then h = bf16(w · (x · rsqrt(mean + eps))) (the model's rms_norm).
__global__ void skinny_norm_kernel(int64_t n, SkinnyOutput out, const float* squares) {
  pdl_wait();
  pdl_launch_dependents();
  const int64_t row = blockIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kFinishThreads + threadIdx.x;
  float total = 0.f;
  for (unsigned b = 0; b < gridDim.x; ++b) total += squares[row * gridDim.x + b];
  if (col < n) norm_one(out, n, row, col, rsqrtf(total / static_cast<float>(n) + out.eps));
}

// kResidual with a norm in one launch (SkinnyOutput::norm_one_launch; sm_90+): a cluster of
// kNormCluster blocks a row, block r adding c's columns r·span .. + span - 1 into x and summing
// their new x²; the cluster's sums meet in distributed shared memory (every block adds the
// eight in the same order: one inv a row), then each block writes h for its columns. No grid
// boundary between the add and the norm, and a row's partials still spread over eight SMs
// (one block a row would read 16 splits × 16 KB through one SM at batch 1).
constexpr int kNormCluster = 8;
__global__ void __launch_bounds__(kFinishThreads)
    skinny_residual_norm_kernel(const float* partial, int splits, int m, int64_t n, const __grid_constant__ SkinnyOutput out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  pdl_wait();
  pdl_launch_dependents();
  const cg::cluster_group cluster = cg::this_cluster();
  const int64_t plane = static_cast<int64_t>(m) * n, row = blockIdx.y;
  const int64_t span = (n + kNormCluster - 1) / kNormCluster, c0 = cluster.block_rank() * span;
  const int64_t c1 = c0 + span < n ? c0 + span : n;
  float ss = 0.f;
  for (int64_t col = c0 + threadIdx.x; col < c1; col += kFinishThreads) {
    const float v = finish_one(out, partial, splits, plane, n, row, col);
    ss += v * v;
  }
  __shared__ float block_ss, inv;
  ss = block_total(ss);
  if (threadIdx.x == 0) block_ss = ss;
  cluster.sync();  // every block's block_ss, cluster-wide
  if (threadIdx.x == 0) {
    float total = 0.f;
    for (unsigned r = 0; r < kNormCluster; ++r) total += *cluster.map_shared_rank(&block_ss, r);
    inv = rsqrtf(total / static_cast<float>(n) + out.eps);
  }
  cluster.sync();  // inv for the block; no block leaves (its shared memory) before the others read it
  for (int64_t col = c0 + threadIdx.x; col < c1; col += kFinishThreads) norm_one(out, n, row, col, inv);  // x: this thread's own
#endif
}

// kRopeAppend: block (b, row) takes items 256·b .. + 255 of the row: first the (i, i + D/2)
// pairs of q's and k's heads (c's columns [0, (heads + kv_heads)·D)), summed over the splits,
// rounded to bf16, rotated and stored as rope_append does (and k's into the pool), then v's
// columns, stored and appended. The row's slot once a thread (kv_slot_base).
__global__ void skinny_rope_kernel(const float* partial, int splits, int m, int64_t n,
                                   const __grid_constant__ SkinnyOutput out) {
  pdl_wait();
  pdl_launch_dependents();
  const int64_t plane = static_cast<int64_t>(m) * n, row = blockIdx.y;
  const int d = out.head_dim, half = d / 2;
  const int heads = static_cast<int>(out.cols[0] / d), kv_heads = static_cast<int>(out.cols[1] / d);
  const int pairs = (heads + kv_heads) * half;
  const int j = static_cast<int>(blockIdx.x) * kFinishThreads + static_cast<int>(threadIdx.x);
  if (j >= pairs + kv_heads * d) return;
  const float* c = partial + row * n;
  if (j < pairs) {
    const int h = j / half, i = j % half;
    const int64_t col = static_cast<int64_t>(h) * d + i;
    __nv_bfloat16 a = __float2bfloat16_rn(sum_splits(c, splits, plane, col));
    __nv_bfloat16 b = __float2bfloat16_rn(sum_splits(c, splits, plane, col + half));
    rope_rotate(static_cast<float>(out.positions[row]), out.inv_freq[i], a, b);
    const bool is_q = h < heads;
    __nv_bfloat16* dst = is_q ? out.out[0] + (row * heads + h) * d : out.out[1] + (row * kv_heads + h - heads) * d;
    dst[i] = a;
    dst[i + half] = b;
    if (!is_q) {
      const int64_t base = kv_slot_base(out.pages, out.slots, row, out.append);  // (a 64-bit division: k's and v's only)
      if (base >= 0) {
        kv_store(out.pages, false, base, h - heads, i, a);
        kv_store(out.pages, false, base, h - heads, i + half, b);
      }
    }
  } else {
    const int e = j - pairs;  // v's element: kv head e / d, dim e % d
    const __nv_bfloat16 x =
        __float2bfloat16_rn(sum_splits(c, splits, plane, static_cast<int64_t>(heads + kv_heads) * d + e));
    out.out[2][row * kv_heads * d + e] = x;
    const int64_t base = kv_slot_base(out.pages, out.slots, row, out.append);
    if (base >= 0) kv_store(out.pages, true, base, e / d, e % d, x);
  }
}

// skinny_residual_norm_kernel in clusters of kNormCluster blocks a row: whether it launched. A
// cluster the device cannot place now (e.g. SMs limited by MPS): false, the launch's error
// cleared, and the caller takes two launches (not while capturing a graph, which the failed
// launch has ended: then true and the error stays for the caller's cudaGetLastError).
bool norm_in_clusters(const float* partial, int splits, int m, int64_t n, const SkinnyOutput& out, cudaStream_t stream,
                      bool dependent) {
  ::flashserve::cuda::LaunchConfig lc(dim3(kNormCluster, static_cast<unsigned>(m)), dim3(kFinishThreads), 0, stream,
                                      dependent);
  lc.cluster(dim3(kNormCluster, 1, 1));
  if (cudaLaunchKernelEx(&lc.config, skinny_residual_norm_kernel, partial, splits, m, n, out) == cudaSuccess) return true;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusActive;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) return true;
  (void)cudaGetLastError();
  return false;
}

}  // namespace

// 1 yes, -1 no, 0 not known yet (a query that failed is asked again at the next call).
bool skinny_norm_one_launch_available() {
  static std::atomic<int> fit{0};
  if (fit.load(std::memory_order_relaxed) == 0) {
    if (::flashserve::cuda::binary_version<skinny_residual_norm_kernel>() < 90) {
      fit.store(-1, std::memory_order_relaxed);
    } else {
      ::flashserve::cuda::LaunchConfig probe(dim3(kNormCluster, 1), dim3(kFinishThreads), 0, nullptr, false);
      probe.cluster(dim3(kNormCluster, 1, 1));
      int clusters = 0;
      const cudaError_t err = cudaOccupancyMaxActiveClusters(&clusters, skinny_residual_norm_kernel, &probe.config);
      if (err == cudaSuccess) {
        fit.store(clusters > 0 ? 1 : -1, std::memory_order_relaxed);
      } else if (cudaPeekAtLastError() == err) {
        (void)cudaGetLastError();  // the query's own error, not an earlier launch's: two launches this time
      }
    }
  }
  return fit.load(std::memory_order_relaxed) == 1;
}

namespace {

}  // namespace

bool skinny_gemm_supported(int64_t m, int64_t n, int64_t k, int64_t lda, const void* a, const void* w) {
  return m >= 1 && m <= 32 && n >= 16 && n % 16 == 0 && k >= 64 && k % 64 == 0 && lda >= k && lda % 8 == 0 &&
         reinterpret_cast<uintptr_t>(a) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0 &&
         (n + kRowsPerCta - 1) / kRowsPerCta <= 2147483647ll;
}

int skinny_gemm_splits(int64_t n, int64_t k, int sms) {
  const int64_t blocks = (n + kRowsPerCta - 1) / kRowsPerCta, subs = (k + kSubK - 1) / kSubK;
  const int64_t need = std::max<int64_t>(1, (4ll * std::max(1, sms) + blocks - 1) / blocks);  // a wave of 4 CTAs an SM
  const int64_t cap = std::min<int64_t>(16, std::max<int64_t>(1, subs));
  if (const char* force = std::getenv("FLASHSERVE_SKINNY_SPLITS")) {
    const long f = std::strtol(force, nullptr, 10);
    if (f >= 1) return static_cast<int>(std::min<int64_t>(f, cap));
  }
  // FLASHSERVE_SKINNY_SPLIT_RULE=wave (read at each call; A/B, not measured yet): the most
  // splits whose CTAs fit one wave of 4 an SM (qkv 5, o and down 8, gate|up 1 on 132 SMs), where
  // the rule below gives 1.45-1.94 waves (qkv 768 CTAs, o 1024, gate|up and down 896), whose
  // last partial wave streams with fewer CTAs an SM.
  if (const char* rule = std::getenv("FLASHSERVE_SKINNY_SPLIT_RULE"); rule != nullptr && !std::strcmp(rule, "wave"))
    return static_cast<int>(std::clamp<int64_t>(4ll * std::max(1, sms) / blocks, 1, cap));
  if (need >= cap) return static_cast<int>(cap);
  for (int64_t s = need; s <= cap; ++s)  // a divisor of the sub-slices: every split the same work
    if (subs % s == 0) return static_cast<int>(s);
  return static_cast<int>(need);
}

int64_t skinny_gemm_workspace_bytes(int64_t m, int64_t n, int64_t k, int sms) {
  // The splits' partials, then the sums of squares of a norm (a row's 64-column groups: the
  // launched epilogue's 256-column blocks take fewer).
  const int64_t partials = static_cast<int64_t>(skinny_gemm_splits(n, k, sms)) * m * n;
  return (partials + m * ((n + kRowsPerCta - 1) / kRowsPerCta)) * static_cast<int64_t>(sizeof(float));
}

int64_t skinny_gemm_counters(int64_t n) { return (n + kRowsPerCta - 1) / kRowsPerCta + 1; }

bool skinny_gemm_fuses(int64_t m, int64_t n, const SkinnyOutput& out, const SkinnyWorkspace& ws) {
  if (out.launch_epilogue || ws.counters == nullptr || ws.counter_count < skinny_gemm_counters(n)) return false;
  if (out.kind == SkinnyEpilogue::kRopeAppend) return false;  // a launch of its own (skinny_gemm.h)
  if (out.kind == SkinnyEpilogue::kResidual && out.norm_weight != nullptr && m > 8) return false;  // one CTA's norm
  if (out.kind == SkinnyEpilogue::kSwiGLU && (n / 2) % kRowsPerCta != 0) return false;  // gate, up in whole groups
  return true;
}

Status skinny_gemm(const __nv_bfloat16* a, int64_t lda, const __nv_bfloat16* w, int64_t m, int64_t n, int64_t k,
                   const SkinnyOutput& out, const SkinnyWorkspace& ws, int sms, cudaStream_t stream) {
  if (!skinny_gemm_supported(m, n, k, lda, a, w))
    return invalid_argument("skinny_gemm: m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " +
                            std::to_string(k) + ", lda " + std::to_string(lda) +
                            " (it takes m 1..32, n a multiple of 16, k a multiple of 64, 16-byte aligned a rows and w)");
  const int64_t need = skinny_gemm_workspace_bytes(m, n, k, sms);
  if (ws.partials == nullptr || ws.bytes < need || reinterpret_cast<uintptr_t>(ws.partials) % 16)
    return invalid_argument("skinny_gemm: the workspace needs " + std::to_string(need) + " bytes, 16-byte aligned");
  switch (out.kind) {
    case SkinnyEpilogue::kStore: {
      if (out.cols[0] + out.cols[1] + out.cols[2] != n || out.out[0] == nullptr ||
          (out.cols[1] > 0 && out.out[1] == nullptr) || (out.cols[2] > 0 && out.out[2] == nullptr))
        return invalid_argument("skinny_gemm: the outputs' columns must add up to n, each with its buffer");
      break;
    }
    case SkinnyEpilogue::kFp32:
      if (out.out_fp32 == nullptr) return invalid_argument("skinny_gemm: kFp32 needs out_fp32");
      break;
    case SkinnyEpilogue::kResidual:
      if (out.residual == nullptr || (out.norm_weight != nullptr && out.normed == nullptr))
        return invalid_argument("skinny_gemm: kResidual needs the residual (and, with a norm weight, its output)");
      break;
    case SkinnyEpilogue::kSwiGLU:
      if (out.act == nullptr || n % 2 != 0) return invalid_argument("skinny_gemm: kSwiGLU needs act and an even n");
      break;
    case SkinnyEpilogue::kRopeAppend: {
      const int64_t d = out.head_dim;
      if (d < 2 || d % 2 != 0 || out.cols[0] < d || out.cols[0] % d != 0 || out.cols[1] < d || out.cols[1] % d != 0 ||
          out.cols[2] != out.cols[1] || out.cols[0] + out.cols[1] + out.cols[2] != n || out.out[0] == nullptr ||
          out.out[1] == nullptr || out.out[2] == nullptr || out.positions == nullptr || out.inv_freq == nullptr)
        return invalid_argument("skinny_gemm: kRopeAppend needs q, k, v pieces of whole heads of an even head_dim "
                                "(k's as wide as v's), positions and inv_freq");
      if (out.append && (out.slots == nullptr || !kv_appendable(out.pages)))
        return invalid_argument("skinny_gemm: kRopeAppend's append needs slots and bf16 or FP8 pages (with scales)");
      break;
    }
  }
  const int splits = skinny_gemm_splits(n, k, sms);
  float* partial = static_cast<float*>(ws.partials);
  float* squares = partial + static_cast<int64_t>(splits) * m * n;
  const FusedState fused{skinny_gemm_fuses(m, n, out, ws) ? ws.counters : nullptr, squares};
  const dim3 grid(static_cast<unsigned>((n + kRowsPerCta - 1) / kRowsPerCta), static_cast<unsigned>(splits));
  const int mi = static_cast<int>(m);
  // A programmatic dependent of the kernel before it on sm_90+ (its CTAs load their first
  // weights while that kernel ends; see the kernel's pdl_wait), as decode launches, and so are
  // the epilogue's kernels after it; FLASHSERVE_SKINNY_PDL=0 (read once) launches all plainly,
  // for A/B.
  static const bool pdl_allowed = [] {
    const char* env = std::getenv("FLASHSERVE_SKINNY_PDL");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  static const int pdl_flags = [] {
    const char* env = std::getenv("FLASHSERVE_SKINNY_PDL_FLAGS");
    return env != nullptr ? static_cast<int>(std::strtol(env, nullptr, 10)) : kPdlEpilogue;
  }();
  const bool pdl_epilogue = pdl_allowed && (pdl_flags & kPdlEpilogue) != 0;
  auto launch = [&](auto kernel) {
    const bool dependent = pdl_allowed && ::flashserve::cuda::binary_version<decltype(kernel)::value>() >= 90;
    ::flashserve::cuda::LaunchConfig lc(grid, dim3(kThreads), 0, stream, dependent);
    return cudaLaunchKernelEx(&lc.config, decltype(kernel)::value, a, lda, w, mi, n, k, partial, out, fused, pdl_flags);
  };
  cudaError_t err = m <= 8    ? launch(std::integral_constant<decltype(&skinny_gemm_kernel<1>), &skinny_gemm_kernel<1>>{})
                    : m <= 16 ? launch(std::integral_constant<decltype(&skinny_gemm_kernel<2>), &skinny_gemm_kernel<2>>{})
                              : launch(std::integral_constant<decltype(&skinny_gemm_kernel<4>), &skinny_gemm_kernel<4>>{});
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err != cudaSuccess) return flashserve::cuda_status(err, "skinny_gemm kernel");
  if (fused.counters != nullptr) return Status::Ok();  // the kernel finished
  if (out.kind == SkinnyEpilogue::kRopeAppend) {
    const int64_t per_row = (out.cols[0] + out.cols[1]) / 2 + out.cols[2];  // q and k pairs, then v
    const dim3 rows(static_cast<unsigned>((per_row + kFinishThreads - 1) / kFinishThreads), static_cast<unsigned>(m));
    err = launch_kernel<skinny_rope_kernel>(rows, dim3(kFinishThreads), 0, stream, pdl_epilogue, partial, splits, mi, n,
                                            out);
  } else if (out.kind == SkinnyEpilogue::kResidual && out.norm_weight != nullptr && out.norm_one_launch &&
             skinny_norm_one_launch_available() && norm_in_clusters(partial, splits, mi, n, out, stream, pdl_epilogue)) {
    err = cudaGetLastError();  // launched in clusters (or a capture's failed launch: its error)
  } else if (out.kind == SkinnyEpilogue::kResidual) {
    const dim3 rows(static_cast<unsigned>((n + kFinishThreads - 1) / kFinishThreads), static_cast<unsigned>(m));
    err = launch_kernel<skinny_residual_kernel>(rows, dim3(kFinishThreads), 0, stream, pdl_epilogue, partial, splits, mi,
                                                n, out, squares);
    if (err == cudaSuccess && out.norm_weight != nullptr)
      err = launch_kernel<skinny_norm_kernel>(rows, dim3(kFinishThreads), 0, stream, pdl_epilogue, n, out, squares);
  } else {
    const int64_t items = m * (out.kind == SkinnyEpilogue::kSwiGLU ? n / 2 : n);
    const int64_t blocks = std::min<int64_t>((items + kFinishThreads - 1) / kFinishThreads, 4ll * std::max(1, sms) * 8);
    err = launch_kernel<skinny_finish_kernel>(dim3(static_cast<unsigned>(blocks)), dim3(kFinishThreads), 0, stream,
                                              pdl_epilogue, partial, splits, mi, n, out);
  }
  return flashserve::cuda_status(err, "skinny_gemm epilogue");
}

}  // namespace flashserve::model::cuda
