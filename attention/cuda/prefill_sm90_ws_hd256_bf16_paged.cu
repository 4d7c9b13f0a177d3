// Instance: warp-specialized Hopper (TMA, wgmma) varlen prefill, head_dim 256, 80-key tiles, bf16;
// K/V in pages of the call's dtype.
#include "attention/cuda/prefill_sm90_ws_kernel.cuh"

namespace flashserve::cuda {
template cudaError_t launch_prefill_sm90_ws<256, 128, 80, __nv_bfloat16, WsKv::kPages>(const PrefillParams&,
                                                                              const PrefillTmaMaps&, int, cudaStream_t);
}  // namespace flashserve::cuda
