// The view of one layer's paged K/V that the attention and decode kernels read. Plain data,
// valid on host and device; the pointers live where the kernel runs.
//
// Layout (the project's layout: kvcache storage and append write it, every kernel reads it):
// one pool a layer,
//     [num_blocks, 2, num_kv_heads, block_size, head_dim]     (head_dim contiguous)
// a block's K (index 0 of the 2) then its V, so the block_size × head_dim keys of one (block,
// kv head) are one contiguous run (a decode work item streams whole pages with 16-byte loads)
// and a page visit's K and V lie in one 2·num_kv_heads·block_size·head_dim run: with the
// blocks scattered over a large pool, half the address translations and DRAM pages of K and V
// pools kept apart ((64,8k) decode +0.8% on the H200, bench/history/decode.md "KV layout v2").
// The view holds K and V as two pointers with the same strides (block_stride = 2·num_kv_heads·
// block_size·head_dim, head_stride = block_size·head_dim, token_stride = head_dim; v_pages =
// k_pages + num_kv_heads·block_size·head_dim), so every kernel also reads other strided
// layouts: K and V pools apart, or token-major pages.
//
// Sequence b owns keys 0 .. seq_lens[b]-1; key j sits in block block_table[b][j / block_size]
// at slot j % block_size. Block 0 may be the pool's reserved null block; kernels never
// treat it specially. A pool slot (the engine's slot mapping, KVStorage::append) is
// block·block_size + slot in block.
//
// offset() is the one place that turns (block, kv head, slot) into an address: storage, append,
// copy_blocks, the model's fused rotary + append and the CPU kernels call it. The CUDA attention
// kernels start from it (KVSource::init_paged: a kv head's base) and step through a page with
// 32-bit byte strides of their own (kv_tile_copier.cuh: one IMAD.WIDE.U32 a key).
//
// Element type (issue 25): `dtype` is what the pages hold. 16-bit or fp32 pages hold the call's
// dtype (PrefillParams/DecodeParams::dtype, the type of q and o; a view of another type is a
// mismatch, INVALID_ARGUMENT). FP8 pages (fp8_e4m3, fp8_e5m2) hold codes and the layer's scales,
// one a kv head for K and for V: key = k_scales[h]·fp8(code), value = v_scales[h]·fp8(code);
// the kernels, CPU and CUDA alike, fold k_scales[h] into the softmax scale and multiply the
// output by v_scales[h] (the scales where the kernel runs: a CUDA pool's device copy).
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "common/host_device.h"

namespace flashserve {

struct KVPageView {
  // Key (value) of block b, kv head h, slot t at k_pages (v_pages) + b·block_stride +
  // h·head_stride + t·token_stride elements.
  const void* k_pages = nullptr;
  const void* v_pages = nullptr;
  int64_t block_stride = 0;       // elements between block b and b+1 (K and V alike)
  int64_t head_stride = 0;        // elements between kv head h and h+1 inside a block
  int64_t token_stride = 0;       // elements between slot t and t+1 inside (block, head)
  int32_t num_blocks = 0;         // blocks in the pool; ids must lie in [0, num_blocks)
  int32_t block_size = 0;         // tokens per block, >= 1
  // [batch, block_table_stride] block ids. Every entry of every row must be readable (the CUDA
  // kernels may read entries past a sequence's last page; their values are never used).
  const int32_t* block_table = nullptr;
  int64_t block_table_stride = 0;        // entries per row: the most blocks a sequence may own
  const int32_t* seq_lens = nullptr;     // [batch] keys per sequence (cached prefix + new tokens)

  DType dtype = DType::kBFloat16;        // element type of the pages (KVStorage::view sets it)
  // FP8 pages only (null otherwise): this layer's dequantization scales, [num_kv_heads] fp32
  // each, finite and > 0, where the kernel runs.
  const float* k_scales = nullptr;
  const float* v_scales = nullptr;

  // Elements from k_pages (v_pages) to the key (value) of block `block`, kv head `head`, slot
  // `slot` in the block.
  FS_HOST_DEVICE int64_t offset(int64_t block, int64_t head, int64_t slot) const {
    return block * block_stride + head * head_stride + slot * token_stride;
  }
  // The same for pool slot `slot` (block·block_size + slot in block, >= 0).
  FS_HOST_DEVICE int64_t offset_of_slot(int64_t slot, int64_t head) const {
    return offset(slot / block_size, head, slot % block_size);
  }
};

// The view of one layer's pool in the project's layout, [num_blocks, 2, num_kv_heads,
// block_size, head_dim] of `dtype` elements (FP8: the scales are set apart).
inline KVPageView make_page_view(const void* pages, DType dtype, int32_t num_blocks, int32_t num_kv_heads,
                                 int32_t block_size, int32_t head_dim, const int32_t* block_table,
                                 int64_t block_table_stride, const int32_t* seq_lens) {
  const int64_t elem_bytes = dtype_size(dtype);
  KVPageView v;
  v.dtype = dtype;
  v.token_stride = head_dim;
  v.head_stride = static_cast<int64_t>(block_size) * head_dim;
  const int64_t half = v.head_stride * num_kv_heads;  // one block's K (or V)
  v.block_stride = 2 * half;
  v.k_pages = pages;
  v.v_pages = static_cast<const char*>(pages) + half * elem_bytes;
  v.num_blocks = num_blocks;
  v.block_size = block_size;
  v.block_table = block_table;
  v.block_table_stride = block_table_stride;
  v.seq_lens = seq_lens;
  return v;
}

}  // namespace flashserve
