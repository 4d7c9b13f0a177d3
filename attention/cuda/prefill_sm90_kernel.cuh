// The Hopper varlen prefill kernel (sm_90a): FlashAttention forward with warpgroup MMAs
// (wgmma), templated on head_dim and the storage type; one instance per file
// (prefill_sm90_hd*_*.cu). Same semantics as prefill_kernel.cuh (the mma.sync kernel, which
// Ampere and the cross-check tests use).
//
// One CTA = one (sequence, query head, tile of 128 query rows) with two warpgroups of 64 rows.
// The Q tile is copied once to shared memory; K/V tiles of 128 keys stream through shared
// memory with cp.async from packed rows or pages (page ids a tile ahead), kStages deep, stored
// in the 128-byte swizzled layout wgmma reads (wgmma.cuh). Per tile and warpgroup:
//   S (64×128, fp32, 64 registers a thread) = Q·Kᵀ: head_dim/16 wgmma m64n128k16, both
//     operands from shared memory;
//   logits in base 2 (scale·log2 e folded in), the mask only on tiles crossing a row's range,
//   online softmax on the accumulator fragments (online_softmax.cuh);
//   O (64×head_dim) += P·V: P converted in registers into wgmma's A fragments (the same
//     layout as S's accumulator pairs), V from shared memory as an MN-major operand, 64
//     output columns per wgmma m64n64k16.
// Head_dim 128: one CTA an SM and a software pipeline per warpgroup (S of tile t+1 is issued
// before P(t)·V(t), so the softmax overlaps the P·V wgmmas). Head_dim 64: two CTAs an SM at 128
// registers, one tile at a time (the other CTA fills the gaps). Tiles no row can see are never
// loaded; q tiles run in reverse (causal: longest first). bench/history/prefill.md has each
// version ("prefill v3.0" to "prefill v3.3").
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "attention/cuda/prefill_common.cuh"
#include "attention/cuda/wgmma.cuh"
#include "attention/params.h"

namespace flashserve::cuda {

inline constexpr int kSm90BlockN = 128;  // keys a K/V tile
#ifndef FLASHSERVE_SM90_TWO_CTAS_64  // A/B builds only (bench/history/prefill.md "prefill v3.3")
#define FLASHSERVE_SM90_TWO_CTAS_64 1
#endif
#ifndef FLASHSERVE_SM90_STAGES_128  // A/B builds only (bench/history/prefill.md "prefill v3.1")
#define FLASHSERVE_SM90_STAGES_128 3
#endif

template <int kHeadDim, typename T>
struct PrefillSm90Traits {
  static_assert(kHeadDim == 64 || kHeadDim == 128, "prefill sm90: head_dim 64 or 128");
  static_assert(sizeof(T) == 2, "16-bit storage");
  static constexpr int kChunks = kHeadDim / 8;     // 16-byte chunks a row
  static constexpr int kBlocks = kHeadDim / 64;    // 128-byte column blocks a row
  static constexpr int kKSteps = kHeadDim / 16;    // k-steps of S = Q·Kᵀ
  static constexpr int kThreads = 256;  // two warpgroups
  static constexpr int kBlockM = 128;   // 64 query rows a warpgroup
  // Head_dim 64: two CTAs of two warpgroups an SM (at most 128 registers a thread, so without
  // the software pipeline, whose S and P fragments would not fit): one CTA's softmax, copies
  // and start-up overlap the other's wgmmas; measured 1.27× the pipelined single CTA.
  static constexpr bool kTwoCtas = kHeadDim == 64 && FLASHSERVE_SM90_TWO_CTAS_64;
  static constexpr bool kPipelined = !kTwoCtas;
  static constexpr int kMinBlocks = kTwoCtas ? 2 : 1;
  // At least 3: the copy of tile t+kStages-2 is issued while tile t's stage is still being
  // read (by P(t)·V(t)), so one stage is always busy computing and one filling.
  static constexpr int kStages = kHeadDim == 128 ? FLASHSERVE_SM90_STAGES_128 : (kMinBlocks == 2 ? 3 : 4);
  static_assert(kStages >= 3, "pipeline depth");
  static constexpr int kTileElems = kSm90BlockN * kHeadDim;
  static constexpr int kQElems = kBlockM * kHeadDim;
  static constexpr int kSmemBytes = (kQElems + 2 * kStages * kTileElems) * 2 + 1024;  // + 1024-byte alignment
  // The SM's 228 KB hold kMinBlocks CTAs, each with 1 KB the system reserves.
  static_assert((kSmemBytes + 1024) * kMinBlocks <= 228 * 1024 && kSmemBytes <= 227 * 1024, "shared memory");
};

template <int kHeadDim, typename T>
__global__ void __launch_bounds__(PrefillSm90Traits<kHeadDim, T>::kThreads, PrefillSm90Traits<kHeadDim, T>::kMinBlocks)
    prefill_sm90_kernel(const __grid_constant__ PrefillParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tr = PrefillSm90Traits<kHeadDim, T>;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  T* smem_q = reinterpret_cast<T*>(smem_raw + ((1024 - (raw_addr & 1023)) & 1023));
  T* smem_k = smem_q + Tr::kQElems;
  T* smem_v = smem_k + Tr::kStages * Tr::kTileElems;

  const int m_tile = gridDim.x - 1 - blockIdx.x;  // longest tiles first
  const int h = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, lane = tid % 32;
  const int gid = lane / 4, tig = lane % 4;
  constexpr int elem = 2;
  PrefillCta cta;
  if (!cta.init(p, m_tile, h, b, Tr::kBlockM, kSm90BlockN, elem)) return;
  const int num_tiles = cta.num_tiles;

  KVTileCopier<Tr::kThreads, kSm90BlockN, Tr::kChunks> kv;
  auto load_tile = [&](int tile, int stage) {
    kv.copy(cta.src, cta.cta_lo, cta.cta_hi, tile, smem_k + stage * Tr::kTileElems, smem_v + stage * Tr::kTileElems, tid,
            [](int j, int c) { return sw128_offset<kSm90BlockN>(j, c); });
  };

  // Q tile: rows past q_len are zero.
  {
    const char* q_base =
        static_cast<const char*>(p.q) + ((cta.q0 + cta.row0) * p.q_row_stride + h * p.q_head_stride) * elem;
    for (int i = tid; i < Tr::kBlockM * Tr::kChunks; i += Tr::kThreads) {
      const int r = i / Tr::kChunks, c = i % Tr::kChunks;
      const bool valid = r < cta.block_rows;
      cp_async_16(smem_q + sw128_offset<Tr::kBlockM>(r, c), q_base + (valid ? r * p.q_row_stride * elem : 0) + c * 16,
                  valid);
    }
    cp_async_commit();
  }
#pragma unroll
  for (int s = 0; s < Tr::kStages - 2; ++s) {  // the rest come with next_tile_ready
    kv.fetch_ids(cta.src, cta.cta_lo, cta.cta_hi, num_tiles, s, tid);
    if (s < num_tiles) load_tile(s, s);
    cp_async_commit();
  }
  kv.fetch_ids(cta.src, cta.cta_lo, cta.cta_hi, num_tiles, Tr::kStages - 2, tid);

  // This thread's rows: gid and gid + 8 of its warp's 16 rows of its warpgroup's 64.
  const int wg = tid / 128;
  const int wrow0 = wg * 64 + ((tid / 32) % 4) * 16;
  int row_pos[2], row_lo[2], row_hi[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = wrow0 + gid + 8 * i;
    row_pos[i] = static_cast<int>(cta.pos0 + cta.row0 + r);
    int64_t lo = 0, hi = 0;
    if (r < cta.block_rows) visible_keys(p.mask, cta.pos0 + cta.row0 + r, 0, cta.k_len, &lo, &hi);
    row_lo[i] = static_cast<int>(lo);
    row_hi[i] = static_cast<int>(hi);
  }
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  float o[Tr::kBlocks][32];
#pragma unroll
  for (int c = 0; c < Tr::kBlocks; ++c)
#pragma unroll
    for (int e = 0; e < 32; ++e) o[c][e] = 0.f;
  const LogitArgs la(p.mask, h);
  const T* q_wg = smem_q + wg * 64 * 64;  // this warpgroup's 64 rows in each column block

  // S(t) = Q·K(t)ᵀ over head_dim: k-step ks is 16 columns of column block ks / 4.
  float s[64];
  auto issue_s = [&](int tile) {
    const T* sk = smem_k + (tile % Tr::kStages) * Tr::kTileElems;
#pragma unroll
    for (int ks = 0; ks < Tr::kKSteps; ++ks) {
      const int blk = ks / 4, col = (ks % 4) * 16;
      wgmma_ss<128, T>(s, kmajor_desc(q_wg + blk * Tr::kBlockM * 64 + col),
                       kmajor_desc(sk + blk * kSm90BlockN * 64 + col), ks > 0);
    }
    wgmma_commit();
  };
  // The tile `tile` (and, the first time, Q) has landed for every thread, and every warpgroup
  // has retired its wgmmas on tile - 2 (the stage the copy of tile + kStages - 2 reuses).
  auto next_tile_ready = [&](int tile) {
    cp_async_wait<Tr::kStages - 3>();
    fence_proxy_async();  // the landed copies are visible to wgmma after the barrier
    __syncthreads();
    if (tile + Tr::kStages - 2 < num_tiles)
      load_tile(tile + Tr::kStages - 2, (tile + Tr::kStages - 2) % Tr::kStages);
    cp_async_commit();
    kv.fetch_ids(cta.src, cta.cta_lo, cta.cta_hi, num_tiles, tile + Tr::kStages - 1, tid);
  };

  // Softmax of row i's half of S in place (s becomes P); returns the factor for O's row i.
  auto softmax = [&](int i, int key0, bool masked) {
    return softmax_row<16>([&](int nt, int e) -> float& { return s[4 * nt + 2 * i + e]; }, la, key0, tig, row_pos[i],
                           row_lo[i], row_hi[i], masked, m_run[i], l_run[i]);
  };
  auto rescale_o = [&](int i, float f) {
#pragma unroll
    for (int c = 0; c < Tr::kBlocks; ++c)
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        o[c][4 * n + 2 * i] *= f;
        o[c][4 * n + 2 * i + 1] *= f;
      }
  };
  // P's A fragment for keys 16kk..16kk+15: S's accumulator pairs 2kk and 2kk+1.
  uint32_t pa[8][4];
  auto pack_p = [&] {
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      pa[kk][0] = pack2<T>(s[8 * kk + 0], s[8 * kk + 1]);
      pa[kk][1] = pack2<T>(s[8 * kk + 2], s[8 * kk + 3]);
      pa[kk][2] = pack2<T>(s[8 * kk + 4], s[8 * kk + 5]);
      pa[kk][3] = pack2<T>(s[8 * kk + 6], s[8 * kk + 7]);
    }
  };
  // O += P·V(tile): V as an MN-major operand, one wgmma a k-step over the whole head dim (the
  // column blocks of V are kSm90BlockN rows apart).
  auto issue_pv = [&](int tile) {
    const T* sv = smem_v + (tile % Tr::kStages) * Tr::kTileElems;
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      if constexpr (Tr::kBlocks == 1) {
        wgmma_rs_n64<T>(o[0], pa[kk], mnmajor_desc(sv + kk * 16 * 64));
      } else {
        wgmma_rs<kHeadDim, T>(reinterpret_cast<float(&)[kHeadDim / 2]>(o), pa[kk],
                              mnmajor_desc_blocks(sv + kk * 16 * 64, kSm90BlockN * 128));
      }
    }
    wgmma_commit();
  };

  if constexpr (!Tr::kPipelined) {
    // One tile at a time: S, softmax, then P·V, each waited for.
    for (int tile = 0; tile < num_tiles; ++tile) {
      next_tile_ready(tile);
      wgmma_fence();
      issue_s(tile);
      wgmma_wait<0>();
      const int key0 = static_cast<int>(cta.cta_lo) + tile * kSm90BlockN;
      const bool masked = cta.masked(key0, kSm90BlockN);
#pragma unroll
      for (int i = 0; i < 2; ++i) rescale_o(i, softmax(i, key0, masked));
      pack_p();
      wgmma_fence();
      issue_pv(tile);
      wgmma_wait<0>();
    }
  } else {
    // Software pipeline per warpgroup: while the tensor cores run P(t)·V(t), the warps compute
    // the softmax of S(t+1), which was issued before it.
    if (num_tiles > 0) {
      next_tile_ready(0);
      wgmma_fence();
      issue_s(0);
      wgmma_wait<0>();
    }
    // One tile; `more` (a compile-time constant: the last tile is peeled off) says whether S of
    // the next tile is issued, so that ptxas sees which wgmma group each wait retires.
    auto step = [&](int tile, auto more_c) {
      constexpr bool more = decltype(more_c)::value;
      const int key0 = static_cast<int>(cta.cta_lo) + tile * kSm90BlockN;
      const bool masked = cta.masked(key0, kSm90BlockN);
      float f[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) f[i] = softmax(i, key0, masked);
      wgmma_wait<0>();  // P(t-1)·V(t-1) has retired: O may be rescaled
#pragma unroll
      for (int i = 0; i < 2; ++i) rescale_o(i, f[i]);
      pack_p();
      if constexpr (more) next_tile_ready(tile + 1);
      wgmma_fence();
      if constexpr (more) issue_s(tile + 1);
      issue_pv(tile);
      if constexpr (more) wgmma_wait<1>();  // S(t+1) is in; P(t)·V(t) may still run
    };
    for (int tile = 0; tile + 1 < num_tiles; ++tile) step(tile, std::true_type{});
    if (num_tiles > 0) step(num_tiles - 1, std::false_type{});
  }
  wgmma_wait<0>();
  cp_async_wait<0>();

  // Normalise and store: o in the storage type, lse in natural log.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float lse;
    const float inv = finish_row(m_run[i], l_run[i], &lse);
    const int r = wrow0 + gid + 8 * i;
    if (r >= cta.block_rows) continue;
    const int64_t row = cta.q0 + cta.row0 + r;
    T* out = static_cast<T*>(p.o) + row * p.o_row_stride + static_cast<int64_t>(h) * p.o_head_stride;
#pragma unroll
    for (int c = 0; c < Tr::kBlocks; ++c)
#pragma unroll
      for (int n = 0; n < 8; ++n)
        *reinterpret_cast<uint32_t*>(out + c * 64 + n * 8 + tig * 2) =
            pack2<T>(o[c][4 * n + 2 * i] * inv, o[c][4 * n + 2 * i + 1] * inv);
    if (p.lse != nullptr && tig == 0) p.lse[row * p.num_heads + h] = lse;
  }
#else
  __trap();  // not sm_90a code: the host launches this kernel only where it runs sm_90a code
#endif
}

template <int kHeadDim, typename T>
cudaError_t launch_prefill_sm90(const PrefillParams& p, cudaStream_t stream) {
  using Tr = PrefillSm90Traits<kHeadDim, T>;
  auto kernel = prefill_sm90_kernel<kHeadDim, T>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (err != cudaSuccess) return err;
  const dim3 grid((p.max_seqlen_q + Tr::kBlockM - 1) / Tr::kBlockM, p.num_heads, p.batch);
  kernel<<<grid, Tr::kThreads, Tr::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace flashserve::cuda
