// Instance: Hopper (wgmma) varlen prefill, head_dim 128, fp16.
#include "attention/cuda/prefill_sm90_kernel.cuh"

namespace flashserve::cuda {
template cudaError_t launch_prefill_sm90<128, __half>(const PrefillParams&, cudaStream_t);
}  // namespace flashserve::cuda
