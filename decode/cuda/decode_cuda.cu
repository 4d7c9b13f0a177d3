#include "decode/cuda/decode_cuda.h"

#include <string>

#include "attention/cuda/merge_cuda.h"
#include "attention/merge.h"
#include "common/cuda_check.h"
#include "decode/cuda/decode_kernel.cuh"
#include "kvcache/page_view_check.h"

namespace flashserve::cuda {

// Declared here, instantiated one per file (decode_hd*_*.cu).
extern template cudaError_t launch_decode_split<64, __half>(const DecodeParams&, cudaStream_t, bool, int);
extern template cudaError_t launch_decode_split<64, __nv_bfloat16>(const DecodeParams&, cudaStream_t, bool, int);
extern template cudaError_t launch_decode_split<128, __half>(const DecodeParams&, cudaStream_t, bool, int);
extern template cudaError_t launch_decode_split<128, __nv_bfloat16>(const DecodeParams&, cudaStream_t, bool, int);

Status validate_decode_cuda(const DecodeParams& p) {
  if (p.dtype == DType::kFloat32) return unsupported("decode: the CUDA kernels take fp16 or bf16, not fp32");
  if (p.head_dim != 64 && p.head_dim != 128)
    return unsupported("decode: head_dim " + std::to_string(p.head_dim) + " is not supported on CUDA (64, 128)");
  if (p.batch > 65535) return unsupported("decode: batch > 65535 on CUDA");
  FS_RETURN_IF_ERROR(validate_page_view_cuda("decode", p.pages, dtype_size(p.dtype)));
  if (p.num_splits > 1 && reinterpret_cast<uintptr_t>(p.workspace) % 16)
    return invalid_argument("decode: workspace must be 16-byte aligned");
  return Status::Ok();
}

Status decode_cuda(const DecodeParams& p, void* stream_ptr) {
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  // Programmatic dependent launch exists from Hopper (sm_90) on: the split kernel follows the
  // previous kernel in the stream that way, and the merge follows the split kernel.
  int device = 0, cc_major = 0, sms = 0;
  FS_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  FS_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, device));
  FS_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const bool pdl = cc_major >= 9;
  cudaError_t err;
  if (p.head_dim == 64) {
    err = p.dtype == DType::kFloat16 ? launch_decode_split<64, __half>(p, stream, pdl, sms)
                                     : launch_decode_split<64, __nv_bfloat16>(p, stream, pdl, sms);
  } else {
    err = p.dtype == DType::kFloat16 ? launch_decode_split<128, __half>(p, stream, pdl, sms)
                                     : launch_decode_split<128, __nv_bfloat16>(p, stream, pdl, sms);
  }
  FS_RETURN_IF_ERROR(cuda_status(err, "decode split kernel"));
  if (p.num_splits == 1) return Status::Ok();

  const int64_t rows = static_cast<int64_t>(p.batch) * p.q_len * p.num_heads;
  MergeParams m;
  m.device = Device::kCUDA;
  m.num_states = p.num_splits;
  m.num_rows = rows;
  m.head_dim = p.head_dim;
  m.in_dtype = DType::kFloat32;
  m.o_in = p.workspace;
  m.o_in_state_stride = rows * p.head_dim;
  m.o_in_row_stride = p.head_dim;
  m.lse_in = static_cast<const float*>(p.workspace) + p.num_splits * rows * p.head_dim;
  m.lse_in_state_stride = rows;
  m.lse_in_row_stride = 1;
  m.out_dtype = p.dtype;
  m.lse_out = p.lse;
  m.lse_out_row_stride = 1;
  if (p.o_row_stride == static_cast<int64_t>(p.num_heads) * p.o_head_stride) {
    m.o_out = p.o;
    m.o_out_row_stride = p.o_head_stride;
    return merge_cuda(m, stream_ptr, /*dependent_launch=*/pdl, sms);
  }
  // Token rows not evenly strided with heads: one merge per token row.
  for (int64_t t = 0; t < static_cast<int64_t>(p.batch) * p.q_len; ++t) {
    m.num_rows = p.num_heads;
    m.o_in = static_cast<const float*>(p.workspace) + t * p.num_heads * p.head_dim;
    m.lse_in = static_cast<const float*>(p.workspace) + p.num_splits * rows * p.head_dim + t * p.num_heads;
    m.o_out = static_cast<char*>(p.o) + t * p.o_row_stride * dtype_size(p.dtype);
    m.o_out_row_stride = p.o_head_stride;
    m.lse_out = p.lse ? p.lse + t * p.num_heads : nullptr;
    FS_RETURN_IF_ERROR(merge_states(m, stream_ptr));
  }
  return Status::Ok();
}

}  // namespace flashserve::cuda
