// CUDA merge_states: partial attention states merged by logsumexp rescaling; one instance
// per input storage type (the output type is a run-time switch at the store).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

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
constexpr int kStatesInFlight = 4;  // states whose loads are issued together

__device__ __forceinline__ float warp_reduce_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_reduce_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// One warp per row, lanes over head_dim. The lse of all states are read at once (lanes over
// states) and reduced with shuffles; each lane then holds one state's weight and hands it
// round by shuffle, while the states' o rows are loaded kStatesInFlight at a time without a
// branch (a load is always in bounds; an empty state's o, which may be garbage, is dropped by
// a select, never multiplied), so a row costs a few memory latencies, not one per state.
template <typename TIn>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) merge_kernel(const __grid_constant__ MergeParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched as a programmatic dependent of the split kernel: wait here until its writes are
  // visible (a no-op for an ordinary launch).
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= p.num_rows) return;
  const float* lse_row = p.lse_in + row * p.lse_in_row_stride;
  float mx = -INFINITY;
  for (int s = lane; s < p.num_states; s += 32) mx = fmaxf(mx, lse_row[s * p.lse_in_state_stride]);
  mx = warp_reduce_max(mx);
  float sum = 0.f;
  if (mx != -INFINITY) {
    for (int s = lane; s < p.num_states; s += 32) {
      const float l = lse_row[s * p.lse_in_state_stride];
      sum += l == -INFINITY ? 0.f : __expf(l - mx);
    }
  }
  sum = warp_reduce_sum(sum);
  const float total = mx == -INFINITY ? -INFINITY : mx + __logf(sum);

  const TIn* o_in = static_cast<const TIn*>(p.o_in) + row * p.o_in_row_stride;
  float acc[kMaxDimsPerLane];
#pragma unroll
  for (int k = 0; k < kMaxDimsPerLane; ++k) acc[k] = 0.f;
  for (int base = 0; base < p.num_states; base += 32) {
    const float w_lane =
        base + lane < p.num_states ? merge_weight(lse_row[(base + lane) * p.lse_in_state_stride], total) : 0.f;
    const int n = min(32, p.num_states - base);
    for (int j0 = 0; j0 < n; j0 += kStatesInFlight) {
      float v[kStatesInFlight][kMaxDimsPerLane];
#pragma unroll
      for (int u = 0; u < kStatesInFlight; ++u) {
        const TIn* src = o_in + (base + min(j0 + u, n - 1)) * p.o_in_state_stride;
#pragma unroll
        for (int k = 0; k < kMaxDimsPerLane; ++k) {
          const int d = min(lane + 32 * k, p.head_dim - 1);
          v[u][k] = to_float(src[d]);
        }
      }
#pragma unroll
      for (int u = 0; u < kStatesInFlight; ++u) {
        const float w = j0 + u < n ? __shfl_sync(0xffffffffu, w_lane, (j0 + u) & 31) : 0.f;
#pragma unroll
        for (int k = 0; k < kMaxDimsPerLane; ++k) acc[k] += w != 0.f ? w * v[u][k] : 0.f;
      }
    }
  }
  // Every read of this row is done (each lane writes only the dims it read), so o_out may
  // alias state 0.
#pragma unroll
  for (int k = 0; k < kMaxDimsPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d < p.head_dim) store_f(p.o_out, p.out_dtype, row * p.o_out_row_stride + d, acc[k]);
  }
  if (p.lse_out != nullptr && lane == 0) p.lse_out[row * p.lse_out_row_stride] = total;
}

}  // namespace

Status merge_cuda(const MergeParams& p, void* stream, bool dependent_launch) {
  if (p.head_dim > 32 * kMaxDimsPerLane)
    return unsupported("merge_states: head_dim > 256 is not supported on CUDA");
  const int64_t blocks = (p.num_rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
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
  cudaError_t err = cudaSuccess;
  switch (p.in_dtype) {
    case DType::kFloat32: err = cudaLaunchKernelEx(&config, merge_kernel<float>, p); break;
    case DType::kFloat16: err = cudaLaunchKernelEx(&config, merge_kernel<__half>, p); break;
    case DType::kBFloat16: err = cudaLaunchKernelEx(&config, merge_kernel<__nv_bfloat16>, p); break;
  }
  FS_RETURN_IF_ERROR(cuda_status(err, "merge kernel launch"));
  FS_CUDA_CHECK_LAUNCH("merge kernel");
  return Status::Ok();
}

}  // namespace flashserve::cuda
