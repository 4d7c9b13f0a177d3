// CUDA merge of partial attention states by logsumexp rescaling: one warp per row, lanes
// over head_dim (coalesced). Storage types are run-time values here: the
// merge moves little data next to the split kernel, and one instance serves every caller.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/cuda/merge_cuda.h"
#include "attention/softmax_state.h"
#include "common/cuda_check.h"

namespace flashserve::cuda {

namespace {

__device__ __forceinline__ float load_f(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::kFloat32: return static_cast<const float*>(base)[i];
    case DType::kFloat16: return __half2float(static_cast<const __half*>(base)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
  }
}

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

// One warp per row. The lse of all states are read at once (lanes over states) and reduced
// with shuffles; then the states' o rows are accumulated kStatesInFlight at a time, their
// loads issued before the adds, so the row costs a few memory latencies, not one per state.
__global__ void __launch_bounds__(kWarpsPerBlock * 32) merge_kernel(const __grid_constant__ MergeParams p) {
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

  float acc[kMaxDimsPerLane];
#pragma unroll
  for (int k = 0; k < kMaxDimsPerLane; ++k) acc[k] = 0.f;
  const int64_t row_base = row * p.o_in_row_stride;
  for (int base = 0; base < p.num_states; base += 32) {
    // Lane j holds the weight of state base + j; empty states weigh 0 and are never read.
    const float w_lane =
        base + lane < p.num_states ? merge_weight(lse_row[(base + lane) * p.lse_in_state_stride], total) : 0.f;
    const int n = min(32, p.num_states - base);
    for (int j0 = 0; j0 < n; j0 += kStatesInFlight) {
      float w[kStatesInFlight], v[kStatesInFlight][kMaxDimsPerLane];
#pragma unroll
      for (int u = 0; u < kStatesInFlight; ++u) {
        w[u] = __shfl_sync(0xffffffffu, w_lane, (j0 + u) & 31);
        if (j0 + u >= n) w[u] = 0.f;
        const int64_t state_base = (base + j0 + u) * p.o_in_state_stride + row_base;
#pragma unroll
        for (int k = 0; k < kMaxDimsPerLane; ++k) {
          const int d = lane + 32 * k;
          v[u][k] = (w[u] != 0.f && d < p.head_dim) ? load_f(p.o_in, p.in_dtype, state_base + d) : 0.f;
        }
      }
#pragma unroll
      for (int u = 0; u < kStatesInFlight; ++u)
#pragma unroll
        for (int k = 0; k < kMaxDimsPerLane; ++k) acc[k] += w[u] * v[u][k];
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

Status merge_cuda(const MergeParams& p, void* stream) {
  if (p.head_dim > 32 * kMaxDimsPerLane)
    return unsupported("merge_states: head_dim > 256 is not supported on CUDA");
  const int64_t blocks = (p.num_rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > 0x7fffffff) return unsupported("merge_states: too many rows for one launch");
  merge_kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, static_cast<cudaStream_t>(stream)>>>(p);
  FS_CUDA_CHECK_LAUNCH("merge kernel");
  return Status::Ok();
}

}  // namespace flashserve::cuda
