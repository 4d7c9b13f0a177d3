// Instance: split-K decode, head_dim 64, fp16.
#include "decode/cuda/decode_kernel.cuh"

namespace flashserve::cuda {
template cudaError_t launch_decode_split<64, __half>(const DecodeParams&, cudaStream_t, bool, int);
template cudaError_t prepare_decode_split<64, __half>(int*);
}  // namespace flashserve::cuda
