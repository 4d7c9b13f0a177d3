// The CUDA varlen prefill kernel (FlashAttention-2 forward with mma.sync), templated on
// head_dim and the storage type; one instance per file (prefill_hd*_*.cu).
//
// One CTA = one (sequence, query head, tile of kBlockM query rows); 4 warps of one or two m16
// tiles (16 or 32 rows; PrefillTraits says which and why). The Q tile is copied once
// (cp.async) to shared memory and read as mma fragments per k-step pair. K/V tiles of kBlockN
// keys stream through shared memory with cp.async,
// kStages deep, from packed rows or from pages through the block table (block ids fetched one
// tile ahead); 16-byte chunks are XOR-swizzled by row so ldmatrix reads hit 32 banks. Per tile
// and warp: S = Q·Kᵀ (8 n-tiles × head_dim/16 k-steps of mma), logits in base 2 (scale·log2 e
// folded in; softcap and ALiBi applied in natural units first), the mask only on tiles that
// cross a row's visible range, online softmax on the fragments (row max over a quad of lanes),
// then O += P·V with P reused from the S fragments as the A operand and V through
// ldmatrix.trans. Tiles no row of the CTA can see are never loaded (causal, window). The grid
// runs the q tiles in reverse so that the longest ones (causal: the last rows) start first.
// The N×N matrix exists nowhere; per warp, S lives in 32 registers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "attention/cuda/prefill_common.cuh"
#include "attention/params.h"

namespace flashserve::cuda {

inline constexpr int kPrefillThreads = 128;
inline constexpr int kPrefillWarps = kPrefillThreads / 32;
inline constexpr int kPrefillStages = 3;

template <int kHeadDim, typename T>
struct PrefillTraits {
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256, "prefill: head_dim 64, 128 or 256");
  static constexpr int kElemsPerChunk = 16 / sizeof(T);
  static constexpr int kChunks = kHeadDim / kElemsPerChunk;
  static constexpr int kKSteps = kHeadDim / 16;
  static constexpr int kNTiles = kHeadDim / 8;
  // m16 tiles per warp: at head_dim 128 two (32 rows: every K/V fragment serves both, half the
  // shared-memory traffic per MMA; measured 1.3× over one), at head_dim 64 one (two spilled
  // and ran 20% slower: bench/history/prefill.md, "prefill v2 / v2.1"); at 256 (a build
  // option) one, O alone takes 128 registers.
  static constexpr int kMTiles = kHeadDim == 128 ? 2 : 1;
  static constexpr int kBlockM = kPrefillWarps * 16 * kMTiles;
  // Keys per K/V tile: 32 at head_dim 128 keeps S (2 m-tiles × 4 n-tiles) and O (2 × 16) in
  // registers; 64 at head_dim 64; 32 at 256.
  static constexpr int kBlockN = kHeadDim == 64 ? 64 : 32;
  static constexpr int kKeyTiles = kBlockN / 8;
  static constexpr int kTileElems = kBlockN * kHeadDim;
  static constexpr int kSmemQ = kBlockM * kHeadDim * sizeof(T);
  static constexpr int kSmemBytes = kSmemQ + 2 * kPrefillStages * kTileElems * sizeof(T);
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
};

template <int kHeadDim, typename T>
__global__ void __launch_bounds__(kPrefillThreads, 2) prefill_kernel(const __grid_constant__ PrefillParams p) {
  using Tr = PrefillTraits<kHeadDim, T>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* smem_q = reinterpret_cast<T*>(smem_raw);
  T* smem_k = smem_q + Tr::kBlockM * kHeadDim;
  T* smem_v = smem_k + kPrefillStages * Tr::kTileElems;

  const int m_tile = gridDim.x - 1 - blockIdx.x;  // longest tiles first
  const int h = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gid = lane / 4, tig = lane % 4;
  constexpr int elem = sizeof(T);
  PrefillCta cta;
  if (!cta.init(p, m_tile, h, b, Tr::kBlockM, Tr::kBlockN, elem)) return;
  const int num_tiles = cta.num_tiles;

  KVTileCopier<kPrefillThreads, Tr::kBlockN, Tr::kChunks> kv;
  auto load_tile = [&](int tile, int stage) {
    kv.copy(cta.src, cta.cta_lo, cta.cta_hi, tile, smem_k + stage * Tr::kTileElems, smem_v + stage * Tr::kTileElems, tid,
            [](int j, int c) { return swz<kHeadDim, T>(j, c); });
  };

  // Q tile: rows past q_len are zero.
  {
    const char* q_base =
        static_cast<const char*>(p.q) + ((cta.q0 + cta.row0) * p.q_row_stride + h * p.q_head_stride) * elem;
    for (int i = tid; i < Tr::kBlockM * Tr::kChunks; i += kPrefillThreads) {
      const int r = i / Tr::kChunks, c = i % Tr::kChunks;
      const bool valid = r < cta.block_rows;
      cp_async_16(smem_q + swz<kHeadDim, T>(r, c), q_base + (valid ? r * p.q_row_stride * elem : 0) + c * 16, valid);
    }
    cp_async_commit();
  }
#pragma unroll
  for (int s = 0; s < kPrefillStages - 1; ++s) {
    kv.fetch_ids(cta.src, cta.cta_lo, cta.cta_hi, num_tiles, s, tid);
    if (s < num_tiles) load_tile(s, s);
    cp_async_commit();
  }
  kv.fetch_ids(cta.src, cta.cta_lo, cta.cta_hi, num_tiles, kPrefillStages - 1, tid);

  // This lane's rows: gid and gid + 8 of each of the warp's m16 tiles.
  const int wrow0 = warp * 16 * Tr::kMTiles;
  constexpr int kRows = 2 * Tr::kMTiles;  // index j = mt·2 + i  ->  row wrow0 + mt·16 + gid + 8i
  // 32-bit key positions in the hot loop (a sequence holds fewer than 2^31 keys).
  int row_pos[kRows], row_lo[kRows], row_hi[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const int r = wrow0 + (j / 2) * 16 + gid + 8 * (j % 2);
    row_pos[j] = static_cast<int>(cta.pos0 + cta.row0 + r);
    int64_t lo = 0, hi = 0;
    if (r < cta.block_rows) visible_keys(p.mask, cta.pos0 + cta.row0 + r, 0, cta.k_len, &lo, &hi);
    row_lo[j] = static_cast<int>(lo);
    row_hi[j] = static_cast<int>(hi);
  }

  float m_run[kRows], l_run[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    m_run[j] = -INFINITY;
    l_run[j] = 0.f;
  }
  float acc[Tr::kMTiles][Tr::kNTiles][4];
#pragma unroll
  for (int mt = 0; mt < Tr::kMTiles; ++mt)
#pragma unroll
    for (int n = 0; n < Tr::kNTiles; ++n) acc[mt][n][0] = acc[mt][n][1] = acc[mt][n][2] = acc[mt][n][3] = 0.f;
  const LogitArgs la(p.mask, h);

  for (int tile = 0; tile < num_tiles; ++tile) {
    cp_async_wait<kPrefillStages - 2>();
    __syncthreads();  // this tile (and, the first time, Q) has landed; the oldest stage is free
    if (tile + kPrefillStages - 1 < num_tiles)
      load_tile(tile + kPrefillStages - 1, (tile + kPrefillStages - 1) % kPrefillStages);
    cp_async_commit();
    kv.fetch_ids(cta.src, cta.cta_lo, cta.cta_hi, num_tiles, tile + kPrefillStages, tid);

    const int stage = tile % kPrefillStages;
    const T* sk = smem_k + stage * Tr::kTileElems;
    const T* sv = smem_v + stage * Tr::kTileElems;
    const int key0 = static_cast<int>(cta.cta_lo) + tile * Tr::kBlockN;

    // S = Q·Kᵀ. Q fragments come from shared memory per k-step pair; each K fragment serves
    // both m-tiles (half the shared-memory traffic per MMA of one tile a warp).
    float s[Tr::kMTiles][Tr::kKeyTiles][4];
#pragma unroll
    for (int mt = 0; mt < Tr::kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < Tr::kKeyTiles; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < Tr::kKSteps; ks += 2) {
      uint32_t qf[Tr::kMTiles][2][4];
#pragma unroll
      for (int mt = 0; mt < Tr::kMTiles; ++mt)
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
          const int m = lane / 8;
          ldmatrix_x4(qf[mt][kk],
                      smem_q + swz<kHeadDim, T>(wrow0 + mt * 16 + (m & 1) * 8 + lane % 8, (ks + kk) * 2 + (m >> 1)));
        }
#pragma unroll
      for (int nt = 0; nt < Tr::kKeyTiles; ++nt) {
        uint32_t kf[4];
        ldmatrix_x4(kf, sk + swz<kHeadDim, T>(nt * 8 + lane % 8, ks * 2 + lane / 8));
#pragma unroll
        for (int mt = 0; mt < Tr::kMTiles; ++mt) {
          mma_16816<T>(s[mt][nt], qf[mt][0], kf[0], kf[1]);
          mma_16816<T>(s[mt][nt], qf[mt][1], kf[2], kf[3]);
        }
      }
    }

    // Logits in base 2, online softmax; the mask only where a row's range ends inside this tile.
    const bool masked = cta.masked(key0, Tr::kBlockN);
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int mt = j / 2, i = j % 2;
      const float f = softmax_row<Tr::kKeyTiles>([&](int nt, int e) -> float& { return s[mt][nt][2 * i + e]; }, la,
                                                 key0, tig, row_pos[j], row_lo[j], row_hi[j], masked, m_run[j],
                                                 l_run[j]);
#pragma unroll
      for (int n = 0; n < Tr::kNTiles; ++n) {
        acc[mt][n][2 * i] *= f;
        acc[mt][n][2 * i + 1] *= f;
      }
    }

    // O += P·V, 16 keys (two S n-tiles) per k-step; each V fragment serves both m-tiles.
#pragma unroll
    for (int kk = 0; kk < Tr::kBlockN / 16; ++kk) {
      uint32_t pa[Tr::kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < Tr::kMTiles; ++mt) {
        pa[mt][0] = pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pa[mt][1] = pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pa[mt][2] = pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pa[mt][3] = pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int n = 0; n < Tr::kNTiles; n += 2) {
        uint32_t vf[4];
        const int m = lane / 8;
        ldmatrix_x4_trans(vf, sv + swz<kHeadDim, T>(kk * 16 + (m & 1) * 8 + lane % 8, n + (m >> 1)));
#pragma unroll
        for (int mt = 0; mt < Tr::kMTiles; ++mt) {
          mma_16816<T>(acc[mt][n], pa[mt], vf[0], vf[1]);
          mma_16816<T>(acc[mt][n + 1], pa[mt], vf[2], vf[3]);
        }
      }
    }
  }
  cp_async_wait<0>();

  // Normalise and store this warp's rows: o in the storage type, lse in natural log.
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const int mt = j / 2, i = j % 2;
    float lse;
    const float inv = finish_row(m_run[j], l_run[j], &lse);
    const int r = wrow0 + mt * 16 + gid + 8 * i;
    if (r >= cta.block_rows) continue;
    const int64_t row = cta.q0 + cta.row0 + r;
    T* o = static_cast<T*>(p.o) + row * p.o_row_stride + static_cast<int64_t>(h) * p.o_head_stride;
#pragma unroll
    for (int n = 0; n < Tr::kNTiles; ++n) {
      const uint32_t v = pack2<T>(acc[mt][n][2 * i] * inv, acc[mt][n][2 * i + 1] * inv);
      *reinterpret_cast<uint32_t*>(o + n * 8 + tig * 2) = v;
    }
    if (p.lse != nullptr && tig == 0) p.lse[row * p.num_heads + h] = lse;
  }
}

template <int kHeadDim, typename T>
cudaError_t launch_prefill(const PrefillParams& p, cudaStream_t stream) {
  using Tr = PrefillTraits<kHeadDim, T>;
  auto kernel = prefill_kernel<kHeadDim, T>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (err != cudaSuccess) return err;
  const dim3 grid((p.max_seqlen_q + Tr::kBlockM - 1) / Tr::kBlockM, p.num_heads, p.batch);
  kernel<<<grid, kPrefillThreads, Tr::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace flashserve::cuda
