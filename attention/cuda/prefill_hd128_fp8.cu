// Instance: varlen prefill over FP8 pages (e4m3 or e5m2; q and o bf16 or fp16), head_dim 128.
#include "attention/cuda/prefill_kernel.cuh"

namespace flashserve::cuda {
template cudaError_t launch_prefill<128, __half, true>(const PrefillParams&, cudaStream_t);
}  // namespace flashserve::cuda
