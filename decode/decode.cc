#include "decode/decode.h"

#include <string>
#include <vector>

#include "attention/validate.h"
#include "common/check.h"
#include "common/cuda_device.h"
#include "common/thread_pool.h"
#include "decode/cpu/decode_cpu.h"
#include "decode/planner.h"
#include "kvcache/page_view_check.h"
#if FLASHSERVE_WITH_CUDA
#include "decode/cuda/decode_cuda.h"
#endif

namespace flashserve {

namespace {
constexpr const char* kWhere = "decode";
}

void set_contiguous_strides(DecodeParams& p) {
  p.q_head_stride = p.o_head_stride = p.head_dim;
  p.q_row_stride = p.o_row_stride = static_cast<int64_t>(p.num_heads) * p.head_dim;
}

int64_t decode_workspace_bytes(int32_t num_splits, int32_t batch, int32_t q_len, int32_t num_heads,
                               int32_t head_dim) {
  if (num_splits <= 1) return 0;
  const int64_t rows = static_cast<int64_t>(batch) * q_len * num_heads;
  return static_cast<int64_t>(num_splits) * rows * (head_dim + 1) * static_cast<int64_t>(sizeof(float));
}

Status decode_launch_shape(Device device, int32_t head_dim, DType dtype, DecodeLaunchShape* shape) {
  return decode_launch_shape(device, head_dim, dtype, dtype, shape);
}

Status decode_launch_shape(Device device, int32_t head_dim, DType dtype, DType pages_dtype, DecodeLaunchShape* shape) {
  if (shape == nullptr) return invalid_argument("decode_launch_shape: shape is null");
  if (device == Device::kCPU) {
    DecodeLaunchShape cpu;
    cpu.rows_per_cta = 0;  // a thread takes an item whole
    cpu.ctas_per_sm = 1;
    cpu.sm_count = ThreadPool::global().num_threads();
    *shape = cpu;
    return Status::Ok();
  }
  if (device != Device::kCUDA) return invalid_argument("decode_launch_shape: invalid device");
#if FLASHSERVE_WITH_CUDA
  return cuda::decode_launch_shape(head_dim, dtype, pages_dtype, shape);
#else
  (void)head_dim;
  (void)dtype;
  (void)pages_dtype;
  return unsupported("decode_launch_shape: flashserve was built without CUDA");
#endif
}

Status decode_local_launch_shape(int32_t head_dim, DType dtype, DecodeLaunchShape* shape) {
  return decode_local_launch_shape(head_dim, dtype, dtype, shape);
}

Status decode_local_launch_shape(int32_t head_dim, DType dtype, DType pages_dtype, DecodeLaunchShape* shape) {
#if FLASHSERVE_WITH_CUDA
  if (cuda_available() && cuda::decode_cuda_supports(head_dim, dtype))
    return decode_launch_shape(Device::kCUDA, head_dim, dtype, pages_dtype, shape);
#endif
  return decode_launch_shape(Device::kCPU, head_dim, dtype, pages_dtype, shape);
}

Status validate_decode_shapes(const DecodeParams& p) {
  if (!is_valid(p.device)) return invalid_argument("decode: invalid device");
  if (!is_valid(p.dtype)) return invalid_argument("decode: invalid dtype");
  if (!is_activation_dtype(p.dtype))
    return invalid_argument(std::string("decode: dtype ") + dtype_name(p.dtype) +
                            " is a KV-page type; q and o are fp32, fp16 or bf16 (FP8 pages: pages.dtype)");
  if (p.batch < 0) return invalid_argument("decode: batch = " + std::to_string(p.batch) + " is negative");
  if (p.q_len < 1 || p.q_len > kMaxDecodeQLen)
    return invalid_argument("decode: q_len = " + std::to_string(p.q_len) + " must be in 1.." +
                            std::to_string(kMaxDecodeQLen) + " (use prefill for longer chunks)");
  FS_RETURN_IF_ERROR(validate_heads(kWhere, p.num_heads, p.num_kv_heads, p.head_dim, p.device));
  FS_RETURN_IF_ERROR(validate_mask(kWhere, p.mask));
  if (p.num_splits < 0) return invalid_argument("decode: num_splits is negative");
  if (p.num_splits == 0 && p.device != Device::kCPU)
    return invalid_argument("decode: num_splits = 0 (plan inside decode) is for the CPU only; call plan_decode");
  if (p.batch == 0) return Status::Ok();

  const int64_t align = dtype_size(p.dtype);
  FS_RETURN_IF_ERROR(check_pointer(kWhere, "q", p.q, align));
  FS_RETURN_IF_ERROR(check_pointer(kWhere, "o", p.o, align));
  if (p.lse) FS_RETURN_IF_ERROR(check_pointer(kWhere, "lse", p.lse, 4));
  FS_RETURN_IF_ERROR(check_positive(kWhere, "q_row_stride", p.q_row_stride));
  FS_RETURN_IF_ERROR(check_positive(kWhere, "q_head_stride", p.q_head_stride));
  FS_RETURN_IF_ERROR(check_positive(kWhere, "o_row_stride", p.o_row_stride));
  FS_RETURN_IF_ERROR(check_positive(kWhere, "o_head_stride", p.o_head_stride));
  FS_RETURN_IF_ERROR(validate_page_view_dtype(kWhere, p.pages, p.dtype, p.device));
  FS_RETURN_IF_ERROR(validate_page_view_shapes(kWhere, p.pages, dtype_size(p.pages.dtype)));
  if (p.num_splits >= 1) FS_RETURN_IF_ERROR(check_positive(kWhere, "pages_per_split", p.pages_per_split));
  if (p.num_splits > 1) {
    FS_RETURN_IF_ERROR(check_pointer(kWhere, "workspace", p.workspace, 16));
    const int64_t need = decode_workspace_bytes(p.num_splits, p.batch, p.q_len, p.num_heads, p.head_dim);
    if (p.workspace_bytes < need)
      return invalid_argument("decode: workspace has " + std::to_string(p.workspace_bytes) + " bytes, " +
                              std::to_string(p.num_splits) + " splits need " + std::to_string(need));
  }
  return Status::Ok();
}

Status validate_decode_lengths_host(const DecodeParams& p) {
  FS_RETURN_IF_ERROR(validate_page_view_host(kWhere, p.pages, p.batch));
  for (int32_t b = 0; b < p.batch; ++b) {
    const int64_t len = p.pages.seq_lens[b];
    if (len < p.q_len)
      return invalid_argument("decode: seq_lens[" + std::to_string(b) + "] = " + std::to_string(len) +
                              " is shorter than q_len = " + std::to_string(p.q_len) +
                              " (the new tokens must be appended first)");
    if (p.num_splits >= 1) {
      const int64_t pages = (len + p.pages.block_size - 1) / p.pages.block_size;
      if (pages > int64_t{p.num_splits} * p.pages_per_split)
        return invalid_argument("decode: the plan (" + std::to_string(p.num_splits) + " splits of " +
                                std::to_string(p.pages_per_split) + " pages) does not cover sequence " +
                                std::to_string(b) + " (" + std::to_string(pages) + " pages); plan again");
    }
  }
  return Status::Ok();
}

Status decode(const DecodeParams& params, void* stream) {
  FS_RETURN_IF_ERROR(validate_decode_shapes(params));
  // FP8 pages on CUDA: the scales are device pointers there, not read by the host;
  // KVStorage::set_scales checks the values it stores.
  if (params.device == Device::kCUDA) {
#if FLASHSERVE_WITH_CUDA
    // Lengths and block tables live on the device: the kernel never reads outside the pool
    // (it clamps lengths to the table and skips invalid block ids); callers with host mirrors
    // check them with validate_decode_lengths_host.
    FS_RETURN_IF_ERROR(cuda::validate_decode_cuda(params));
    if (params.batch == 0) return Status::Ok();
    return cuda::decode_cuda(params, stream);
#else
    return unsupported("decode: flashserve was built without CUDA");
#endif
  }
  if (stream != nullptr) return invalid_argument("decode: a CPU call takes no stream");
  FS_RETURN_IF_ERROR(validate_decode_lengths_host(params));
  FS_RETURN_IF_ERROR(validate_page_view_scales_host(kWhere, params.pages, params.num_kv_heads));
  if (params.mask.alibi_slopes) {
    for (int32_t h = 0; h < params.num_heads; ++h)
      FS_RETURN_IF_ERROR(check_finite(kWhere, "alibi_slopes[h]", params.mask.alibi_slopes[h]));
  }
  if (params.batch == 0) return Status::Ok();
  if (params.num_splits > 0) return cpu::decode_cpu(params);

  // Plan for this machine's threads and run with a workspace of our own.
  DecodePlanInput in;
  in.batch = params.batch;
  in.seq_lens = params.pages.seq_lens;
  in.q_len = params.q_len;
  in.num_heads = params.num_heads;
  in.num_kv_heads = params.num_kv_heads;
  in.head_dim = params.head_dim;
  in.block_size = params.pages.block_size;
  FS_RETURN_IF_ERROR(decode_launch_shape(Device::kCPU, params.head_dim, params.dtype, &in.shape));
  DecodePlan plan;
  FS_RETURN_IF_ERROR(plan_decode(in, &plan));
  std::vector<float> workspace(static_cast<size_t>(plan.workspace_bytes / sizeof(float)));
  DecodeParams p = params;
  p.num_splits = plan.num_splits;
  p.pages_per_split = plan.pages_per_split;
  p.workspace = workspace.data();
  p.workspace_bytes = plan.workspace_bytes;
  return cpu::decode_cpu(p);
}

}  // namespace flashserve
