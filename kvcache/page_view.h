// The view of one layer's paged K/V that the attention and decode kernels read. Plain data,
// valid on host and device; the pointers live where the kernel runs.
//
// Layout (the project's one layout, shared by kvcache storage, append and every kernel):
// separate K and V pools, each
//     [num_blocks, num_kv_heads, block_size, head_dim]     (head_dim contiguous)
// so the block_size × head_dim keys of one (block, kv head) are one contiguous run: a
// decode work item streams whole pages with 16-byte loads. The strides below describe that
// layout (block_stride = num_kv_heads·block_size·head_dim, head_stride = block_size·head_dim,
// token_stride = head_dim) but any other strided layout works on the CPU.
//
// Sequence b owns keys 0 .. seq_lens[b]-1; key j sits in block block_table[b][j / block_size]
// at slot j % block_size. Block 0 may be the pool's reserved null block; kernels never
// treat it specially.
#pragma once

#include <cstdint>

namespace flashserve {

struct KVPageView {
  const void* k_pages = nullptr;  // [num_blocks, num_kv_heads, block_size, head_dim]
  const void* v_pages = nullptr;  // [num_blocks, num_kv_heads, block_size, head_dim]
  int64_t block_stride = 0;       // elements between block b and b+1 (K and V alike)
  int64_t head_stride = 0;        // elements between kv head h and h+1 inside a block
  int64_t token_stride = 0;       // elements between slot t and t+1 inside (block, head)
  int32_t num_blocks = 0;         // blocks in each pool; ids must lie in [0, num_blocks)
  int32_t block_size = 0;         // tokens per block, >= 1
  // [batch, block_table_stride] block ids. Every entry of every row must be readable (the CUDA
  // kernels may read entries past a sequence's last page; their values are never used).
  const int32_t* block_table = nullptr;
  int64_t block_table_stride = 0;        // entries per row: the most blocks a sequence may own
  const int32_t* seq_lens = nullptr;     // [batch] keys per sequence (cached prefix + new tokens)
};

// Fills the strides of the project layout for pools of the given shape.
inline KVPageView make_page_view(const void* k_pages, const void* v_pages, int32_t num_blocks,
                                 int32_t num_kv_heads, int32_t block_size, int32_t head_dim,
                                 const int32_t* block_table, int64_t block_table_stride,
                                 const int32_t* seq_lens) {
  KVPageView v;
  v.k_pages = k_pages;
  v.v_pages = v_pages;
  v.token_stride = head_dim;
  v.head_stride = static_cast<int64_t>(block_size) * head_dim;
  v.block_stride = v.head_stride * num_kv_heads;
  v.num_blocks = num_blocks;
  v.block_size = block_size;
  v.block_table = block_table;
  v.block_table_stride = block_table_stride;
  v.seq_lens = seq_lens;
  return v;
}

}  // namespace flashserve
