#include "attention/prefill.h"

#include <cmath>
#include <string>

#include "attention/cpu/backends.h"
#include "attention/validate.h"
#include "common/check.h"
#include "kvcache/page_view_check.h"
#if FLASHSERVE_WITH_CUDA
#include "attention/cuda/prefill_cuda.h"
#endif

namespace flashserve {

namespace {
constexpr const char* kWhere = "prefill";
}

void set_contiguous_strides(PrefillParams& p) {
  p.q_head_stride = p.o_head_stride = p.head_dim;
  p.q_row_stride = p.o_row_stride = static_cast<int64_t>(p.num_heads) * p.head_dim;
  p.k_head_stride = p.v_head_stride = p.head_dim;
  p.k_row_stride = p.v_row_stride = static_cast<int64_t>(p.num_kv_heads) * p.head_dim;
}

Status validate_prefill_shapes(const PrefillParams& p) {
  if (!is_valid(p.device)) return invalid_argument("prefill: invalid device");
  if (!is_valid(p.dtype)) return invalid_argument("prefill: invalid dtype");
  if (!is_activation_dtype(p.dtype))
    return invalid_argument(std::string("prefill: dtype ") + dtype_name(p.dtype) +
                            " is a KV-page type; q and o are fp32, fp16 or bf16 (FP8 pages: pages.dtype)");
  if (p.batch < 0) return invalid_argument("prefill: batch = " + std::to_string(p.batch) + " is negative");
  FS_RETURN_IF_ERROR(validate_heads(kWhere, p.num_heads, p.num_kv_heads, p.head_dim, p.device));
  if (p.total_q < 0 || p.total_k < 0) return invalid_argument("prefill: total_q and total_k must be >= 0");
  FS_RETURN_IF_ERROR(validate_mask(kWhere, p.mask));
  if (p.batch == 0) return Status::Ok();

  const int64_t align = dtype_size(p.dtype);
  FS_RETURN_IF_ERROR(check_pointer(kWhere, "cu_seqlens_q", p.cu_seqlens_q, 4));
  if (p.total_q > 0) {
    FS_RETURN_IF_ERROR(check_pointer(kWhere, "q", p.q, align));
    FS_RETURN_IF_ERROR(check_pointer(kWhere, "o", p.o, align));
    if (p.lse != nullptr) FS_RETURN_IF_ERROR(check_pointer(kWhere, "lse", p.lse, 4));
    FS_RETURN_IF_ERROR(check_positive(kWhere, "q_row_stride", p.q_row_stride));
    FS_RETURN_IF_ERROR(check_positive(kWhere, "q_head_stride", p.q_head_stride));
    FS_RETURN_IF_ERROR(check_positive(kWhere, "o_row_stride", p.o_row_stride));
    FS_RETURN_IF_ERROR(check_positive(kWhere, "o_head_stride", p.o_head_stride));
  }
  if (p.paged) {
    FS_RETURN_IF_ERROR(validate_page_view_dtype(kWhere, p.pages, p.dtype, p.device));
    return validate_page_view_shapes(kWhere, p.pages, dtype_size(p.pages.dtype));
  }
  FS_RETURN_IF_ERROR(check_pointer(kWhere, "cu_seqlens_k", p.cu_seqlens_k, 4));
  if (p.total_k > 0) {
    FS_RETURN_IF_ERROR(check_pointer(kWhere, "k", p.k, align));
    FS_RETURN_IF_ERROR(check_pointer(kWhere, "v", p.v, align));
    FS_RETURN_IF_ERROR(check_positive(kWhere, "k_row_stride", p.k_row_stride));
    FS_RETURN_IF_ERROR(check_positive(kWhere, "k_head_stride", p.k_head_stride));
    FS_RETURN_IF_ERROR(check_positive(kWhere, "v_row_stride", p.v_row_stride));
    FS_RETURN_IF_ERROR(check_positive(kWhere, "v_head_stride", p.v_head_stride));
  }
  return Status::Ok();
}

namespace {

Status validate_cu_seqlens(const char* name, const int32_t* cu, int32_t batch, int64_t total) {
  if (cu[0] != 0)
    return invalid_argument(std::string("prefill: ") + name + "[0] = " + std::to_string(cu[0]) + ", must be 0");
  for (int32_t b = 0; b < batch; ++b) {
    if (cu[b + 1] < cu[b])
      return invalid_argument(std::string("prefill: ") + name + " decreases at " + std::to_string(b + 1) +
                              " (" + std::to_string(cu[b]) + " > " + std::to_string(cu[b + 1]) + ")");
  }
  if (cu[batch] != total)
    return invalid_argument(std::string("prefill: ") + name + "[batch] = " + std::to_string(cu[batch]) +
                            " but the tensor has " + std::to_string(total) + " rows");
  return Status::Ok();
}

}  // namespace

Status validate_prefill_lengths_host(const PrefillParams& p) {
  if (p.batch == 0) return Status::Ok();
  FS_RETURN_IF_ERROR(validate_cu_seqlens("cu_seqlens_q", p.cu_seqlens_q, p.batch, p.total_q));
  if (!p.paged) return validate_cu_seqlens("cu_seqlens_k", p.cu_seqlens_k, p.batch, p.total_k);
  FS_RETURN_IF_ERROR(validate_page_view_host(kWhere, p.pages, p.batch));
  for (int32_t b = 0; b < p.batch; ++b) {
    const int32_t q_len = p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
    if (p.pages.seq_lens[b] < q_len)
      return invalid_argument("prefill: sequence " + std::to_string(b) + " has " + std::to_string(q_len) +
                              " queries but seq_lens = " + std::to_string(p.pages.seq_lens[b]) +
                              " (the queries are the last keys of the sequence)");
  }
  return Status::Ok();
}

Status prefill_ws_key_tile(const PrefillParams& p, int* key_tile) {
  if (key_tile == nullptr) return invalid_argument("prefill_ws_key_tile: key_tile is null");
#if FLASHSERVE_WITH_CUDA
  *key_tile = cuda::prefill_ws_key_tile(p);
  return Status::Ok();
#else
  (void)p;
  return unsupported("prefill_ws_key_tile: flashserve was built without CUDA");
#endif
}

Status prefill(const PrefillParams& p, void* stream) {
  FS_RETURN_IF_ERROR(validate_prefill_shapes(p));
  if (p.device == Device::kCUDA) {
#if FLASHSERVE_WITH_CUDA
    // Lengths and block tables live on the device: the kernel never reads outside the pool
    // (lengths clamped to the table, bad block ids skipped); callers with host mirrors check
    // them with validate_prefill_lengths_host.
    FS_RETURN_IF_ERROR(cuda::validate_prefill_cuda(p));
    if (p.batch == 0 || p.total_q == 0) return Status::Ok();
    return cuda::prefill_cuda(p, stream);
#else
    return unsupported("prefill: flashserve was built without CUDA");
#endif
  }
  if (stream != nullptr) return invalid_argument("prefill: a CPU call takes no stream");
  FS_RETURN_IF_ERROR(validate_prefill_lengths_host(p));
  if (p.paged) FS_RETURN_IF_ERROR(validate_page_view_scales_host(kWhere, p.pages, p.num_kv_heads));
  if (p.mask.alibi_slopes) {
    for (int32_t h = 0; h < p.num_heads; ++h)
      FS_RETURN_IF_ERROR(check_finite(kWhere, "alibi_slopes[h]", p.mask.alibi_slopes[h]));
  }
  if (p.batch == 0 || p.total_q == 0) return Status::Ok();
  return cpu::prefill_cpu(p);
}

}  // namespace flashserve
