// Checks of a KVPageView: its shape fields (anywhere), and its block table and lengths
// (host-readable arrays only).
#pragma once

#include "common/dtype.h"
#include "common/status.h"
#include "kvcache/page_view.h"

namespace flashserve {

// Pointers, alignment (to `align` bytes), block size, strides. `where` prefixes messages.
Status validate_page_view_shapes(const char* where, const KVPageView& pages, int64_t align);

// The pages' element type against the call's `dtype` (the type of q and o): pages.dtype must be
// that dtype, or FP8 with both scale pointers set (4-byte aligned), or, on the CPU under an fp32
// call, bf16/fp16 (the kernels widen them exactly). INVALID_ARGUMENT naming both types otherwise.
Status validate_page_view_dtype(const char* where, const KVPageView& pages, DType dtype, Device device);

// FP8 pages (host-readable scales): each of the num_kv_heads K and V scales finite and > 0
// (INVALID_ARGUMENT naming the first bad one). Nothing to check for other pages.
Status validate_page_view_scales_host(const char* where, const KVPageView& pages, int32_t num_kv_heads);

// What the CUDA kernels need beyond the shapes: 16-byte chunks (pointers and strides of
// `elem`-byte elements), a power-of-two block size, and a pool whose in-pool byte offsets of
// a block and of a token inside a block fit 32 bits (block_stride·elem and
// block_size·token_stride·elem below 2^32), and a table row of fewer than 2^31 keys
// (block_table_stride·block_size: key indices are 32-bit). INVALID_ARGUMENT / UNSUPPORTED
// otherwise.
Status validate_page_view_cuda(const char* where, const KVPageView& pages, int64_t elem);

// For each of `batch` sequences: 0 <= seq_lens[b] <= block_table_stride·block_size
// (else OUT_OF_RANGE: the sequence is longer than its table) and every block id that holds
// one of its keys lies in [0, num_blocks) (else OUT_OF_RANGE).
Status validate_page_view_host(const char* where, const KVPageView& pages, int32_t batch);

}  // namespace flashserve
