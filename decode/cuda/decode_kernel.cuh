// The CUDA split-K decode kernel (Flash-Decoding over pages), templated on head_dim and the
// storage type; each instance is compiled in a file of its own (decode_hd*_*.cu).
//
// One CTA = one work item (sequence b, kv head, split, row block). Its rows are the query
// rows of the GQA group for all q_len new tokens (row = token·group + g), up to
// kRowsPerBlock = 16 per CTA; larger groups × q_len use more row blocks (which re-read the
// same K/V, from L2 when they run together). Warp w owns rows w, w+4, w+8, w+12, so every
// warp has work as soon as the CTA has 4 rows, and no two warps share a row: no inter-warp
// merge.
//
// K/V tiles of kTileKeys keys stream through shared memory with cp.async (16-byte, coalesced:
// 16 consecutive threads copy one key's 256 bytes at head_dim 128), kStages deep, read from
// the pages through the block table; slots past the split's end are zero-filled. K is stored
// XOR-swizzled by 16-byte chunk so that 8 lanes reading 8 different keys at the same chunk
// hit 32 different banks.
//
// Per tile and row: lane l computes the full q·k of keys l and l+32 (no per-key shuffles);
// the warp reduces the tile max and sum with 5 shuffles each; then P·V with lane l owning
// head_dim/32 output dims, p_j broadcast by shuffle. Online softmax in registers (natural
// base, SoftmaxState's convention). With one split the CTA writes o in the storage type;
// otherwise fp32 partial o and lse into the workspace for merge_states.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "decode/params.h"

namespace flashserve::cuda {

inline constexpr int kDecodeThreads = 128;
inline constexpr int kDecodeWarps = kDecodeThreads / 32;
inline constexpr int kRowsPerBlock = 16;  // query rows per CTA
inline constexpr int kRowsPerWarp = kRowsPerBlock / kDecodeWarps;
inline constexpr int kTileKeys = 64;
inline constexpr int kStages = 3;

template <int kHeadDim, typename T>
struct DecodeTraits {
  static_assert(kHeadDim == 64 || kHeadDim == 128, "decode: head_dim 64 or 128");
  static constexpr int kElemsPerChunk = 16 / sizeof(T);           // 8
  static constexpr int kChunks = kHeadDim / kElemsPerChunk;       // 16-byte chunks per key row
  static constexpr int kDimsPerLane = kHeadDim / 32;              // P·V output dims per lane
  static constexpr int kTileElems = kTileKeys * kHeadDim;         // one K (or V) tile
  static constexpr int kSmemKV = 2 * kStages * kTileElems * sizeof(T);
  static constexpr int kSmemQ = kRowsPerBlock * kHeadDim * sizeof(float);
  static constexpr int kSmemBytes = kSmemKV + kSmemQ;
  static_assert(kChunks >= 8, "the K swizzle needs 8 chunks per row");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
};

__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// 8 storage-type values (16 bytes) to float.
template <typename T>
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]);
template <>
__device__ __forceinline__ void unpack8<__nv_bfloat16>(const uint4& v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
template <>
__device__ __forceinline__ void unpack8<__half>(const uint4& v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int src_size = valid ? 16 : 0;  // 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_size));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Visible keys [lo, hi) of the query at q_pos within [k_begin, k_end) (MaskParams' rule).
__device__ __forceinline__ void visible(const MaskParams& m, int64_t q_pos, int64_t k_begin, int64_t k_end,
                                        int64_t& lo, int64_t& hi) {
  lo = k_begin;
  hi = k_end;
  if (m.window_left >= 0) lo = max(lo, q_pos - m.window_left);
  if (m.causal) hi = min(hi, q_pos + 1);
  if (m.window_right >= 0) hi = min(hi, q_pos + m.window_right + 1);
  if (hi < lo) hi = lo;
}

template <int kHeadDim, typename T>
__global__ void __launch_bounds__(kDecodeThreads, 2)
    decode_split_kernel(const __grid_constant__ DecodeParams p, const int row_blocks) {
  using Tr = DecodeTraits<kHeadDim, T>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* smem_k = reinterpret_cast<T*>(smem_raw);
  T* smem_v = smem_k + kStages * Tr::kTileElems;
  float* smem_q = reinterpret_cast<float*>(smem_raw + Tr::kSmemKV);

  const int split = blockIdx.x;
  const int kv_head = blockIdx.y / row_blocks;
  const int row_block = blockIdx.y % row_blocks;
  const int b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int group = p.num_heads / p.num_kv_heads;
  const int rows = p.q_len * group;  // rows of this (sequence, kv head)
  const int row0 = row_block * kRowsPerBlock;
  const int block_rows = min(kRowsPerBlock, rows - row0);

  const KVPageView& pv = p.pages;
  const int64_t capacity = pv.block_table_stride * pv.block_size;
  const int64_t seq_len = min(static_cast<int64_t>(pv.seq_lens[b]), capacity);  // never past the table
  const int64_t split_keys = static_cast<int64_t>(p.pages_per_split) * pv.block_size;
  const int64_t k_begin = min(seq_len, split * split_keys);
  const int64_t k_end = min(seq_len, (split + 1) * split_keys);

  // Queries of the row block to shared memory, as float scaled by softmax_scale.
  for (int i = tid; i < block_rows * kHeadDim; i += kDecodeThreads) {
    const int lr = row0 + i / kHeadDim, d = i % kHeadDim;
    const int t = lr / group, h = kv_head * group + lr % group;
    const T* q = static_cast<const T*>(p.q) + (static_cast<int64_t>(b) * p.q_len + t) * p.q_row_stride +
                 static_cast<int64_t>(h) * p.q_head_stride;
    smem_q[(i / kHeadDim) * kHeadDim + d] = to_f(q[d]) * p.mask.softmax_scale;
  }

  // This warp's rows: visible ranges, and the CTA's key range (union over its rows).
  int64_t row_lo[kRowsPerWarp], row_hi[kRowsPerWarp], row_pos[kRowsPerWarp];
  float slope[kRowsPerWarp];
  int64_t cta_lo = k_end, cta_hi = k_begin;
  for (int r = 0; r < block_rows; ++r) {
    const int64_t q_pos = seq_len - p.q_len + (row0 + r) / group;
    int64_t lo, hi;
    visible(p.mask, q_pos, k_begin, k_end, lo, hi);
    if (lo < hi) {
      cta_lo = min(cta_lo, lo);
      cta_hi = max(cta_hi, hi);
    }
  }
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = warp + kDecodeWarps * i;  // local row in the block
    row_pos[i] = seq_len - p.q_len + (row0 + r) / group;
    if (r < block_rows) {
      visible(p.mask, row_pos[i], k_begin, k_end, row_lo[i], row_hi[i]);
    } else {
      row_lo[i] = row_hi[i] = 0;
    }
    const int h = kv_head * group + (row0 + r) % group;
    slope[i] = (p.mask.alibi_slopes != nullptr && r < block_rows) ? p.mask.alibi_slopes[h] : 0.f;
  }

  const int64_t elem_bytes = sizeof(T);
  const char* k_base = static_cast<const char*>(pv.k_pages) + kv_head * pv.head_stride * elem_bytes;
  const char* v_base = static_cast<const char*>(pv.v_pages) + kv_head * pv.head_stride * elem_bytes;
  const int32_t* table = pv.block_table + static_cast<int64_t>(b) * pv.block_table_stride;
  const int num_tiles = cta_hi > cta_lo ? static_cast<int>((cta_hi - cta_lo + kTileKeys - 1) / kTileKeys) : 0;

  // Thread tid copies chunk (tid % kChunks) of keys tid / kChunks + i·(threads / kChunks).
  constexpr int kKeysPerPass = kDecodeThreads / Tr::kChunks;
  const int my_chunk = tid % Tr::kChunks;
  auto load_tile = [&](int tile, int stage) {
    const int64_t key0 = cta_lo + static_cast<int64_t>(tile) * kTileKeys;
    T* sk = smem_k + stage * Tr::kTileElems;
    T* sv = smem_v + stage * Tr::kTileElems;
#pragma unroll
    for (int j = tid / Tr::kChunks; j < kTileKeys; j += kKeysPerPass) {
      const int64_t key = key0 + j;
      bool valid = key < cta_hi;
      int64_t off = 0;
      if (valid) {
        const int32_t block = table[key / pv.block_size];
        valid = block >= 0 && block < pv.num_blocks;  // a bad id reads nothing
        off = (static_cast<int64_t>(block) * pv.block_stride + (key % pv.block_size) * pv.token_stride) * elem_bytes +
              my_chunk * 16;
      }
      const int swz = my_chunk ^ (j & 7);
      cp_async_16(sk + j * kHeadDim + swz * Tr::kElemsPerChunk, k_base + off, valid);
      cp_async_16(sv + j * kHeadDim + my_chunk * Tr::kElemsPerChunk, v_base + off, valid);
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_tiles) load_tile(s, s);
    cp_async_commit();
  }

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][Tr::kDimsPerLane];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int d = 0; d < Tr::kDimsPerLane; ++d) acc[i][d] = 0.f;
  }
  const bool softcap = p.mask.softcap > 0.f;
  const float inv_cap = softcap ? 1.f / p.mask.softcap : 0.f;

  for (int tile = 0; tile < num_tiles; ++tile) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // the tile has landed for everyone; the previous stage is free
    if (tile + kStages - 1 < num_tiles) load_tile(tile + kStages - 1, (tile + kStages - 1) % kStages);
    cp_async_commit();

    const int stage = tile % kStages;
    const T* sk = smem_k + stage * Tr::kTileElems;
    const T* sv = smem_v + stage * Tr::kTileElems;
    const int64_t key0 = cta_lo + static_cast<int64_t>(tile) * kTileKeys;

    // Scores: lane owns keys lane and lane + 32, all rows of the warp.
    float s[kRowsPerWarp][2];
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) s[i][0] = s[i][1] = 0.f;
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      const int j = lane + 32 * kk;
      const T* krow = sk + j * kHeadDim;
#pragma unroll 4
      for (int c = 0; c < Tr::kChunks; ++c) {
        float kf[8];
        unpack8<T>(*reinterpret_cast<const uint4*>(krow + (c ^ (j & 7)) * Tr::kElemsPerChunk), kf);
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) {
          const int r = warp + kDecodeWarps * i;
          if (r < block_rows) {
            const float4 qa = *reinterpret_cast<const float4*>(smem_q + r * kHeadDim + c * 8);
            const float4 qb = *reinterpret_cast<const float4*>(smem_q + r * kHeadDim + c * 8 + 4);
            s[i][kk] += qa.x * kf[0] + qa.y * kf[1] + qa.z * kf[2] + qa.w * kf[3] + qb.x * kf[4] + qb.y * kf[5] +
                        qb.z * kf[6] + qb.w * kf[7];
          }
        }
      }
    }

    // Online softmax per row, then P·V.
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = warp + kDecodeWarps * i;
      if (r >= block_rows) continue;  // warp-uniform
      float x[2];
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        const int64_t key = key0 + lane + 32 * kk;
        float v = s[i][kk];
        if (softcap) v = p.mask.softcap * tanhf(v * inv_cap);
        v -= slope[i] * static_cast<float>(key > row_pos[i] ? key - row_pos[i] : row_pos[i] - key);
        x[kk] = (key >= row_lo[i] && key < row_hi[i]) ? v : -INFINITY;
      }
      const float m_tile = warp_max(fmaxf(x[0], x[1]));
      const float m_new = fmaxf(m[i], m_tile);
      if (m_new == -INFINITY) continue;  // nothing visible yet (warp-uniform)
      const float scale = __expf(m[i] - m_new);  // 0 when m was -inf
      const float p0 = __expf(x[0] - m_new), p1 = __expf(x[1] - m_new);
      l[i] = l[i] * scale + warp_sum(p0 + p1);
      m[i] = m_new;
#pragma unroll
      for (int d = 0; d < Tr::kDimsPerLane; ++d) acc[i][d] *= scale;
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        const float pk = kk == 0 ? p0 : p1;
#pragma unroll 8
        for (int src = 0; src < 32; ++src) {
          const float pj = __shfl_sync(0xffffffffu, pk, src);
          const T* vrow = sv + (src + 32 * kk) * kHeadDim + lane * Tr::kDimsPerLane;
          if constexpr (Tr::kDimsPerLane == 4) {
            const uint2 raw = *reinterpret_cast<const uint2*>(vrow);
            const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
            for (int d = 0; d < 4; ++d) acc[i][d] += pj * to_f(e[d]);
          } else {
            const uint32_t raw = *reinterpret_cast<const uint32_t*>(vrow);
            const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
            for (int d = 0; d < 2; ++d) acc[i][d] += pj * to_f(e[d]);
          }
        }
      }
    }
  }
  cp_async_wait<0>();

  // Store: normalised o and lse (natural log), or fp32 partials into the workspace.
  const int64_t total_rows = static_cast<int64_t>(p.batch) * p.q_len * p.num_heads;
  float* ws_o = static_cast<float*>(p.workspace);
  float* ws_lse = ws_o + static_cast<int64_t>(p.num_splits) * total_rows * kHeadDim;
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = warp + kDecodeWarps * i;
    if (r >= block_rows) continue;
    const int t = (row0 + r) / group, h = kv_head * group + (row0 + r) % group;
    const int64_t token_row = static_cast<int64_t>(b) * p.q_len + t;
    const float inv = l[i] > 0.f ? 1.f / l[i] : 0.f;
    const float lse = l[i] > 0.f ? m[i] + __logf(l[i]) : -INFINITY;
    if (p.num_splits == 1) {
      T* o = static_cast<T*>(p.o) + token_row * p.o_row_stride + static_cast<int64_t>(h) * p.o_head_stride +
             lane * Tr::kDimsPerLane;
#pragma unroll
      for (int d = 0; d < Tr::kDimsPerLane; ++d) o[d] = from_f<T>(acc[i][d] * inv);
      if (p.lse != nullptr && lane == 0) p.lse[token_row * p.num_heads + h] = lse;
    } else {
      const int64_t wrow = static_cast<int64_t>(split) * total_rows + token_row * p.num_heads + h;
      float* o = ws_o + wrow * kHeadDim + lane * Tr::kDimsPerLane;
#pragma unroll
      for (int d = 0; d < Tr::kDimsPerLane; ++d) o[d] = acc[i][d] * inv;
      if (lane == 0) ws_lse[wrow] = lse;
    }
  }
}

// Launches the split kernel for one instance; defined by the instance files.
template <int kHeadDim, typename T>
cudaError_t launch_decode_split(const DecodeParams& p, cudaStream_t stream) {
  using Tr = DecodeTraits<kHeadDim, T>;
  const int group = p.num_heads / p.num_kv_heads;
  const int row_blocks = (p.q_len * group + kRowsPerBlock - 1) / kRowsPerBlock;
  auto kernel = decode_split_kernel<kHeadDim, T>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (err != cudaSuccess) return err;
  const dim3 grid(p.num_splits, p.num_kv_heads * row_blocks, p.batch);
  kernel<<<grid, kDecodeThreads, Tr::kSmemBytes, stream>>>(p, row_blocks);
  return cudaGetLastError();
}

}  // namespace flashserve::cuda
