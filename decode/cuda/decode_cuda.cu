#include "decode/cuda/decode_cuda.h"

#include <string>

#include "attention/cuda/merge_cuda.h"
#include "attention/dispatch.h"
#include "attention/merge.h"
#include "common/cuda_check.h"
#include "decode/cuda/decode_kernel.cuh"
#include "kvcache/page_view_check.h"

namespace flashserve::cuda {

// The instances built, one per file (decode_hd*_*.cu), declared here.
using DecodeInstances = KernelInstances<HeadDims<64, 128>, DTypes<DType::kFloat16, DType::kBFloat16>>;
extern template cudaError_t launch_decode_split<64, __half>(const DecodeParams&, cudaStream_t, bool, int);
extern template cudaError_t launch_decode_split<64, __nv_bfloat16>(const DecodeParams&, cudaStream_t, bool, int);
extern template cudaError_t launch_decode_split<128, __half>(const DecodeParams&, cudaStream_t, bool, int);
extern template cudaError_t launch_decode_split<128, __nv_bfloat16>(const DecodeParams&, cudaStream_t, bool, int);

Status validate_decode_cuda(const DecodeParams& p) {
  FS_RETURN_IF_ERROR(check_built<DecodeInstances>("decode on CUDA", p.head_dim, p.dtype));
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
  auto launch = [&](auto hd, auto dt) {
    using T = cuda_storage_t<decltype(dt)::value>;
    return cuda_status(launch_decode_split<decltype(hd)::value, T>(p, stream, pdl, sms), "decode split kernel");
  };
  FS_RETURN_IF_ERROR(dispatch_head_dim_dtype<DecodeInstances>("decode on CUDA", p.head_dim, p.dtype, launch));
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
