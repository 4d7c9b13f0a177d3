// CUDA merge_states: partial attention states merged by logsumexp rescaling; one instance
// per input storage type (the output type is a run-time switch at the store).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/cuda/device_utils.cuh"
#include "attention/cuda/merge_cuda.h"
#include "attention/dispatch.h"
#include "common/cuda_check.h"

namespace flashserve::cuda {

namespace {

template <typename T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ float to_float<__half>(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

__device__ __forceinline__ void store_f(void* base, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kFloat32: static_cast<float*>(base)[i] = v; break;
    case DType::kFloat16: static_cast<__half*>(base)[i] = __float2half_rn(v); break;
    default: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v); break;
  }
}

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxDimsPerLane = 8;  // head_dim <= 256
// A lane keeps kValuesInFlight / kDims states' dims in flight (12 at head_dim <= 128): decode's
// usual 33 splits are one round of the four warps' loads, not two. At most 96 registers, so a
// merge CTA launched early (PDL) still fits on an SM beside two decode split CTAs (2 × 208 × 128
// + 96 × 128 = 64K) and waits there.
constexpr int kValuesInFlight = 48;
constexpr int kMergeMinBlocks = 5;

// A running merge of states: max m of their lse, sum s of exp(lse - m), and acc, the sum of
// exp(lse - m) · o over a lane's dims. absorb() takes kStates more (lse l[u], dims v[u][k]; every
// lane holds the same l, so m and s are warp-uniform). An empty state (lse -inf) weighs 0 and
// its o (possibly garbage) is dropped by a select, never multiplied. Rescaling to the new max
// once per batch of states, and normalising once at the end, keeps the chain short: no
// logsumexp pass over the states before their weights (v3.1's merge), one exp a state.
template <int kDims>
struct MergeAcc {
  float m = -INFINITY, s = 0.f, acc[kDims] = {};

  template <int kStates>
  __device__ __forceinline__ void absorb(const float (&l)[kStates], const float (&v)[kStates][kDims]) {
    float mx = m;
#pragma unroll
    for (int u = 0; u < kStates; ++u) mx = fmaxf(mx, l[u]);
    if (mx == -INFINITY) return;  // nothing but empty states so far
    const float f = m == -INFINITY ? 0.f : __expf(m - mx);
    s *= f;
#pragma unroll
    for (int k = 0; k < kDims; ++k) acc[k] *= f;
#pragma unroll
    for (int u = 0; u < kStates; ++u) {
      const float w = l[u] == -INFINITY ? 0.f : __expf(l[u] - mx);
      s += w;
#pragma unroll
      for (int k = 0; k < kDims; ++k) acc[k] += w != 0.f ? w * v[u][k] : 0.f;
    }
    m = mx;
  }
};

// One CTA per row (with few states, warp_rows: a warp a row, below): lanes over head_dim
// (dims lane + 32k), the kWarpsPerBlock warps over the states (warp w: states w, w + 4, ...). A
// warp issues the loads of kStatesInFlight states (o and lse) at once, so the usual split
// counts (<= 48 states at head_dim <= 128) cost one L2 round trip; each warp merges its states
// against its own max, and the four partial merges meet in shared memory (a barrier), where
// they are rescaled to the row's max and normalised. A load past head_dim is predicated off.
// kDims: dims a lane (head_dim <= 32·kDims); kValuesInFlight / kDims states in flight.
template <typename TIn, int kDims>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, kMergeMinBlocks)
    merge_kernel(const __grid_constant__ MergeParams p, const bool warp_rows, const int warm_ctas) {
  constexpr int kStatesInFlight = kValuesInFlight / kDims;
  constexpr int kRound = kWarpsPerBlock * kStatesInFlight;  // states of one round of all warps
  __shared__ float part[kWarpsPerBlock][kDims * 32];
  __shared__ float part_m[kWarpsPerBlock], part_s[kWarpsPerBlock];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int num_states = p.num_states, head_dim = p.head_dim;
  // Two passes of the same code in the first warm_ctas CTAs (a programmatic dependent launch:
  // the CTAs that fit beside the split kernel's and start early): the first, dry, runs while
  // the split kernel still runs, reading no global memory (loads predicated off, zeros instead)
  // and writing nothing, so the second starts with this code in the SM's instruction cache
  // (0.15-0.3 us off the merge's tail after the split kernel: bench/history/decode.md,
  // "merge v3.9").
  // The other CTAs skip it: most start once the split kernel has ended, on SMs that ran it (a
  // heuristic: block indices are not bound to SMs, and an early CTA may also start late).
#pragma unroll 1
  for (int pass = static_cast<int>(blockIdx.x) < warm_ctas ? 0 : 1; pass < 2; ++pass) {
    const bool dry = pass == 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (!dry) {
      // Launched as a programmatic dependent of the split kernel: wait here until its writes are
      // visible (a no-op for an ordinary launch).
      asm volatile("griddepcontrol.wait;\n" ::: "memory");
      // The next kernel, if launched as a programmatic dependent (decode's next split kernel),
      // may be launched now: it waits on the device for this grid's writes before reading.
      asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    }
#endif
    float v[kStatesInFlight][kDims], l[kStatesInFlight];
    // States s0 + u·step (u < kStatesInFlight) of a row into l and v; absent ones as empty
    // (dry: every one as a zero state, so the merge below runs all its code).
    auto load = [&](const float* lse_row, const TIn* o_row, int s0, int step) {
#pragma unroll
      for (int u = 0; u < kStatesInFlight; ++u) {
        const int s = s0 + u * step;
        const bool live = !dry && s < num_states;
        const TIn* src = o_row + (live ? s : 0) * p.o_in_state_stride;
        l[u] = live ? lse_row[s * p.lse_in_state_stride] : (dry ? 0.f : -INFINITY);
#pragma unroll
        for (int k = 0; k < kDims; ++k) {
          const int d = lane + 32 * k;
          v[u][k] = live && d < head_dim ? to_float(src[d]) : 0.f;
        }
      }
    };
    MergeAcc<kDims> ma;
    if (warp_rows) {
      // Few states (<= kStatesInFlight, e.g. decode's batch-8 splits of 4): a warp a row, all
      // its states' loads in one round; a CTA takes kWarpsPerBlock rows, so the grid is a
      // quarter as many CTAs (the early-launched merge CTAs fit beside the split kernel's).
      const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
      if (row >= p.num_rows) return;
      load(p.lse_in + row * p.lse_in_row_stride, static_cast<const TIn*>(p.o_in) + row * p.o_in_row_stride, 0, 1);
      ma.absorb(l, v);
      const float inv = ma.s > 0.f ? 1.f / ma.s : 0.f;
#pragma unroll
      for (int k = 0; k < kDims; ++k) {
        const int d = lane + 32 * k;  // this lane read state 0's d above: o_out may alias it
        if (!dry && d < head_dim) store_f(p.o_out, p.out_dtype, row * p.o_out_row_stride + d, ma.acc[k] * inv);
      }
      if (!dry && p.lse_out != nullptr && lane == 0)
        p.lse_out[row * p.lse_out_row_stride] = ma.s > 0.f ? ma.m + __logf(ma.s) : -INFINITY;
      continue;
    }
    const int64_t row = blockIdx.x;
    const float* lse_row = p.lse_in + row * p.lse_in_row_stride;
    const TIn* o_row = static_cast<const TIn*>(p.o_in) + row * p.o_in_row_stride;
    for (int s0 = warp;;) {
      load(lse_row, o_row, s0, kWarpsPerBlock);
      ma.absorb(l, v);
      s0 += kRound;
      if (s0 >= num_states) break;
    }
#pragma unroll
    for (int k = 0; k < kDims; ++k) part[warp][lane + 32 * k] = ma.acc[k];
    if (lane == 0) {
      part_m[warp] = ma.m;
      part_s[warp] = ma.s;
    }
    // Every read of this row is done (the barrier), so o_out may alias state 0.
    __syncthreads();
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarpsPerBlock; ++w) mx = fmaxf(mx, part_m[w]);
    float f[kWarpsPerBlock], sum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarpsPerBlock; ++w) {
      f[w] = part_m[w] == -INFINITY ? 0.f : __expf(part_m[w] - mx);
      sum += f[w] * part_s[w];
    }
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    for (int d = threadIdx.x; d < head_dim; d += kWarpsPerBlock * 32) {
      float o = 0.f;
#pragma unroll
      for (int w = 0; w < kWarpsPerBlock; ++w) o += f[w] * part[w][d];
      if (!dry) store_f(p.o_out, p.out_dtype, row * p.o_out_row_stride + d, o * inv);
    }
    if (!dry && p.lse_out != nullptr && threadIdx.x == 0)
      p.lse_out[row * p.lse_out_row_stride] = sum > 0.f ? mx + __logf(sum) : -INFINITY;
    __syncthreads();  // part is read before the next pass writes it
  }
}

// The input types built: merge_kernel<TIn, 4 or 8> for each.
using MergeInputs = DTypes<DType::kFloat32, DType::kFloat16, DType::kBFloat16>;

// The instance for head_dim <= 128 (narrow: 4 dims a lane) or above, and its binary_version.
template <typename TIn>
void (*merge_instance(bool narrow, int& version))(MergeParams, bool, int) {
  if (narrow) {
    version = binary_version<merge_kernel<TIn, 4>>();
    return merge_kernel<TIn, 4>;
  }
  version = binary_version<merge_kernel<TIn, 8>>();
  return merge_kernel<TIn, 8>;
}

}  // namespace

Status merge_cuda(const MergeParams& p, void* stream, bool dependent_launch, int sm_count) {
  if (p.head_dim > 32 * kMaxDimsPerLane)
    return unsupported("merge_states: head_dim > 256 is not supported on CUDA");
  const bool narrow = p.head_dim <= 128;  // 4 dims a lane, else 8
  const bool warp_rows = p.num_states <= kValuesInFlight / (narrow ? 4 : 8);  // merge_kernel's kStatesInFlight
  const int64_t blocks = warp_rows ? (p.num_rows + kWarpsPerBlock - 1) / kWarpsPerBlock : p.num_rows;
  if (blocks > 0x7fffffff) return unsupported("merge_states: too many rows for one launch");
  const auto st = static_cast<cudaStream_t>(stream);
  const unsigned grid = static_cast<unsigned>(blocks);
  void (*kernel)(MergeParams, bool, int) = nullptr;
  int version = 0;  // the architecture the chosen instance was built for
  FS_RETURN_IF_ERROR(dispatch_dtype<MergeInputs>("merge_states on CUDA", p.in_dtype, [&](auto dt) {
    kernel = merge_instance<cuda_storage_t<decltype(dt)::value>>(narrow, version);
  }));
  // Only code built for sm_90+ waits for the split grid (griddepcontrol).
  const bool dependent = dependent_launch && version >= 90;
  LaunchConfig launch(dim3(grid), dim3(kWarpsPerBlock * 32), 0, st, dependent);
  // A dependent launch's CTAs wait for the split grid; the first SM-count of them run the code
  // once dry meanwhile.
  int warm_ctas = 0;
  if (dependent) {
    warm_ctas = sm_count;
    if (warm_ctas <= 0) {
      int device = 0;
      FS_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
      FS_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&warm_ctas, cudaDevAttrMultiProcessorCount, device));
    }
  }
  const cudaError_t err = cudaLaunchKernelEx(&launch.config, kernel, p, warp_rows, warm_ctas);
  FS_RETURN_IF_ERROR(cuda_status(err, "merge kernel launch"));
  FS_CUDA_CHECK_LAUNCH("merge kernel");
  return Status::Ok();
}

}  // namespace flashserve::cuda
