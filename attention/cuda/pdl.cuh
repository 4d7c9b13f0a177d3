// Programmatic dependent launch (sm_90+): launching a kernel as a dependent of the stream's
// previous kernel, and the device side's wait and trigger. The attention kernels (decode, merge)
// write the same PTX inline; this is the model's small kernels' and the skinny GEMMs' form.
#pragma once

#include <cuda_runtime.h>

#include "attention/cuda/device_utils.cuh"

namespace flashserve::cuda {

// Launches Kernel(args...): as a programmatic dependent of the stream's previous kernel where
// `dependent` and its loaded code is sm_90+ (binary_version), else plainly.
template <auto Kernel, typename... Args>
cudaError_t launch_kernel(dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream, bool dependent,
                          Args&&... args) {
  LaunchConfig lc(grid, block, smem_bytes, stream, dependent && binary_version<Kernel>() >= 90);
  return cudaLaunchKernelEx(&lc.config, Kernel, static_cast<Args&&>(args)...);
}

// Programmatic dependent launch, the device side (code for sm_90+; elsewhere nothing, and the
// host launches such code plainly). pdl_wait: until the stream's previous kernel has ended and
// its writes are visible (at once for a plain launch). A kernel launched as a dependent calls it
// in every CTA before it reads or writes what another kernel writes, and before any early
// return: a grid whose CTAs all ended without waiting could end before its predecessor, and the
// kernel after it, waiting only for it, would run ahead. pdl_launch_dependents: the next kernel,
// if launched as a dependent, may start its CTAs once every CTA of this grid has called it (they
// wait in pdl_wait for this grid's end; what they do before that reads only what no kernel writes).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace flashserve::cuda
