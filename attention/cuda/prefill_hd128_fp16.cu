// Instance: varlen prefill, head_dim 128, fp16.
#include "attention/cuda/prefill_kernel.cuh"

namespace flashserve::cuda {
template cudaError_t launch_prefill<128, __half>(const PrefillParams&, cudaStream_t);
}  // namespace flashserve::cuda
