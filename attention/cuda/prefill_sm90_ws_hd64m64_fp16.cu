// Instance: warp-specialized Hopper (TMA, wgmma) varlen prefill, head_dim 64, 64 query rows (one consumer
// warpgroup, two CTAs an SM: the third tile, kWsPair; ws_tile_form in prefill_cuda.cu says when) × 128-key
// tiles, fp16; packed K/V; calls without a logit transform (softcap, ALiBi, a scale <= 0), the `_transform`
// instance those with one (prefill_ws_split_logits).
#include "attention/cuda/prefill_sm90_ws_kernel.cuh"

namespace flashserve::cuda {
template cudaError_t launch_prefill_sm90_ws<64, 64, 128, __half, WsKv::kPacked, false>(
    const PrefillParams&, const PrefillTmaMaps&, int, cudaStream_t);
}  // namespace flashserve::cuda
