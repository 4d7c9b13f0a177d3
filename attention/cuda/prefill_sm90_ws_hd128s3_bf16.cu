// Instance: warp-specialized Hopper (TMA, wgmma) varlen prefill, head_dim 128, 128-key tiles, a
// K/V ring of 3 stages (the FLASHSERVE_PREFILL_WS_STAGES=3 experiment; prefill_cuda.cu), bf16.
#include "attention/cuda/prefill_sm90_ws_kernel.cuh"

namespace flashserve::cuda {
template cudaError_t launch_prefill_sm90_ws<128, 128, 128, __nv_bfloat16, 3>(const PrefillParams&, const PrefillTmaMaps&, int, cudaStream_t);
}  // namespace flashserve::cuda
