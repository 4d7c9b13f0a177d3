// K/V tile copies into shared memory, shared by the CUDA prefill and decode kernels: where a
// CTA's keys come from (KVSource: pages through a block table, or packed rows) and a tile
// copier over cp.async (KVTileCopier).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "attention/cuda/device_utils.cuh"
#include "kvcache/page_view.h"

namespace flashserve::cuda {

// One (sequence, kv head)'s keys. Paged: page ids from `table`; the kv head's base from the
// view's offset(), then 32-bit byte offsets inside the pool (block_bytes, token_bytes < 2^32,
// checked on the host by validate_page_view_cuda), so a key's address is one 32×32→64
// multiply-add of its page id (offset()'s 64-bit arithmetic a key would cost more IMADs in the
// copy loop). Packed: rows row_bytes apart.
struct KVSource {
  const char* k_base = nullptr;  // this kv head's first byte (paged: of block 0)
  const char* v_base = nullptr;
  const int32_t* table = nullptr;  // paged: the sequence's block table
  uint32_t block_bytes = 0, token_bytes = 0;
  int block_shift = 0, block_mask = 0, num_blocks = 0;
  int64_t k_row_bytes = 0, v_row_bytes = 0;  // packed

  __device__ __forceinline__ void init_paged(const KVPageView& pv, int b, int kv_head, int elem) {
    k_base = static_cast<const char*>(pv.k_pages) + pv.offset(0, kv_head, 0) * elem;
    v_base = static_cast<const char*>(pv.v_pages) + pv.offset(0, kv_head, 0) * elem;
    table = pv.block_table + static_cast<int64_t>(b) * pv.block_table_stride;
    block_bytes = static_cast<uint32_t>(pv.block_stride * elem);
    token_bytes = static_cast<uint32_t>(pv.token_stride * elem);
    block_shift = __ffs(pv.block_size) - 1;  // a power of two (checked on the host)
    block_mask = pv.block_size - 1;
    num_blocks = pv.num_blocks;
  }
};

// A CTA's K/V tile copies: kThreads threads, kKeys keys a tile, 16-byte chunks; thread tid
// copies chunk tid % kChunks of keys lo + tile·kKeys + tid / kChunks + i·kPass (i < kRows),
// zero-filling keys at or past hi (and, paged, keys on a bad page id: nothing is read, the key
// counts as a zero K/V row; the host rejects such ids where it can read the table).
// Paged: page ids are read a tile ahead of the copies that use them (fetch_ids), so a copy
// never waits behind a block-table read. Every thread of the CTA must call both (shuffles). dst(j, chunk) is the element offset of a key's chunk in
// the stage (the kernel's swizzle).
template <int kThreads, int kKeys, int kChunks>
struct KVTileCopier {
  static constexpr int kPass = kThreads / kChunks;  // keys a pass of all threads
  static constexpr int kRows = kKeys / kPass;       // passes a tile
  static_assert(kRows >= 1 && kKeys % kPass == 0, "tile");
  // A warp's threads copy kWarpKeys distinct keys of a tile; lane l reads the page id of one
  // (key jj = l % kJ of the warp's kJ first keys, pass (l / kJ) % kRows), and each thread takes
  // its kRows ids from those lanes with shuffles when it copies: one table read a thread a tile.
  static constexpr int kJ = 32 / kChunks;         // a warp's distinct keys a pass
  static constexpr int kWarpKeys = kJ * kRows;
  static_assert(kChunks <= 32 && 32 % kChunks == 0 && kWarpKeys <= 32, "one id a lane");
  int32_t id = -1;  // the page id this lane read (fetch_ids), -1: none

  __device__ __forceinline__ void fetch_ids(const KVSource& s, int lo, int hi, int num_tiles, int tile, int tid) {
    if (s.table == nullptr) return;
    const int lane = tid % 32;
    const int key = lo + tile * kKeys + (tid / 32) * kJ + lane % kJ + ((lane / kJ) % kRows) * kPass;
    id = (tile < num_tiles && key < hi) ? s.table[key >> s.block_shift] : -1;
  }

  // kHint: the copies carry the L2 cache policy `policy` (cp_async_16_hint).
  template <bool kHint = false, typename T, typename Dst>
  __device__ __forceinline__ void copy(const KVSource& s, int lo, int hi, int tile, T* sk, T* sv, int tid, Dst dst,
                                       uint64_t policy = 0) const {
    auto cp = [&](T* d, const char* g, bool valid) {
      if constexpr (kHint)
        cp_async_16_hint(d, g, valid, policy);
      else
        cp_async_16(d, g, valid);
    };
    const int chunk = tid % kChunks, j0 = tid / kChunks;
    const int first = lo + tile * kKeys + j0;  // this thread's first key
    const int left = hi - first;               // keys i·kPass < left are in range
    if (s.table != nullptr) {
      const int jj = (tid % 32) / kChunks;
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int key = first + i * kPass;
        const uint32_t raw = static_cast<uint32_t>(__shfl_sync(0xffffffffu, id, i * kJ + jj));
        const bool valid = i * kPass < left && raw < static_cast<uint32_t>(s.num_blocks);
        const uint32_t page = valid ? raw : 0u;  // invalid: block 0, nothing read
        const uint32_t in_block = static_cast<uint32_t>(key & s.block_mask) * s.token_bytes + chunk * 16;
        const uint64_t off = static_cast<uint64_t>(page) * s.block_bytes + in_block;  // one IMAD.WIDE.U32
        const int d = dst(j0 + i * kPass, chunk);
        cp(sk + d, s.k_base + off, valid);
        cp(sv + d, s.v_base + off, valid);
      }
    } else {
      const char* ks = s.k_base + first * s.k_row_bytes + chunk * 16;
      const char* vs = s.v_base + first * s.v_row_bytes + chunk * 16;
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const bool valid = i * kPass < left;  // src-size 0 when not: nothing is read
        const int d = dst(j0 + i * kPass, chunk);
        cp(sk + d, ks, valid);
        cp(sv + d, vs, valid);
        ks += kPass * s.k_row_bytes;
        vs += kPass * s.v_row_bytes;
      }
    }
  }
};

}  // namespace flashserve::cuda
