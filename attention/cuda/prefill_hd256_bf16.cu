// Instance (FLASHSERVE_PREFILL_HD256 builds): varlen prefill, head_dim 256, bf16, mma.sync kernel.
#include "attention/cuda/prefill_kernel.cuh"

namespace flashserve::cuda {
template cudaError_t launch_prefill<256, __nv_bfloat16>(const PrefillParams&, cudaStream_t);
}  // namespace flashserve::cuda
