// Instance: Hopper (wgmma) varlen prefill, head_dim 128, bf16.
#include "attention/cuda/prefill_sm90_kernel.cuh"

namespace flashserve::cuda {
template cudaError_t launch_prefill_sm90<128, __nv_bfloat16>(const PrefillParams&, cudaStream_t);

// Whether this build holds sm_90a code the current device runs (then every sm90 instance
// does: they are built together).
bool prefill_sm90_runs_here() {
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, prefill_sm90_kernel<128, __nv_bfloat16>) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.binaryVersion == 90;
}
}  // namespace flashserve::cuda
