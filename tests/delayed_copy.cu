#include "tests/delayed_copy.h"

namespace flashserve::test {
namespace {

__global__ void delayed_copies_kernel(const __grid_constant__ DelayedCopies c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < c.delay_ns);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int i = 0; i < c.count; ++i) {
    const uint32_t* src = static_cast<const uint32_t*>(c.copies[i].src);
    uint32_t* dst = static_cast<uint32_t*>(c.copies[i].dst);
    for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < c.copies[i].bytes / 4;
         w += stride)
      dst[w] = src[w];
  }
}

}  // namespace

cudaError_t launch_delayed_copies(const DelayedCopies& c, cudaStream_t stream) {
  delayed_copies_kernel<<<4, 256, 0, stream>>>(c);
  return cudaGetLastError();
}

}  // namespace flashserve::test
