#include "kvcache/page_view_check.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "common/check.h"

namespace flashserve {

Status validate_page_view_shapes(const char* where, const KVPageView& pages, int64_t align) {
  FS_RETURN_IF_ERROR(check_pointer(where, "k_pages", pages.k_pages, align));
  FS_RETURN_IF_ERROR(check_pointer(where, "v_pages", pages.v_pages, align));
  FS_RETURN_IF_ERROR(check_pointer(where, "block_table", pages.block_table, 4));
  FS_RETURN_IF_ERROR(check_pointer(where, "seq_lens", pages.seq_lens, 4));
  FS_RETURN_IF_ERROR(check_positive(where, "num_blocks", pages.num_blocks));
  FS_RETURN_IF_ERROR(check_positive(where, "block_size", pages.block_size));
  FS_RETURN_IF_ERROR(check_positive(where, "block_table_stride", pages.block_table_stride));
  FS_RETURN_IF_ERROR(check_positive(where, "block_stride", pages.block_stride));
  FS_RETURN_IF_ERROR(check_positive(where, "head_stride", pages.head_stride));
  FS_RETURN_IF_ERROR(check_positive(where, "token_stride", pages.token_stride));
  return Status::Ok();
}

Status validate_page_view_dtype(const char* where, const KVPageView& pages, DType dtype, Device device) {
  if (!is_valid(pages.dtype)) return invalid_argument(std::string(where) + ": the pages have an invalid dtype");
  if (is_fp8(pages.dtype)) {
    if (pages.k_scales == nullptr || pages.v_scales == nullptr)
      return invalid_argument(std::string(where) + ": " + dtype_name(pages.dtype) +
                              " pages need k_scales and v_scales (one a kv head)");
    FS_RETURN_IF_ERROR(check_pointer(where, "k_scales", pages.k_scales, 4));
    FS_RETURN_IF_ERROR(check_pointer(where, "v_scales", pages.v_scales, 4));
    return Status::Ok();
  }
  // The CPU kernels widen 16-bit pages under an fp32 call (exact): the CPU model's bf16/fp16 cache.
  const bool widen = device == Device::kCPU && dtype == DType::kFloat32 &&
                     (pages.dtype == DType::kBFloat16 || pages.dtype == DType::kFloat16);
  if (pages.dtype != dtype && !widen)
    return invalid_argument(std::string(where) + ": the pages hold " + dtype_name(pages.dtype) +
                            " but the call's dtype is " + (is_valid(dtype) ? dtype_name(dtype) : "invalid") +
                            " (q, o and unquantized pages share one type; on the CPU an fp32 call also reads bf16/fp16 pages)");
  return Status::Ok();
}

Status validate_page_view_scales_host(const char* where, const KVPageView& pages, int32_t num_kv_heads) {
  if (!is_fp8(pages.dtype)) return Status::Ok();
  for (const auto& [name, scales] : {std::pair{"k_scales", pages.k_scales}, std::pair{"v_scales", pages.v_scales}}) {
    for (int32_t h = 0; h < num_kv_heads; ++h) {
      const float s = scales[h];
      if (!(s > 0.f) || !std::isfinite(s))
        return invalid_argument(std::string(where) + ": " + name + "[" + std::to_string(h) + "] = " +
                                std::to_string(s) + " must be finite and > 0");
    }
  }
  return Status::Ok();
}

Status validate_page_view_cuda(const char* where, const KVPageView& pv, int64_t elem) {
  const int64_t chunk = 16 / elem;  // elements in 16 bytes
  if (reinterpret_cast<uintptr_t>(pv.k_pages) % 16 || reinterpret_cast<uintptr_t>(pv.v_pages) % 16 ||
      pv.block_stride % chunk || pv.head_stride % chunk || pv.token_stride % chunk)
    return invalid_argument(std::string(where) +
                            ": CUDA pages must be 16-byte aligned, with strides of whole 16-byte chunks");
  if (pv.block_size & (pv.block_size - 1))
    return unsupported(std::string(where) + ": CUDA block_size must be a power of two, got " +
                       std::to_string(pv.block_size));
  constexpr int64_t kMax32 = int64_t{1} << 32;
  if (pv.block_stride * elem >= kMax32 || int64_t{pv.block_size} * pv.token_stride * elem >= kMax32)
    return unsupported(std::string(where) + ": CUDA needs block_stride and block_size·token_stride below 4 GiB");
  if (pv.block_table_stride * pv.block_size >= (int64_t{1} << 31))
    return unsupported(std::string(where) + ": CUDA needs block_table_stride·block_size below 2^31 keys");
  return Status::Ok();
}

Status validate_page_view_host(const char* where, const KVPageView& pages, int32_t batch) {
  const int64_t capacity = pages.block_table_stride * pages.block_size;
  for (int32_t b = 0; b < batch; ++b) {
    const int64_t len = pages.seq_lens[b];
    if (len < 0)
      return invalid_argument(std::string(where) + ": seq_lens[" + std::to_string(b) + "] = " +
                              std::to_string(len) + " is negative");
    if (len > capacity)
      return out_of_range(std::string(where) + ": seq_lens[" + std::to_string(b) + "] = " +
                          std::to_string(len) + " is beyond its block table (" +
                          std::to_string(pages.block_table_stride) + " blocks of " +
                          std::to_string(pages.block_size) + " tokens)");
    const int32_t* row = pages.block_table + b * pages.block_table_stride;
    const int64_t used = (len + pages.block_size - 1) / pages.block_size;
    for (int64_t i = 0; i < used; ++i) {
      if (row[i] < 0 || row[i] >= pages.num_blocks)
        return out_of_range(std::string(where) + ": block_table[" + std::to_string(b) + "][" +
                            std::to_string(i) + "] = " + std::to_string(row[i]) +
                            " is out of range [0, " + std::to_string(pages.num_blocks) + ")");
    }
  }
  return Status::Ok();
}

}  // namespace flashserve
