// Instance: Hopper (wgmma) varlen prefill, head_dim 128, bf16.
#include "attention/cuda/prefill_sm90_kernel.cuh"

namespace flashserve::cuda {
template cudaError_t launch_prefill_sm90<128, __nv_bfloat16>(const PrefillParams&, cudaStream_t);

// Whether the current device runs this build's sm_90a code (then every sm90 instance does:
// they are built together): *runs = false where the build has none (FLASHSERVE_HAVE_SM90A
// unset: no 90a in the architectures, or plain 90 beside it) or the device runs another
// image; other errors are returned (and not taken for an answer).
cudaError_t prefill_sm90_runs_here(bool* runs) {
  *runs = false;
#if FLASHSERVE_HAVE_SM90A
  cudaFuncAttributes attr{};
  const cudaError_t err = cudaFuncGetAttributes(&attr, prefill_sm90_kernel<128, __nv_bfloat16>);
  if (err == cudaErrorInvalidDeviceFunction || err == cudaErrorNoKernelImageForDevice) {
    (void)cudaGetLastError();
    return cudaSuccess;
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return err;
  }
  *runs = attr.binaryVersion == 90;
#endif
  return cudaSuccess;
}
}  // namespace flashserve::cuda
