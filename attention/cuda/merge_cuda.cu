// CUDA merge of partial attention states by logsumexp rescaling: one warp per row, lanes
// over head_dim (coalesced), states in a loop. Storage types are run-time values here: the
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

__global__ void __launch_bounds__(kWarpsPerBlock * 32) merge_kernel(const __grid_constant__ MergeParams p) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= p.num_rows) return;
  float total = -INFINITY;
  for (int s = 0; s < p.num_states; ++s)
    total = log_add_exp(total, p.lse_in[s * p.lse_in_state_stride + row * p.lse_in_row_stride]);
  float acc[kMaxDimsPerLane];
#pragma unroll
  for (int k = 0; k < kMaxDimsPerLane; ++k) acc[k] = 0.f;
  for (int s = 0; s < p.num_states; ++s) {
    const float w = merge_weight(p.lse_in[s * p.lse_in_state_stride + row * p.lse_in_row_stride], total);
    if (w == 0.f) continue;  // empty state: its o is never read
    const int64_t base = s * p.o_in_state_stride + row * p.o_in_row_stride;
#pragma unroll
    for (int k = 0; k < kMaxDimsPerLane; ++k) {
      const int d = lane + 32 * k;
      if (d < p.head_dim) acc[k] += w * load_f(p.o_in, p.in_dtype, base + d);
    }
  }
  // All reads of this row are done (per lane, and o_out's element d is only this lane's), so
  // o_out may alias state 0.
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
