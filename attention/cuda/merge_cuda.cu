// CUDA merge_states: partial attention states merged by logsumexp rescaling; one instance
// per input storage type (the output type is a run-time switch at the store).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/cuda/device_utils.cuh"
#include "attention/cuda/merge_cuda.h"
#include "attention/softmax_state.h"
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

// A lane's running logsumexp (max m, sum s of exp(x - m)) over some values; combined across
// the warp by shuffles.
struct LseAcc {
  float m = -INFINITY, s = 0.f;
  __device__ __forceinline__ void add(float x) {
    if (x == -INFINITY) return;  // an empty state
    if (x > m) {
      s = s * __expf(m - x) + 1.f;  // exp(-inf) = 0 the first time
      m = x;
    } else {
      s += __expf(x - m);
    }
  }
  __device__ __forceinline__ float warp_total() {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
      const float mx = fmaxf(m, m2);
      if (mx != -INFINITY) {
        s = (m == -INFINITY ? 0.f : s * __expf(m - mx)) + (m2 == -INFINITY ? 0.f : s2 * __expf(m2 - mx));
        m = mx;
      }
    }
    return m == -INFINITY ? -INFINITY : m + __logf(s);
  }
};

// One CTA per row (with few states, warp_rows: a warp a row, below): lanes over head_dim
// (dims lane + 32k), the kWarpsPerBlock warps over the states (warp w: states w, w + 4, ...). A
// warp first issues the loads of its first kStatesInFlight states (o and lse), then every warp
// reads all the row's lse (lanes over states, one pass of a running logsumexp, shuffles) while
// those are in flight: the usual split counts (<= 48 states at head_dim <= 128) cost one L2
// round trip, not one per state (v2.1) or per four states (v2.5). The warps' partial sums meet
// in shared memory. An empty state's o (possibly garbage) is dropped by a select, never
// multiplied; a load past head_dim is predicated off. kDims: dims a lane (head_dim <=
// 32·kDims); kValuesInFlight / kDims states in flight.
template <typename TIn, int kDims>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, kMergeMinBlocks)
    merge_kernel(const __grid_constant__ MergeParams p, const bool warp_rows) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched as a programmatic dependent of the split kernel: wait here until its writes are
  // visible (a no-op for an ordinary launch).
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  // The next kernel, if launched as a programmatic dependent (decode's next split kernel), may
  // be launched now: it waits on the device for this grid's writes before it reads anything.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  constexpr int kStatesInFlight = kValuesInFlight / kDims;
  constexpr int kRound = kWarpsPerBlock * kStatesInFlight;  // states of one round of all warps
  __shared__ float part[kWarpsPerBlock][kDims * 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int num_states = p.num_states, head_dim = p.head_dim;
  if (warp_rows) {
    // Few states (<= kStatesInFlight, e.g. decode's batch-8 splits of 4): a warp a row, all its
    // states' loads in one round, the total lse in every lane from the same values; a CTA takes
    // kWarpsPerBlock rows, so the grid is a quarter as many CTAs (the early-launched merge CTAs
    // fit beside the split kernel's in one round, not two).
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
    if (row >= p.num_rows) return;
    const float* lse_row = p.lse_in + row * p.lse_in_row_stride;
    const TIn* o_in = static_cast<const TIn*>(p.o_in) + row * p.o_in_row_stride;
    float v[kStatesInFlight][kDims], l[kStatesInFlight];
    LseAcc la;
#pragma unroll
    for (int s = 0; s < kStatesInFlight; ++s) {
      const bool live = s < num_states;
      l[s] = live ? lse_row[s * p.lse_in_state_stride] : -INFINITY;
#pragma unroll
      for (int k = 0; k < kDims; ++k) {
        const int d = lane + 32 * k;
        v[s][k] = live && d < head_dim ? to_float(o_in[s * p.o_in_state_stride + d]) : 0.f;
      }
    }
#pragma unroll
    for (int s = 0; s < kStatesInFlight; ++s) la.add(l[s]);
    const float total = la.m == -INFINITY ? -INFINITY : la.m + __logf(la.s);
#pragma unroll
    for (int k = 0; k < kDims; ++k) {
      float o = 0.f;
#pragma unroll
      for (int s = 0; s < kStatesInFlight; ++s) {
        const float w = merge_weight(l[s], total);
        o += w != 0.f ? w * v[s][k] : 0.f;
      }
      const int d = lane + 32 * k;  // this lane read state 0's d above: o_out may alias it
      if (d < head_dim) store_f(p.o_out, p.out_dtype, row * p.o_out_row_stride + d, o);
    }
    if (p.lse_out != nullptr && lane == 0) p.lse_out[row * p.lse_out_row_stride] = total;
    return;
  }
  const int64_t row = blockIdx.x;
  const float* lse_row = p.lse_in + row * p.lse_in_row_stride;
  const int64_t lse_step = p.lse_in_state_stride, o_step = p.o_in_state_stride;
  const TIn* o_in = static_cast<const TIn*>(p.o_in) + row * p.o_in_row_stride;

  float v[kStatesInFlight][kDims], l[kStatesInFlight];
  auto load_round = [&](int s0) {
#pragma unroll
    for (int u = 0; u < kStatesInFlight; ++u) {
      const int s = s0 + u * kWarpsPerBlock;
      const bool live = s < num_states;
      const TIn* src = o_in + (live ? s : 0) * o_step;
      l[u] = live ? lse_row[s * lse_step] : -INFINITY;
#pragma unroll
      for (int k = 0; k < kDims; ++k) {
        const int d = lane + 32 * k;
        v[u][k] = live && d < head_dim ? to_float(src[d]) : 0.f;
      }
    }
  };
  load_round(warp);

  LseAcc la;
  for (int s = lane; s < num_states; s += 32) la.add(lse_row[s * lse_step]);
  const float total = la.warp_total();

  float acc[kDims];
#pragma unroll
  for (int k = 0; k < kDims; ++k) acc[k] = 0.f;
  for (int s0 = warp;;) {
#pragma unroll
    for (int u = 0; u < kStatesInFlight; ++u) {
      const float w = merge_weight(l[u], total);  // 0 for an empty or absent state
#pragma unroll
      for (int k = 0; k < kDims; ++k) acc[k] += w != 0.f ? w * v[u][k] : 0.f;
    }
    s0 += kRound;
    if (s0 >= num_states) break;
    load_round(s0);
  }
#pragma unroll
  for (int k = 0; k < kDims; ++k) part[warp][lane + 32 * k] = acc[k];
  // Every read of this row is done (the barrier), so o_out may alias state 0.
  __syncthreads();
  for (int d = threadIdx.x; d < head_dim; d += kWarpsPerBlock * 32) {
    float o = 0.f;
#pragma unroll
    for (int w = 0; w < kWarpsPerBlock; ++w) o += part[w][d];
    store_f(p.o_out, p.out_dtype, row * p.o_out_row_stride + d, o);
  }
  if (p.lse_out != nullptr && threadIdx.x == 0) p.lse_out[row * p.lse_out_row_stride] = total;
}

// The instance for head_dim <= 128 (narrow: 4 dims a lane) or above, and its binary_version.
template <typename TIn>
void (*merge_instance(bool narrow, int& version))(MergeParams, bool) {
  if (narrow) {
    version = binary_version<merge_kernel<TIn, 4>>();
    return merge_kernel<TIn, 4>;
  }
  version = binary_version<merge_kernel<TIn, 8>>();
  return merge_kernel<TIn, 8>;
}

}  // namespace

Status merge_cuda(const MergeParams& p, void* stream, bool dependent_launch) {
  if (p.head_dim > 32 * kMaxDimsPerLane)
    return unsupported("merge_states: head_dim > 256 is not supported on CUDA");
  const bool narrow = p.head_dim <= 128;  // 4 dims a lane, else 8
  const bool warp_rows = p.num_states <= kValuesInFlight / (narrow ? 4 : 8);  // merge_kernel's kStatesInFlight
  const int64_t blocks = warp_rows ? (p.num_rows + kWarpsPerBlock - 1) / kWarpsPerBlock : p.num_rows;
  if (blocks > 0x7fffffff) return unsupported("merge_states: too many rows for one launch");
  const auto st = static_cast<cudaStream_t>(stream);
  const unsigned grid = static_cast<unsigned>(blocks);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(kWarpsPerBlock * 32);
  config.stream = st;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attr;
  config.numAttrs = dependent_launch ? 1 : 0;
  void (*kernel)(MergeParams, bool) = nullptr;
  int version = 0;  // the architecture the chosen instance was built for
  switch (p.in_dtype) {
    case DType::kFloat32: kernel = merge_instance<float>(narrow, version); break;
    case DType::kFloat16: kernel = merge_instance<__half>(narrow, version); break;
    case DType::kBFloat16: kernel = merge_instance<__nv_bfloat16>(narrow, version); break;
  }
  // Only code built for sm_90+ waits for the split grid (griddepcontrol).
  if (version < 90) config.numAttrs = 0;
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, p, warp_rows);
  FS_RETURN_IF_ERROR(cuda_status(err, "merge kernel launch"));
  FS_CUDA_CHECK_LAUNCH("merge kernel");
  return Status::Ok();
}

}  // namespace flashserve::cuda
