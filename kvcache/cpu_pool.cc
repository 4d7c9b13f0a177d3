#include "kvcache/cpu_pool.h"

#include <cstring>
#include <string>

#include "common/check.h"

namespace flashserve {

Status CpuKVPool::create(int32_t num_blocks, int32_t num_kv_heads, int32_t block_size, int32_t head_dim,
                         DType dtype, CpuKVPool* out) {
  constexpr const char* where = "CpuKVPool";
  FS_RETURN_IF_ERROR(check_positive(where, "num_blocks", num_blocks));
  FS_RETURN_IF_ERROR(check_positive(where, "num_kv_heads", num_kv_heads));
  FS_RETURN_IF_ERROR(check_positive(where, "block_size", block_size));
  FS_RETURN_IF_ERROR(check_positive(where, "head_dim", head_dim));
  if (!is_valid(dtype)) return invalid_argument("CpuKVPool: invalid dtype");
  const int64_t bytes = int64_t{num_blocks} * num_kv_heads * block_size * head_dim * dtype_size(dtype);
  out->num_blocks_ = num_blocks;
  out->num_kv_heads_ = num_kv_heads;
  out->block_size_ = block_size;
  out->head_dim_ = head_dim;
  out->dtype_ = dtype;
  out->k_.assign(static_cast<size_t>((bytes + 7) / 8), 0.0);
  out->v_.assign(static_cast<size_t>((bytes + 7) / 8), 0.0);
  return Status::Ok();
}

KVPageView CpuKVPool::view(const int32_t* block_table, int64_t block_table_stride, const int32_t* seq_lens) const {
  return make_page_view(k_.data(), v_.data(), num_blocks_, num_kv_heads_, block_size_, head_dim_, block_table,
                        block_table_stride, seq_lens);
}

Status CpuKVPool::write(const int64_t* slots, int64_t n, const void* k, const void* v) {
  if (n < 0) return invalid_argument("CpuKVPool::write: n is negative");
  if (n == 0) return Status::Ok();
  FS_RETURN_IF_ERROR(check_pointer("CpuKVPool::write", "slots", slots, 8));
  FS_RETURN_IF_ERROR(check_pointer("CpuKVPool::write", "k", k, dtype_size(dtype_)));
  FS_RETURN_IF_ERROR(check_pointer("CpuKVPool::write", "v", v, dtype_size(dtype_)));
  const int64_t capacity = int64_t{num_blocks_} * block_size_;
  for (int64_t i = 0; i < n; ++i) {
    if (slots[i] < 0 || slots[i] >= capacity)
      return out_of_range("CpuKVPool::write: slots[" + std::to_string(i) + "] = " + std::to_string(slots[i]) +
                          " is out of range [0, " + std::to_string(capacity) + ")");
  }
  const KVPageView pv = view(nullptr, 0, nullptr);
  const int64_t elem = dtype_size(dtype_);
  const int64_t row_bytes = int64_t{head_dim_} * elem;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t block = slots[i] / block_size_, offset = slots[i] % block_size_;
    for (int32_t h = 0; h < num_kv_heads_; ++h) {
      const int64_t dst = (block * pv.block_stride + h * pv.head_stride + offset * pv.token_stride) * elem;
      const int64_t src = (i * num_kv_heads_ + h) * row_bytes;
      std::memcpy(reinterpret_cast<char*>(k_.data()) + dst, static_cast<const char*>(k) + src, row_bytes);
      std::memcpy(reinterpret_cast<char*>(v_.data()) + dst, static_cast<const char*>(v) + src, row_bytes);
    }
  }
  return Status::Ok();
}

}  // namespace flashserve
