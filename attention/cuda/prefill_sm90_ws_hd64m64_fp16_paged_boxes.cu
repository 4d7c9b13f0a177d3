// Instance: warp-specialized Hopper (TMA, wgmma) varlen prefill, head_dim 64, 64 query rows (one consumer
// warpgroup, two CTAs an SM: the third tile, kWsPair; ws_tile_form says when) × 128-key tiles, fp16; K/V in
// 16-bit pages of 128 tokens or more by TMA page boxes (WsKv::kPageBoxes; prefill_cuda.h says when), calls
// without a logit transform.
#include "attention/cuda/prefill_sm90_ws_kernel.cuh"

namespace flashserve::cuda {
template cudaError_t launch_prefill_sm90_ws<64, 64, 128, __half, WsKv::kPageBoxes, false>(
    const PrefillParams&, const PrefillTmaMaps&, int, cudaStream_t);
}  // namespace flashserve::cuda
