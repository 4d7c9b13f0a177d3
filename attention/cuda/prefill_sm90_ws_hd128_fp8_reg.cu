// Instance: warp-specialized Hopper varlen prefill over FP8 pages by the register path
// (WsKv::kFp8RegPages: the host gives it e5m2 pools), head_dim 128, 128-key tiles, fp16 MMAs; the
// call's q and o bf16 or fp16 (read at run time).
#include "attention/cuda/prefill_sm90_ws_kernel.cuh"

namespace flashserve::cuda {
template cudaError_t launch_prefill_sm90_ws<128, 128, 128, __half, WsKv::kFp8RegPages>(const PrefillParams&,
                                                                                       const PrefillTmaMaps&, int,
                                                                                       cudaStream_t);
}  // namespace flashserve::cuda
