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
//
// FP8 pages (issue 25; kFp8, T = __half, the MMAs' type): the stages hold the pages' codes (one
// byte an element, half the bytes of a 16-bit tile), and after each tile lands the 128 threads
// convert it once, exactly, into one fp16 K and V tile in shared memory (fp8_tile_to_half), from
// where the 16-bit code below reads it unchanged: converted in registers instead, each of the 4
// warps would convert every K/V fragment of the tile for itself (the decode kernel's way, where
// each warp owns distinct keys). q (bf16 or fp16: p.dtype, read at run time) is converted once
// into fp16 scaled by a power of two into fp16's range; K's scale and that power fold into the
// logits' scale, V's scale multiplies the output, which is stored in p.dtype. One instance a
// head dim serves bf16 and fp16 calls over e4m3 and e5m2 pages (prefill_hd*_fp8.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "attention/cuda/fp8_convert.cuh"
#include "attention/cuda/prefill_common.cuh"
#include "attention/params.h"

namespace flashserve::cuda {

inline constexpr int kPrefillThreads = 128;
inline constexpr int kPrefillWarps = kPrefillThreads / 32;
inline constexpr int kPrefillStages = 3;

template <int kHeadDim, typename T, bool kFp8 = false>
struct PrefillTraits {
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256, "prefill: head_dim 64, 128 or 256");
  static_assert(!kFp8 || (std::is_same_v<T, __half> && kHeadDim != 256), "FP8 pages: fp16 MMAs, head_dim 64 or 128");
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
  // The stages' element: FP8 codes or T; FP8 adds the converted fp16 K and V tiles and the
  // warps' max |q| (16 bytes). d 128: 32 + 24 + 16 KB (16-bit pages: 32 + 48).
  static constexpr int kKvElem = kFp8 ? 1 : static_cast<int>(sizeof(T));
  static constexpr int kKvChunks = kHeadDim * kKvElem / 16;  // 16-byte chunks a key row of a stage
  static constexpr int kSmemStages = 2 * kPrefillStages * kTileElems * kKvElem;
  static constexpr int kSmemBytes =
      kSmemQ + kSmemStages + (kFp8 ? 2 * kTileElems * static_cast<int>(sizeof(__half)) + kPrefillWarps * 4 : 0);
  static_assert(!kFp8 || kPrefillWarps == 4, "the FP8 q max reads four warps' maxima");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
};

// An FP8 tile of a stage as fp16 (fp8_tile_to_half), by the pages' format.
template <int kHeadDim, int kKeys>
__device__ __forceinline__ void prefill_fp8_tile(const uint8_t* src, __half* dst, bool e5m2, int tid) {
  if (e5m2) {
    fp8_tile_to_half<kHeadDim, kKeys, kPrefillThreads, __nv_fp8_e5m2>(src, dst, tid);
  } else {
    fp8_tile_to_half<kHeadDim, kKeys, kPrefillThreads, __nv_fp8_e4m3>(src, dst, tid);
  }
}

template <int kHeadDim, typename T, bool kFp8 = false>
__global__ void __launch_bounds__(kPrefillThreads, 2) prefill_kernel(const __grid_constant__ PrefillParams p) {
  using Tr = PrefillTraits<kHeadDim, T, kFp8>;
  using KV = std::conditional_t<kFp8, uint8_t, T>;  // the stages' element
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* smem_q = reinterpret_cast<T*>(smem_raw);
  KV* smem_k = reinterpret_cast<KV*>(smem_raw + Tr::kSmemQ);
  KV* smem_v = smem_k + kPrefillStages * Tr::kTileElems;
  T* tile_k = reinterpret_cast<T*>(smem_raw + Tr::kSmemQ + Tr::kSmemStages);  // FP8: the tile in fp16
  T* tile_v = tile_k + Tr::kTileElems;

  const int m_tile = gridDim.x - 1 - blockIdx.x;  // longest tiles first
  const int h = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gid = lane / 4, tig = lane % 4;
  constexpr int elem = sizeof(T);  // q and o: 2 bytes (FP8 pages: bf16 or fp16)
  PrefillCta cta;
  if (!cta.init(p, m_tile, h, b, Tr::kBlockM, Tr::kBlockN, Tr::kKvElem)) return;
  const int num_tiles = cta.num_tiles;

  KVTileCopier<kPrefillThreads, Tr::kBlockN, Tr::kKvChunks> kv;
  auto load_tile = [&](int tile, int stage) {
    kv.copy(cta.src, cta.cta_lo, cta.cta_hi, tile, smem_k + stage * Tr::kTileElems, smem_v + stage * Tr::kTileElems, tid,
            [](int j, int c) {
              if constexpr (kFp8) {
                return swz_fp8<kHeadDim>(j, c);
              } else {
                return swz<kHeadDim, T>(j, c);
              }
            });
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
  LogitArgs la(p.mask, h);
  float v_mul = 1.f;  // FP8: the values' scale on the output
  if constexpr (kFp8) {
    // q·2^e in fp16, e such that the tile's max |q| · 2^e < 2^15 (fp16's max is 65504; 2^e is
    // exact and comes off the logits' scale): every thread converts the chunks it read.
    // Q's group, the first, has landed: the prologue commits exactly kPrefillStages - 1 groups
    // after it, empty ones too.
    cp_async_wait<kPrefillStages - 1>();
    __syncthreads();
    const bool bf16 = p.dtype == DType::kBFloat16;
    float mx = 0.f;
    for (int i = tid; i < Tr::kBlockM * Tr::kChunks; i += kPrefillThreads) {
      float f[8];
      chunk_to_float(reinterpret_cast<const uint4*>(smem_q)[i], bf16, f);
#pragma unroll
      for (int j = 0; j < 8; ++j) mx = fmaxf(mx, fabsf(f[j]));
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float* warp_max = reinterpret_cast<float*>(tile_v + Tr::kTileElems);
    if (lane == 0) warp_max[warp] = mx;
    __syncthreads();
    mx = fmaxf(fmaxf(warp_max[0], warp_max[1]), fmaxf(warp_max[2], warp_max[3]));
    float q_mul = 1.f;
    // At most 2^64 up: q below 2^-50 everywhere keeps the fold a normal float.
    if (mx > 0.f && isfinite(mx)) q_mul = ldexpf(1.f, min(64, 14 - ilogbf(mx)));
    for (int i = tid; i < Tr::kBlockM * Tr::kChunks; i += kPrefillThreads) {
      float f[8];
      chunk_to_float(reinterpret_cast<const uint4*>(smem_q)[i], bf16, f);
      reinterpret_cast<uint4*>(smem_q)[i] =
          make_uint4(pack2<__half>(f[0] * q_mul, f[1] * q_mul), pack2<__half>(f[2] * q_mul, f[3] * q_mul),
                     pack2<__half>(f[4] * q_mul, f[5] * q_mul), pack2<__half>(f[6] * q_mul, f[7] * q_mul));
    }
    // (The main loop's first barrier orders these writes before any warp's fragment loads.)
    const int kv_head = h / (p.num_heads / p.num_kv_heads);
    const float fold = p.pages.k_scales[kv_head] / q_mul;  // logits = scale · k_scale · (q·2^e)·code / 2^e
    la.scale *= fold;
    la.scale2 *= fold;
    v_mul = p.pages.v_scales[kv_head];
  }
  const bool e5m2 = kFp8 && p.pages.dtype == DType::kFp8E5M2;

  for (int tile = 0; tile < num_tiles; ++tile) {
    cp_async_wait<kPrefillStages - 2>();
    __syncthreads();  // this tile (and, the first time, Q) has landed; the oldest stage is free
    if (tile + kPrefillStages - 1 < num_tiles)
      load_tile(tile + kPrefillStages - 1, (tile + kPrefillStages - 1) % kPrefillStages);
    cp_async_commit();
    kv.fetch_ids(cta.src, cta.cta_lo, cta.cta_hi, num_tiles, tile + kPrefillStages, tid);

    const int stage = tile % kPrefillStages;
    const T* sk;
    const T* sv;
    if constexpr (kFp8) {
      // The tile in fp16: the last tile's readers are past this loop's first barrier.
      prefill_fp8_tile<kHeadDim, Tr::kBlockN>(smem_k + stage * Tr::kTileElems, tile_k, e5m2, tid);
      prefill_fp8_tile<kHeadDim, Tr::kBlockN>(smem_v + stage * Tr::kTileElems, tile_v, e5m2, tid);
      __syncthreads();
      sk = tile_k;
      sv = tile_v;
    } else {
      sk = smem_k + stage * Tr::kTileElems;
      sv = smem_v + stage * Tr::kTileElems;
    }
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

  // Normalise and store this warp's rows: o in the storage type (FP8 pages: the call's, p.dtype),
  // lse in natural log.
  auto store = [&](auto out_type) {
    using O = decltype(out_type);
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int mt = j / 2, i = j % 2;
      float lse;
      const float inv = finish_row(m_run[j], l_run[j], &lse) * v_mul;
      const int r = wrow0 + mt * 16 + gid + 8 * i;
      if (r >= cta.block_rows) continue;
      const int64_t row = cta.q0 + cta.row0 + r;
      O* o = static_cast<O*>(p.o) + row * p.o_row_stride + static_cast<int64_t>(h) * p.o_head_stride;
#pragma unroll
      for (int n = 0; n < Tr::kNTiles; ++n) {
        const uint32_t v = pack2<O>(acc[mt][n][2 * i] * inv, acc[mt][n][2 * i + 1] * inv);
        *reinterpret_cast<uint32_t*>(o + n * 8 + tig * 2) = v;
      }
      if (p.lse != nullptr && tig == 0) p.lse[row * p.num_heads + h] = lse;
    }
  };
  if constexpr (kFp8) {
    if (p.dtype == DType::kBFloat16) {
      store(__nv_bfloat16{});
    } else {
      store(__half{});
    }
  } else {
    store(T{});
  }
}

template <int kHeadDim, typename T, bool kFp8 = false>
cudaError_t launch_prefill(const PrefillParams& p, cudaStream_t stream) {
  using Tr = PrefillTraits<kHeadDim, T, kFp8>;
  auto kernel = prefill_kernel<kHeadDim, T, kFp8>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (err != cudaSuccess) return err;
  const dim3 grid((p.max_seqlen_q + Tr::kBlockM - 1) / Tr::kBlockM, p.num_heads, p.batch);
  kernel<<<grid, kPrefillThreads, Tr::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace flashserve::cuda
