// Page storage of one layer on the CPU: the K and V pools of page_view.h's layout, and a
// write of new tokens' K/V into their slots. Just what the kernels need; the block manager
// (allocation, prefix caching, copy-on-write) sits on top of it.
#pragma once

#include <cstdint>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "kvcache/page_view.h"

namespace flashserve {

class CpuKVPool {
 public:
  CpuKVPool() = default;
  // Allocates num_blocks blocks (contents unspecified).
  static Status create(int32_t num_blocks, int32_t num_kv_heads, int32_t block_size, int32_t head_dim,
                       DType dtype, CpuKVPool* out);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t num_kv_heads() const { return num_kv_heads_; }
  int32_t block_size() const { return block_size_; }
  int32_t head_dim() const { return head_dim_; }
  DType dtype() const { return dtype_; }
  void* k_pages() { return k_.data(); }
  void* v_pages() { return v_.data(); }
  int64_t bytes() const { return 2 * static_cast<int64_t>(k_.size()) * 8; }

  // The view for a batch of sequences (arrays owned by the caller, host memory).
  KVPageView view(const int32_t* block_table, int64_t block_table_stride, const int32_t* seq_lens) const;

  // Writes n tokens' keys and values, each [n, num_kv_heads, head_dim] contiguous in the pool's
  // dtype, into slots[i] = block·block_size + offset. Checks every slot first: an invalid one
  // returns OUT_OF_RANGE and nothing is written.
  Status write(const int64_t* slots, int64_t n, const void* k, const void* v);

 private:
  int32_t num_blocks_ = 0, num_kv_heads_ = 0, block_size_ = 0, head_dim_ = 0;
  DType dtype_ = DType::kFloat32;
  std::vector<double> k_, v_;  // 8-byte aligned storage
};

}  // namespace flashserve
