// What the CUDA prefill kernels (mma.sync: prefill_kernel.cuh; wgmma: prefill_sm90_kernel.cuh;
// warp-specialized: prefill_sm90_ws_kernel.cuh) share: a CTA's view of its (sequence, head, q
// tile) — key range, tile count, where K/V come from (packed rows or pages). The online softmax
// they share with decode is online_softmax.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "attention/cuda/device_utils.cuh"
#include "attention/cuda/kv_tile_copier.cuh"
#include "attention/cuda/online_softmax.cuh"
#include "attention/params.h"

namespace flashserve::cuda {

// A 16-byte chunk of 8 bf16 or fp16 values (bf16: the call's dtype is bf16) as floats (the
// FP8 kernels' q, converted into fp16 by a power of two).
__device__ __forceinline__ void chunk_to_float(const uint4& v, bool bf16, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t lo = w[j] & 0xffffu, hi = w[j] >> 16;
    f[2 * j] = bf16 ? __uint_as_float(lo << 16) : __half2float(__ushort_as_half(static_cast<unsigned short>(lo)));
    f[2 * j + 1] = bf16 ? __uint_as_float(hi << 16) : __half2float(__ushort_as_half(static_cast<unsigned short>(hi)));
  }
}

struct PrefillCta {
  int64_t q0 = 0;        // first packed query row of the sequence
  int64_t k_len = 0;     // keys of the sequence
  int64_t pos0 = 0;      // key position of query row 0
  int64_t lo_first = 0, hi_first = 0, lo_last = 0;  // visible ranges of the tile's first/last row
  int cta_lo = 0, cta_hi = 0;  // keys any row of the tile sees (a sequence has < 2^31 keys)
  int row0 = 0, block_rows = 0, num_tiles = 0;
  KVSource src;                                     // where K/V come from

  // False when the tile starts past the sequence's queries (the CTA has nothing to do). cu_q,
  // keys: copies of p.cu_seqlens_q and of p.cu_seqlens_k (packed) or p.pages.seq_lens (paged),
  // e.g. in shared memory; null: p's own.
  __device__ __forceinline__ bool init(const PrefillParams& p, int m_tile, int h, int b, int block_m, int block_n,
                                       int elem, const int* cu_q = nullptr, const int* keys = nullptr) {
    const int kv_head = h / (p.num_heads / p.num_kv_heads);
    if (cu_q == nullptr) cu_q = p.cu_seqlens_q;
    if (keys == nullptr) keys = p.paged ? p.pages.seq_lens : p.cu_seqlens_k;
    q0 = cu_q[b];
    const int q_len = cu_q[b + 1] - cu_q[b];
    row0 = m_tile * block_m;
    if (row0 >= q_len) return false;
    block_rows = min(block_m, q_len - row0);
    int64_t k0 = 0;  // packed: first key row
    if (p.paged) {
      k_len = min(static_cast<int64_t>(keys[b]), p.pages.block_table_stride * p.pages.block_size);
      src.init_paged(p.pages, b, kv_head, elem);
    } else {
      k0 = keys[b];
      k_len = keys[b + 1] - k0;
      src.k_base = static_cast<const char*>(p.k) + (k0 * p.k_row_stride + kv_head * p.k_head_stride) * elem;
      src.k_row_bytes = p.k_row_stride * elem;
      src.v_row_bytes = p.v_row_stride * elem;
      src.v_base = static_cast<const char*>(p.v) + (k0 * p.v_row_stride + kv_head * p.v_head_stride) * elem;
    }
    pos0 = k_len - q_len;
    // Rows' visible ranges grow with the row: the first row bounds the low end and the last the
    // high end; the inner bounds say which tiles need no mask.
    int64_t hi_last;
    visible_keys(p.mask, pos0 + row0, 0, k_len, &lo_first, &hi_first);
    visible_keys(p.mask, pos0 + row0 + block_rows - 1, 0, k_len, &lo_last, &hi_last);
    cta_lo = static_cast<int>(lo_first);
    cta_hi = static_cast<int>(max(hi_last, lo_first));
    num_tiles = cta_hi > cta_lo ? static_cast<int>((cta_hi - cta_lo + block_n - 1) / block_n) : 0;
    return true;
  }

  // Whether some row's range ends inside the tile of block_n keys at key0 (only then mask).
  __device__ __forceinline__ bool masked(int64_t key0, int block_n) const {
    return key0 < lo_last || key0 + block_n > hi_first || key0 + block_n > k_len;
  }
};

}  // namespace flashserve::cuda
