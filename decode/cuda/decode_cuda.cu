#include "decode/cuda/decode_cuda.h"

#include <string>

#include "common/cuda_check.h"
#include "decode/cuda/decode_kernel.cuh"

namespace flashserve::cuda {

// Declared here, instantiated one per file (decode_hd*_*.cu).
extern template cudaError_t launch_decode_split<64, __half>(const DecodeParams&, cudaStream_t);
extern template cudaError_t launch_decode_split<64, __nv_bfloat16>(const DecodeParams&, cudaStream_t);
extern template cudaError_t launch_decode_split<128, __half>(const DecodeParams&, cudaStream_t);
extern template cudaError_t launch_decode_split<128, __nv_bfloat16>(const DecodeParams&, cudaStream_t);

Status validate_decode_cuda(const DecodeParams& p) {
  if (p.dtype == DType::kFloat32) return unsupported("decode: the CUDA kernels take fp16 or bf16, not fp32");
  if (p.head_dim != 64 && p.head_dim != 128)
    return unsupported("decode: head_dim " + std::to_string(p.head_dim) + " is not supported on CUDA (64, 128)");
  if (p.batch > 65535) return unsupported("decode: batch > 65535 on CUDA");
  const int64_t elem = dtype_size(p.dtype);
  const KVPageView& pv = p.pages;
  if ((pv.token_stride * elem) % 16 || (pv.head_stride * elem) % 16 || (pv.block_stride * elem) % 16 ||
      reinterpret_cast<uintptr_t>(pv.k_pages) % 16 || reinterpret_cast<uintptr_t>(pv.v_pages) % 16)
    return invalid_argument("decode: CUDA pages must be 16-byte aligned, with strides of whole 16-byte chunks");
  if (pv.block_size & (pv.block_size - 1))
    return unsupported("decode: CUDA block_size must be a power of two, got " + std::to_string(pv.block_size));
  if (p.num_splits > 1 && reinterpret_cast<uintptr_t>(p.workspace) % 16)
    return invalid_argument("decode: workspace must be 16-byte aligned");
  return Status::Ok();
}

Status decode_cuda(const DecodeParams& p, void* stream_ptr) {
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  if (p.num_splits > 1) {
    // Zero the arrival counters (after the partial o and lse): a split kernel that never
    // completed cannot leave the next launch a wrong count.
    const int64_t rows = static_cast<int64_t>(p.batch) * p.q_len * p.num_heads;
    char* counters = static_cast<char*>(p.workspace) + static_cast<int64_t>(p.num_splits) * rows * (p.head_dim + 1) * 4;
    FS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(counters, 0, static_cast<size_t>(rows) * 4, stream));
  }
  cudaError_t err;
  if (p.head_dim == 64) {
    err = p.dtype == DType::kFloat16 ? launch_decode_split<64, __half>(p, stream)
                                     : launch_decode_split<64, __nv_bfloat16>(p, stream);
  } else {
    err = p.dtype == DType::kFloat16 ? launch_decode_split<128, __half>(p, stream)
                                     : launch_decode_split<128, __nv_bfloat16>(p, stream);
  }
  return cuda_status(err, "decode split kernel");
}

}  // namespace flashserve::cuda
