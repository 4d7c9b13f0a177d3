// Instance: warp-specialized Hopper (TMA, wgmma) varlen prefill, head_dim 128, 176-key tiles (the
// wide tile; ws_tile_form in prefill_cuda.cu says when), fp16; K/V in pages of the call's dtype;
// calls without a logit transform (softcap, ALiBi, a scale <= 0), the `_transform` instance those
// with one (prefill_ws_split_logits).
#include "attention/cuda/prefill_sm90_ws_kernel.cuh"

namespace flashserve::cuda {
template cudaError_t launch_prefill_sm90_ws<128, 128, 176, __half, WsKv::kPages, false>(
    const PrefillParams&, const PrefillTmaMaps&, int, cudaStream_t);
}  // namespace flashserve::cuda
