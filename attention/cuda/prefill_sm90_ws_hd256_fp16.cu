// Instance: warp-specialized Hopper (TMA, wgmma) varlen prefill, head_dim 256, 80-key tiles, fp16;
// packed K/V.
#include "attention/cuda/prefill_sm90_ws_kernel.cuh"

namespace flashserve::cuda {
template cudaError_t launch_prefill_sm90_ws<256, 128, 80, __half, WsKv::kPacked>(const PrefillParams&,
                                                                              const PrefillTmaMaps&, int, cudaStream_t);
}  // namespace flashserve::cuda
