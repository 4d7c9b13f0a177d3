#include "kvcache/sizing.h"

#include <algorithm>
#include <limits>
#include <string>

#include "common/check.h"
#include "common/cuda_device.h"

namespace flashserve {

Status size_cache(int64_t budget_bytes, int32_t num_layers, int32_t num_kv_heads, int32_t head_dim, DType dtype,
                  int32_t block_size, CacheSizing* out) {
  constexpr const char* where = "size_cache";
  FS_RETURN_IF_ERROR(check_positive(where, "num_layers", num_layers));
  FS_RETURN_IF_ERROR(check_positive(where, "num_kv_heads", num_kv_heads));
  FS_RETURN_IF_ERROR(check_positive(where, "head_dim", head_dim));
  FS_RETURN_IF_ERROR(check_positive(where, "block_size", block_size));
  if (!is_valid(dtype)) return invalid_argument("size_cache: invalid dtype");
  if (out == nullptr) return invalid_argument("size_cache: out is null");
  CacheSizing s;
  s.bytes_per_block = 2LL * num_layers * num_kv_heads * block_size * head_dim * dtype_size(dtype);
  const int64_t blocks = budget_bytes > 0 ? budget_bytes / s.bytes_per_block : 0;
  if (blocks < 2)
    return resource_exhausted("size_cache: " + std::to_string(budget_bytes) + " bytes hold fewer than 2 blocks of " +
                              std::to_string(s.bytes_per_block) + " bytes");
  s.num_blocks = static_cast<int32_t>(std::min<int64_t>(blocks, std::numeric_limits<int32_t>::max()));
  s.num_tokens = static_cast<int64_t>(s.num_blocks - 1) * block_size;
  s.bytes = s.num_blocks * s.bytes_per_block;
  *out = s;
  return Status::Ok();
}

Status size_cache_from_gpu(double fraction, int device, int32_t num_layers, int32_t num_kv_heads, int32_t head_dim,
                           DType dtype, int32_t block_size, CacheSizing* out) {
  if (!(fraction > 0.0 && fraction <= 1.0)) return invalid_argument("size_cache_from_gpu: fraction must be in (0, 1]");
  int64_t free_bytes = 0;
  FS_RETURN_IF_ERROR(cuda_free_memory(device, &free_bytes));
  return size_cache(static_cast<int64_t>(static_cast<double>(free_bytes) * fraction), num_layers, num_kv_heads,
                    head_dim, dtype, block_size, out);
}

}  // namespace flashserve
