// Instance: split-K decode, head_dim 64, fp16 q and o, fp8_e5m2 pages (issue 25).
#include "decode/cuda/decode_kernel.cuh"

namespace flashserve::cuda {
template cudaError_t launch_decode_split<64, __half, __nv_fp8_e5m2>(const DecodeParams&, cudaStream_t, bool, int);
template cudaError_t prepare_decode_split<64, __half, __nv_fp8_e5m2>(int*);
}  // namespace flashserve::cuda
