// The CUDA split-K decode kernel (Flash-Decoding over pages), templated on head_dim and the
// storage type; each instance is compiled in a file of its own (decode_hd*_*.cu).
//
// One CTA = one work item (sequence b, kv head, split, row block). Its rows are the query
// rows of the GQA group for all q_len new tokens (row = token·group + g), kRowsPerBlock = 16
// per CTA: exactly the M of one tensor-core mma (m16n8k16), so a GQA group is one MMA tile and
// each K/V byte is read once per group. Larger groups × q_len use more row blocks; an even
// number of them is launched in clusters of two (sm_90), so that a pair's second reads hit L2.
//
// K/V tiles of kTileKeys keys stream through shared memory with cp.async (16-byte chunks,
// coalesced: 16 consecutive threads copy one key's 256 bytes at head_dim 128), kStages deep,
// straight from the pages through the block table; slots past the range are zero-filled. The
// copies are evict-first in L2: the K/V stream passes, the lengths, tables and queries stay.
// Tiles are stored with 16-byte chunks XOR-swizzled by row, so ldmatrix's 8 row reads hit 32
// banks. Each of the 4 warps takes 16 keys of every tile: S = Q·Kᵀ with mma.sync (Q fragments
// held in registers for the whole split), logits/mask/online softmax on the fragments
// (base 2 with the scale folded into the exponent, as in online_softmax.cuh; row max over a
// quad of lanes), then O += P·V with
// P reused from the S fragments as the A operand (FlashAttention-2's register trick) and V
// through ldmatrix.trans. At the end the 4 warps' states merge through shared memory. With one
// split the CTA writes o in the storage type; otherwise fp32 partial o and lse into the
// workspace for merge_states.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "attention/cuda/device_utils.cuh"
#include "attention/cuda/fp8_convert.cuh"
#include "attention/cuda/kv_tile_copier.cuh"
#include "attention/cuda/online_softmax.cuh"
#include "decode/params.h"

// Bench-only probes (ablations that compute wrong results on purpose, per-CTA trace stamps) hook
// in at the FS_DECODE_* points of the kernel below; they live in decode_experiments.cuh, compiled
// in only by the CMake option FLASHSERVE_DECODE_EXPERIMENTS (default OFF). Everywhere else each
// hook is the plain step: nothing is skipped, nothing stamped.
#ifdef FLASHSERVE_DECODE_EXPERIMENTS
#include "decode/cuda/decode_experiments.cuh"
#else
#define FS_DECODE_SKIPS(...) false
#define FS_DECODE_STAMP(var)
#define FS_DECODE_STAMP_LATER(var)
#define FS_DECODE_STAMP_IF(var, cond)
#define FS_DECODE_STAMPS_OUT(...)
#endif

namespace flashserve::cuda {

inline constexpr int kDecodeThreads = 128;
inline constexpr int kDecodeWarps = kDecodeThreads / 32;
inline constexpr int kRowsPerBlock = kDecodeRowsPerCta;  // query rows per CTA (decode/params.h)
static_assert(kRowsPerBlock == 16, "a CTA's rows are one m16n8k16 tile");
inline constexpr int kTileKeys = 64;
// Stages and CTAs per SM: 3 stages × 32 KB (head_dim 128, bf16) and 2 CTAs per SM measured
// best; the K/V copies' evict-first L2 policy measured better (v4.1). The macros exist for A/B
// builds (bench/history/decode.md: "decode v2.4 experiment", "decode v4.1"), not for users.
#ifndef FLASHSERVE_DECODE_STAGES
#define FLASHSERVE_DECODE_STAGES 3
#endif
#ifndef FLASHSERVE_DECODE_MIN_BLOCKS
#define FLASHSERVE_DECODE_MIN_BLOCKS 2
#endif
inline constexpr int kStages = FLASHSERVE_DECODE_STAGES;
// FP8 pages' stages and CTAs an SM (A/B builds, session 25: short splits pay a CTA's fixed
// cost at half the bytes of a 16-bit one, so more CTAs an SM may hide it): by default the bytes
// in flight of the 16-bit kernel (2·stages - 1 tiles of half the size) at its CTAs an SM.
#ifndef FLASHSERVE_DECODE_FP8_STAGES
#define FLASHSERVE_DECODE_FP8_STAGES (2 * FLASHSERVE_DECODE_STAGES - 1)
#endif
#ifndef FLASHSERVE_DECODE_FP8_MIN_BLOCKS
#define FLASHSERVE_DECODE_FP8_MIN_BLOCKS FLASHSERVE_DECODE_MIN_BLOCKS
#endif
#ifndef FLASHSERVE_DECODE_KV_EVICT_FIRST
#define FLASHSERVE_DECODE_KV_EVICT_FIRST 1
#endif
// Tiles of K/V that the first wave's CTAs prefetch into L2 before griddepcontrol.wait (v4.4,
// first_tiles_piece), at most: no more than a quarter of a split, and at least one tile
// ((1,4k), 4-tile splits: +7% with 1 tile, -1% with 2, -3% with 3; 3 the best on every longer
// row measured); 0: none (v4.3).
#ifndef FLASHSERVE_DECODE_PREFETCH_TILES
#define FLASHSERVE_DECODE_PREFETCH_TILES 3
#endif

// FP8 pages (issue 25): KV is __nv_fp8_e4m3 or __nv_fp8_e5m2 (the pages' codes), T the call's
// type (q, o). The tiles hold codes, 16 a 16-byte chunk; the MMAs run in fp16 (an FP8 code is
// exactly an fp16 value, e4m3 and e5m2 alike): K and V fragments converted in registers, q
// converted once scaled by a power of two into fp16's range, P packed as fp16. K's scale and that
// power of two fold into the logits' scale, V's scale multiplies the output.
template <typename T, typename KV>
inline constexpr bool kFp8Pages = !std::is_same_v<T, KV>;

// The floats of decode_finish's scratch: each warp's kRowsPerBlock o rows (kHeadDim + 8 of
// padding) and their m and l.
template <int kHeadDim>
inline constexpr int kDecodeFinishFloats = kDecodeWarps * kRowsPerBlock * (kHeadDim + 8 + 2);

template <int kHeadDim, typename T, typename KV = T>
struct DecodeTraits {
  static_assert(kHeadDim == 64 || kHeadDim == 128, "decode: head_dim 64 or 128");
  static constexpr bool kFp8 = kFp8Pages<T, KV>;
  static_assert(!kFp8 || sizeof(KV) == 1, "FP8 pages: one byte an element");
  static constexpr int kElemsPerChunk = 16 / sizeof(T);           // q: 8
  static constexpr int kChunks = kHeadDim / kElemsPerChunk;       // q: 16-byte chunks per row
  static constexpr int kKvChunks = kHeadDim * sizeof(KV) / 16;    // 16-byte chunks per key row
  // FP8: a tile is half the bytes, so twice the tiles stay in flight for the same bytes (3 stages
  // of 16-bit tiles keep 2 in flight, 5 of FP8 ones 4).
  static constexpr int kStages = kFp8 ? FLASHSERVE_DECODE_FP8_STAGES : ::flashserve::cuda::kStages;
  static constexpr int kMinBlocks = kFp8 ? FLASHSERVE_DECODE_FP8_MIN_BLOCKS : FLASHSERVE_DECODE_MIN_BLOCKS;
  static constexpr int kTileElems = kTileKeys * kHeadDim;         // one K (or V) tile
  static constexpr int kSmemKV = 2 * kStages * kTileElems * sizeof(KV);
  static constexpr int kSmemQ = kRowsPerBlock * kHeadDim * sizeof(T);
  static constexpr int kSmemBytes = kSmemKV + kSmemQ + (kFp8 ? 16 : 0);  // FP8: the warps' max |q|
  // The end-of-CTA merge of the warps' states reuses the K/V stages.
  static_assert(kDecodeFinishFloats<kHeadDim> * 4 <= kSmemKV, "merge scratch");
  static_assert(kChunks >= 8, "the q swizzle needs 8 chunks per row");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
};

// This thread's piece of the first tiles (FLASHSERVE_DECODE_PREFETCH_TILES) of K/V of the item at
// linear index cta (split + splits · (y + ys · b), y = kv head · row blocks + row block: the
// kernel's launch index, blockIdx.x + gridDim.x · (blockIdx.y + gridDim.y · blockIdx.z)), for
// the length and the block table as they read now (L2 loads, no L1 line): bytes from addr, to
// prefetch into L2 (0 bytes: none). Only for a prefetch: a stale length or page id (a previous
// kernel may still be appending) costs bandwidth, never a value. One piece a thread: a page's
// keys of K or V when a page's keys are contiguous, else one key of K or V; the range's first 64
// pages (all of them from block size 4 on) or keys (one tile). Consecutive pieces go to
// different warps: the bulk prefetch takes uniform operands, so a warp issues its lanes' one
// after another, and 24 pieces (3 tiles of 16-key pages) in one warp made a 24-step loop.
template <int kHeadDim, typename T>
__device__ __forceinline__ void first_tiles_piece(const DecodeParams& p, int cta, unsigned splits, unsigned ys, int tid,
                                                  const char*& addr, uint32_t& bytes) {
  // The CTA's coordinates from an opaque index: the front end then cannot merge this view of the
  // pages with the kernel's own (src), whose values the main loop holds, and keep them live
  // (ptxas sees through the empty asm, but the build measured 204 registers with it, 212-216
  // without).
  asm volatile("" : "+r"(cta), "+r"(tid));
  const int row_blocks = ys / p.num_kv_heads;
  const int split = cta % splits;
  const int b = cta / (splits * ys);
  const int kv_head = (cta / splits) % ys / row_blocks;
  const KVPageView& pv = p.pages;
  KVSource pf;
  pf.init_paged(pv, b, kv_head, sizeof(T));
  constexpr int kPrefetchKeys = FLASHSERVE_DECODE_PREFETCH_TILES * kTileKeys;
  const int64_t split_keys = static_cast<int64_t>(p.pages_per_split) * pv.block_size;
  const int64_t capacity = pv.block_table_stride * pv.block_size;
  const int lo = static_cast<int>(min(capacity, split * split_keys));
  const int64_t keys = min(static_cast<int64_t>(kPrefetchKeys), max(static_cast<int64_t>(kTileKeys), split_keys / 4));
  const int spec_hi = static_cast<int>(min(min(capacity, (split + 1) * split_keys), lo + keys));
  constexpr uint32_t kRowBytes = kHeadDim * sizeof(T);
  const bool by_page = pf.token_bytes == kRowBytes;
  const int piece = (tid % 32) * kDecodeWarps + tid / 32;  // warp w: pieces w, w + 4, ...
  const int i = piece / 2;  // page (by_page) or key of the range; K for even pieces, V for odd
  const int64_t page0 = lo >> pf.block_shift;
  const int first = by_page ? static_cast<int>(max(static_cast<int64_t>(lo), (page0 + i) << pf.block_shift)) : lo + i;
  // The length and the page id, two loads in flight together.
  const bool live = first < spec_hi;
  const int len_now = __ldcg(pv.seq_lens + b);
  const uint32_t id = live ? static_cast<uint32_t>(__ldcg(pf.table + (first >> pf.block_shift))) : ~0u;
  const int hi = min(spec_hi, max(len_now, 0));
  const int last = by_page ? static_cast<int>(min(static_cast<int64_t>(hi), (page0 + i + 1) << pf.block_shift))
                           : min(hi, first + 1);
  bytes = 0;
  addr = pf.k_base;
  if (live && first < last && id < static_cast<uint32_t>(pf.num_blocks)) {
    addr = (piece % 2 ? pf.v_base : pf.k_base) + static_cast<uint64_t>(id) * pf.block_bytes +
           static_cast<uint32_t>(first & pf.block_mask) * pf.token_bytes;
    bytes = static_cast<uint32_t>(last - first) * kRowBytes;
  }
}

// Whether q's rows and heads are 16-byte aligned (16-byte copies of its chunks), and chunk c (of
// 16 bytes) of the item's query row `row` (token row / group, head kv_head · group + row % group).
template <typename T>
__device__ __forceinline__ bool decode_q_vec(const DecodeParams& p) {
  return ((reinterpret_cast<uintptr_t>(p.q) | static_cast<uintptr_t>(p.q_row_stride * sizeof(T)) |
           static_cast<uintptr_t>(p.q_head_stride * sizeof(T))) & 15) == 0;
}
template <typename T>
__device__ __forceinline__ const T* decode_q_chunk(const DecodeParams& p, int b, int kv_head, int group, int row, int c) {
  const int t = row / group, h = kv_head * group + row % group;
  return static_cast<const T*>(p.q) + (static_cast<int64_t>(b) * p.q_len + t) * p.q_row_stride +
         static_cast<int64_t>(h) * p.q_head_stride + c * static_cast<int>(16 / sizeof(T));
}

// Tile `tile` of keys lo .. hi from src into a stage (sk, sv), swizzled for ldmatrix (swz for
// 16-bit pages, swz_fp8 for FP8 codes), with kv's page ids (fetched a tile ahead). 16-bit pages'
// copies carry the L2 policy (evict-first; FLASHSERVE_DECODE_KV_EVICT_FIRST); FP8 pages' do not:
// with the hint, ptxas (CUDA 13.0) gave them cp.async copies whose cache-policy descriptor and
// shared-memory base come from uniform registers nothing writes (UR1, UR0): an illegal
// instruction on the H200 (session 24). Without, none.
template <int kHeadDim, typename T, typename KV, typename Copier>
__device__ __forceinline__ void decode_copy_tile(const Copier& kv, const KVSource& src, int lo, int hi, int tile, KV* sk,
                                                 KV* sv, int tid, uint64_t policy) {
  constexpr bool kFp8 = DecodeTraits<kHeadDim, T, KV>::kFp8;
  kv.template copy<FLASHSERVE_DECODE_KV_EVICT_FIRST != 0 && !kFp8>(
      src, lo, hi, tile, sk, sv, tid,
      [](int j, int c) {
        if constexpr (kFp8) {
          return swz_fp8<kHeadDim>(j, c);
        } else {
          return swz<kHeadDim, T>(j, c);
        }
      },
      policy);
}

// An item's keys: its split's range of the sequence (the length capped by the table's capacity),
// the union of its rows' visible ranges (lo .. hi: num_tiles tiles from lo) and their
// intersection (lo_max .. hi_min: tiles inside it need no mask). Rows of one token share its
// range: a pass per token of the block (one when q_len is 1).
struct DecodeItemKeys {
  int64_t seq_len, k_begin, k_end, lo_max, hi_min;
  int lo, hi, num_tiles;
};
__device__ __forceinline__ DecodeItemKeys decode_item_keys(const DecodeParams& p, int seq_len_raw, int split, int row0,
                                                           int block_rows, int group) {
  const KVPageView& pv = p.pages;
  const int64_t capacity = pv.block_table_stride * pv.block_size;
  const int64_t split_keys = static_cast<int64_t>(p.pages_per_split) * pv.block_size;
  DecodeItemKeys k;
  k.seq_len = min(static_cast<int64_t>(seq_len_raw), capacity);  // never past the table
  k.k_begin = min(k.seq_len, split * split_keys);
  k.k_end = min(k.seq_len, (split + 1) * split_keys);
  int64_t cta_lo = k.k_end, cta_hi = k.k_begin;
  k.lo_max = k.k_begin;
  k.hi_min = k.k_end;
  const int t_last = (row0 + block_rows - 1) / group;
#pragma unroll 1
  for (int t = row0 / group; t <= t_last; ++t) {
    int64_t lo, hi;
    visible_keys(p.mask, k.seq_len - p.q_len + t, k.k_begin, k.k_end, &lo, &hi);
    k.lo_max = max(k.lo_max, lo);
    k.hi_min = min(k.hi_min, hi);
    if (lo < hi) {
      cta_lo = min(cta_lo, lo);
      cta_hi = max(cta_hi, hi);
    }
  }
  k.lo = static_cast<int>(cta_lo);  // a sequence has < 2^31 keys
  k.hi = static_cast<int>(cta_hi);
  k.num_tiles = k.hi > k.lo ? (k.hi - k.lo + kTileKeys - 1) / kTileKeys : 0;
  return k;
}

// The lane's two fragment rows (gid, gid + 8) of an item: positions, visible ranges (a padding
// row sees nothing) and logit constants (ALiBi slopes differ by head).
__device__ __forceinline__ void decode_lane_rows(const DecodeParams& p, const DecodeItemKeys& keys, int kv_head,
                                                 int group, int row0, int block_rows, int gid, LogitArgs (&la)[2],
                                                 int (&row_pos)[2], int (&row_lo)[2], int (&row_hi)[2]) {
  la[0] = LogitArgs(p.mask, kv_head * group + (row0 + min(gid, block_rows - 1)) % group);
  la[1] = LogitArgs(p.mask, kv_head * group + (row0 + min(gid + 8, block_rows - 1)) % group);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = gid + 8 * i;
    row_pos[i] = static_cast<int>(keys.seq_len - p.q_len + (row0 + r) / group);
    int64_t r_lo = 0, r_hi = 0;  // padding row: sees nothing
    if (r < block_rows) visible_keys(p.mask, row_pos[i], keys.k_begin, keys.k_end, &r_lo, &r_hi);
    row_lo[i] = static_cast<int>(r_lo);
    row_hi[i] = static_cast<int>(r_hi);
  }
}

// q's fragments (the A operand of every k-step, held for the whole item) from the swizzled q tile
// in shared memory (written, and visible to every thread). FP8 pages: fp16 fragments of q·2^e
// with the block's max |q| · 2^e < 2^15 (fp16's max is 65504; 2^e is exact and comes off the
// logits' scale, la, with K's scale folded in): the max over the tile takes a barrier and the 16
// bytes after q in shared memory. A key's FP8 chunk of 16 dims is a k-step; ldmatrix gives lane
// (gid, tig) dims 4·tig .. 4·tig + 3 of it (decode_tile), which take the k positions 2·tig,
// 2·tig + 1 (b0) and 2·tig + 8, 2·tig + 9 (b1): q's fragments take the same dims at the same
// positions.
template <int kHeadDim, typename T, typename KV>
__device__ __forceinline__ void decode_q_fragments(const DecodeParams& p, T* smem_q, int kv_head, int tid, int warp,
                                                   int lane, uint32_t (&qf)[kHeadDim / 16][4], LogitArgs (&la)[2]) {
  using Tr = DecodeTraits<kHeadDim, T, KV>;
  constexpr int kKSteps = kHeadDim / 16;
  const int gid = lane / 4, tig = lane % 4;
  if constexpr (!Tr::kFp8) {
    (void)p, (void)kv_head, (void)tid, (void)warp, (void)gid, (void)tig, (void)la;
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      const int m = lane / 8;  // matrix: 0 rows 0-7 lo, 1 rows 8-15 lo, 2 rows 0-7 hi, 3 rows 8-15 hi
      ldmatrix_x4(qf[ks], smem_q + swz<kHeadDim, T>((m & 1) * 8 + lane % 8, ks * 2 + (m >> 1)));
    }
  } else {
    float mx = 0.f;
    for (int i = tid; i < kRowsPerBlock * Tr::kChunks; i += kDecodeThreads) {  // every chunk once
      const uint4 v = *reinterpret_cast<const uint4*>(smem_q + i * Tr::kElemsPerChunk);
      const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
      for (int j = 0; j < Tr::kElemsPerChunk; ++j) mx = fmaxf(mx, fabsf(static_cast<float>(e[j])));
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float* warp_max = reinterpret_cast<float*>(smem_q + kRowsPerBlock * kHeadDim);  // 16 bytes after q
    if (lane == 0) warp_max[warp] = mx;
    __syncthreads();
    mx = fmaxf(fmaxf(warp_max[0], warp_max[1]), fmaxf(warp_max[2], warp_max[3]));
    float q_mul = 1.f;
    // At most 2^64 up: q below 2^-50 everywhere keeps fold (below) a normal float.
    if (mx > 0.f && isfinite(mx)) q_mul = ldexpf(1.f, min(64, 14 - ilogbf(mx)));
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {  // rows gid, gid + 8
        const int d = 16 * ks + 4 * tig;  // dims d .. d + 3
        const uint2 raw = *reinterpret_cast<const uint2*>(smem_q + swz<kHeadDim, T>(gid + 8 * i, d / 8) + d % 8);
        const T* e = reinterpret_cast<const T*>(&raw);
        qf[ks][i] = pack2<__half>(static_cast<float>(e[0]) * q_mul, static_cast<float>(e[1]) * q_mul);
        qf[ks][2 + i] = pack2<__half>(static_cast<float>(e[2]) * q_mul, static_cast<float>(e[3]) * q_mul);
      }
    }
    const float fold = p.pages.k_scales[kv_head] / q_mul;  // logits = scale · k_scale · (q·2^e)·code / 2^e
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      la[i].scale *= fold;
      la[i].scale2 *= fold;
    }
  }
}

// One tile of kTileKeys keys for a CTA's 16 query rows (this warp's kWarpKeys of them, keys key0
// ..): S = Q·Kᵀ, the logits, mask and online softmax, then O += P·V. sk, sv: the tile's stage;
// qf: q's fragments; la, row_pos, row_lo, row_hi: the lane's two rows (gid, gid + 8); lo_max ..
// hi_min: the keys every row sees (tiles inside need no mask).
template <int kHeadDim, typename T, typename KV>
__device__ __forceinline__ void decode_tile(const KV* sk, const KV* sv, int wkey0, int key0, int tile, int lane,
                                            const uint32_t (&qf)[kHeadDim / 16][4], const LogitArgs (&la)[2],
                                            const int (&row_pos)[2], const int (&row_lo)[2], const int (&row_hi)[2],
                                            int64_t lo_max, int64_t hi_min, int block_rows, float (&m_run)[2],
                                            float (&l_run)[2], float (&acc)[kHeadDim / 8][4]) {
  using Tr = DecodeTraits<kHeadDim, T, KV>;
  constexpr bool kFp8 = Tr::kFp8;
  constexpr int kKSteps = kHeadDim / 16;
  constexpr int kNTiles = kHeadDim / 8;
  constexpr int kWarpKeys = kTileKeys / kDecodeWarps;
  using MmaT = std::conditional_t<kFp8, __half, T>;  // the MMAs' operand type
  const int tig = lane % 4;
  (void)tile;  // (the experiments' Q·Kᵀ stand-in)

  // S = Q·Kᵀ: 16 rows × 16 keys (two n-tiles of 8 keys). Even and odd k-steps go to separate
  // accumulators: four chains of kKSteps / 2 dependent MMAs, not two of kKSteps (the chain's
  // latency, not the tensor pipe, bounds this part with two warps a scheduler).
  float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
  float s_odd[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
  if constexpr (!kFp8) {
    if (!FS_DECODE_SKIPS(qk, s[0][0], lane, tile))
#pragma unroll
    for (int ks = 0; ks < kKSteps; ks += 2) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        uint32_t kf[4];  // k-steps ks and ks+1 of keys nt·8 .. nt·8+7
        const int m = lane / 8;
        ldmatrix_x4(kf, sk + swz<kHeadDim, T>(wkey0 + nt * 8 + lane % 8, ks * 2 + m));
        mma_16816<T>(s[nt], qf[ks], kf[0], kf[1]);
        mma_16816<T>(s_odd[nt], qf[ks + 1], kf[2], kf[3]);
      }
    }
  } else {
    // FP8 K: matrix m of the x4 is keys (m / 2)·8 .. + 7 of the warp's 16 at chunk (k-step)
    // ks + m % 2; lane (gid, tig) gets 4 codes of key gid, dims 4·tig .. + 3 of the chunk.
#pragma unroll
    for (int ks = 0; ks < kKSteps; ks += 2) {
      uint32_t kf[4];
      const int m = lane / 8;
      ldmatrix_x4(kf, sk + swz_fp8<kHeadDim>(wkey0 + (m >> 1) * 8 + lane % 8, ks + (m & 1)));
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        uint32_t b0, b1;
        fp8x4_to_half2x2<KV>(kf[2 * nt], b0, b1);
        mma_16816<__half>(s[nt], qf[ks], b0, b1);
        fp8x4_to_half2x2<KV>(kf[2 * nt + 1], b0, b1);
        mma_16816<__half>(s_odd[nt], qf[ks + 1], b0, b1);
      }
    }
  }
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[nt][e] += s_odd[nt][e];

  // Logits (base 2, scale folded into the exponent), the mask only on tiles that cross a
  // row's range, online softmax (online_softmax.cuh). Lane holds rows gid (s[nt][0..1]) and
  // gid+8 (s[nt][2..3]), keys nt·8 + tig·2 + {0, 1}.
  const bool masked = key0 < lo_max || key0 + kWarpKeys > hi_min;
  float p_val[2][4];
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) p_val[nt][e] = s[nt][e];
  // Lazy max decided by a warp vote (softmax_row_voted): the max reduction, and the rescale of
  // the accumulator (64 FMULs), only on the rare tiles where some row's max grew by more than
  // 2^8 (a warp-uniform branch). Fragment rows gid + 8 exist only when the block has more than
  // 8 rows (GQA groups above 8, or q_len > 1); otherwise (decode's usual group of 4 or 8) their
  // softmax is skipped, a CTA-uniform branch, and their p are zero.
  float f[2] = {1.f, 1.f};
  bool rescale = false;
  if (!FS_DECODE_SKIPS(softmax))
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if (i == 1 && block_rows <= 8) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) p_val[nt][2] = p_val[nt][3] = 0.f;
      break;
    }
    rescale |= softmax_row_voted<2>([&](int nt, int e) -> float& { return p_val[nt][2 * i + e]; }, la[i], key0,
                                    tig, row_pos[i], row_lo[i], row_hi[i], masked, m_run[i], l_run[i], f[i]);
  }
  if (rescale) {
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[n][e] *= f[e / 2];
    }
  }

  // O += P·V: P (16 × 16 keys) as the A operand straight from the S fragments.
  uint32_t pa[4];
  pa[0] = pack2<MmaT>(p_val[0][0], p_val[0][1]);
  pa[1] = pack2<MmaT>(p_val[0][2], p_val[0][3]);
  pa[2] = pack2<MmaT>(p_val[1][0], p_val[1][1]);
  pa[3] = pack2<MmaT>(p_val[1][2], p_val[1][3]);
  if constexpr (!kFp8) {
    if (!FS_DECODE_SKIPS(pv, acc[0][0], pa))
#pragma unroll
    for (int n = 0; n < kNTiles; n += 2) {
      uint32_t vf[4];  // keys 0-7 / 8-15 of dims n·8.. and (n+1)·8..
      const int m = lane / 8;
      ldmatrix_x4_trans(vf, sv + swz<kHeadDim, T>(wkey0 + (m & 1) * 8 + lane % 8, n + (m >> 1)));
      mma_16816<T>(acc[n], pa, vf[0], vf[1]);
      mma_16816<T>(acc[n + 1], pa, vf[2], vf[3]);
    }
  } else {
    // FP8 V: matrix m of the x4.trans is keys (m % 2)·8 .. + 7 at chunk c + m / 2, read as 8×8
    // pairs of codes and transposed: lane (gid, tig) gets codes [key 2·tig][dims 2·gid, 2·gid + 1]
    // and [key 2·tig + 1][the same dims] (bytes 0, 1, 2, 3). Bytes 0 and 2 are the B fragment
    // of dim 2·gid (keys 2·tig, 2·tig + 1), bytes 1 and 3 that of dim 2·gid + 1: n-tile 2·c
    // holds the chunk's even dims, 2·c + 1 its odd ones (the epilogue puts them back in order).
#pragma unroll
    for (int c = 0; c < Tr::kKvChunks; c += 2) {
      uint32_t vf[4];
      const int m = lane / 8;
      ldmatrix_x4_trans(vf, sv + swz_fp8<kHeadDim>(wkey0 + (m & 1) * 8 + lane % 8, c + (m >> 1)));
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // chunk c + h: keys 0-7 in vf[2h], 8-15 in vf[2h + 1]
        const uint32_t k0 = vf[2 * h], k8 = vf[2 * h + 1];
        mma_16816<__half>(acc[2 * (c + h)], pa, fp8x2_to_half2<KV>(__byte_perm(k0, 0, 0x0020)),
                          fp8x2_to_half2<KV>(__byte_perm(k8, 0, 0x0020)));
        mma_16816<__half>(acc[2 * (c + h) + 1], pa, fp8x2_to_half2<KV>(__byte_perm(k0, 0, 0x0031)),
                          fp8x2_to_half2<KV>(__byte_perm(k8, 0, 0x0031)));
      }
    }
  }
}

// The end of an item: the four warps' states (disjoint keys of the same rows) merged through the
// shared scratch `red` (the stages: kDecodeFinishFloats), then normalised and written: o in the
// storage type (one split) or the fp32 partial state and its lse (the workspace, for
// merge_states). The caller has every warp done with `red`'s previous use.
template <int kHeadDim, typename T, typename KV>
__device__ __forceinline__ void decode_finish(const DecodeParams& p, float* red, float (&acc)[kHeadDim / 8][4],
                                              const float (&m_run)[2], float (&l_run)[2], int b, int kv_head,
                                              int group, int split, int row0, int block_rows, int warp, int lane) {
  using Tr = DecodeTraits<kHeadDim, T, KV>;
  constexpr bool kFp8 = Tr::kFp8;
  constexpr int kNTiles = kHeadDim / 8;
  const int gid = lane / 4, tig = lane % 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l_run[i] += __shfl_xor_sync(0xffffffffu, l_run[i], 1);
    l_run[i] += __shfl_xor_sync(0xffffffffu, l_run[i], 2);
  }
  // red_o rows are kRedStride floats apart (8 of padding: a warp's float2 stores of 8 rows
  // then take the two wavefronts 256 bytes need, not eight).
  constexpr int kRedStride = kHeadDim + 8;
  constexpr int kRows = kRowsPerBlock;
  float* red_o = red;                                          // [warps][kRows][kRedStride]
  float* red_m = red_o + kDecodeWarps * kRows * kRedStride;    // [warps][kRows]
  float* red_l = red_m + kDecodeWarps * kRows;                 // [warps][kRows]
  const int64_t total_rows = static_cast<int64_t>(p.batch) * p.q_len * p.num_heads;
  float* ws_o = static_cast<float*>(p.workspace);
  float* ws_lse = ws_o + static_cast<int64_t>(p.num_splits) * total_rows * kHeadDim;
  constexpr int kV = kHeadDim / 32;  // 4 or 2
  const float v_mul = kFp8 ? p.pages.v_scales[kv_head] : 1.f;  // FP8: the values' scale on the output
  using VecF = std::conditional_t<kV == 4, float4, float2>;
  const int d0 = lane * kV;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = gid + 8 * i;
    if (r >= block_rows) continue;  // padding rows are never written out
    const int rr = warp * kRows + r;
    if constexpr (!kFp8) {
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) {
        const float2 v = make_float2(acc[n][2 * i], acc[n][2 * i + 1]);
        *reinterpret_cast<float2*>(red_o + rr * kRedStride + n * 8 + tig * 2) = v;
      }
    } else {
      // n-tiles 2·c (even dims) and 2·c + 1 (odd) of chunk c: this lane's dims 16·c + 4·tig .. + 3.
#pragma unroll
      for (int c = 0; c < Tr::kKvChunks; ++c) {
        const float4 v = make_float4(acc[2 * c][2 * i], acc[2 * c + 1][2 * i], acc[2 * c][2 * i + 1],
                                     acc[2 * c + 1][2 * i + 1]);
        *reinterpret_cast<float4*>(red_o + rr * kRedStride + 16 * c + 4 * tig) = v;
      }
    }
    if (tig == 0) {
      red_m[rr] = m_run[i];
      red_l[rr] = l_run[i];
    }
  }
  __syncthreads();

  // Warp w finishes rows w, w + 4, ...: lane l holds dims l·kV .. l·kV + kV - 1
  // (contiguous, vector loads without bank conflicts; v2.7 had one thread a 16-dim slice,
  // 4-way conflicts, 64 scalar loads, ~1.4 us of epilogue on the trace).
  for (int r = warp; r < block_rows; r += kDecodeWarps) {
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) mx = fmaxf(mx, red_m[w * kRows + r]);
    float wgt[kDecodeWarps], l = 0.f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float mw = red_m[w * kRows + r];
      wgt[w] = mw == -INFINITY ? 0.f : fast_exp2(mw - mx);  // states in base 2
      l += wgt[w] * red_l[w * kRows + r];
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const float lse = l > 0.f ? (mx + __log2f(l)) * 0.6931471805599453f : -INFINITY;  // natural log out
    float out[kV] = {};
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const VecF x = *reinterpret_cast<const VecF*>(red_o + (w * kRows + r) * kRedStride + d0);
      const float* xs = reinterpret_cast<const float*>(&x);
#pragma unroll
      for (int d = 0; d < kV; ++d) out[d] += wgt[w] * xs[d];
    }
    const float norm = kFp8 ? inv * v_mul : inv;
#pragma unroll
    for (int d = 0; d < kV; ++d) out[d] *= norm;
    const int t = (row0 + r) / group, h = kv_head * group + (row0 + r) % group;
    const int64_t token_row = static_cast<int64_t>(b) * p.q_len + t;
    if (p.num_splits == 1) {
      T* o = static_cast<T*>(p.o) + token_row * p.o_row_stride + static_cast<int64_t>(h) * p.o_head_stride + d0;
#pragma unroll
      for (int d = 0; d < kV; ++d) o[d] = from_f<T>(out[d]);
      if (p.lse != nullptr && lane == 0) p.lse[token_row * p.num_heads + h] = lse;
    } else {
      const int64_t wrow = static_cast<int64_t>(split) * total_rows + token_row * p.num_heads + h;
      VecF v;
      float* vs = reinterpret_cast<float*>(&v);
#pragma unroll
      for (int d = 0; d < kV; ++d) vs[d] = out[d];
      *reinterpret_cast<VecF*>(ws_o + wrow * kHeadDim + d0) = v;
      if (lane == 0) ws_lse[wrow] = lse;
    }
  }
}

template <int kHeadDim, typename T, typename KV = T>
__global__ void __launch_bounds__(kDecodeThreads, (DecodeTraits<kHeadDim, T, KV>::kMinBlocks))
    decode_split_kernel(const __grid_constant__ DecodeParams p, const int row_blocks, const int resident) {
  using Tr = DecodeTraits<kHeadDim, T, KV>;
  constexpr int kStages = Tr::kStages;
  constexpr int kKSteps = kHeadDim / 16;        // mma k-steps over head_dim (QK)
  constexpr int kNTiles = kHeadDim / 8;         // mma n-tiles over head_dim (PV)
  constexpr int kWarpKeys = kTileKeys / kDecodeWarps;  // 16 keys of each tile per warp
  extern __shared__ __align__(16) unsigned char smem_raw[];
  KV* smem_k = reinterpret_cast<KV*>(smem_raw);
  KV* smem_v = smem_k + kStages * Tr::kTileElems;
  T* smem_q = reinterpret_cast<T*>(smem_v + kStages * Tr::kTileElems);  // [16][kHeadDim], swizzled

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Let the merge kernel (a programmatic dependent) be launched now; it waits on the device
  // for this grid's writes, so its launch latency hides under this kernel.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  const int split = blockIdx.x;
  const int kv_head = blockIdx.y / row_blocks;
  const int row_block = blockIdx.y % row_blocks;
  const int b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gid = lane / 4;  // mma fragment row
  const int group = p.num_heads / p.num_kv_heads;
  const int rows = p.q_len * group;
  const int row0 = row_block * kRowsPerBlock;
  const int block_rows = min(kRowsPerBlock, rows - row0);

  const KVPageView& pv = p.pages;
  const int64_t capacity = pv.block_table_stride * pv.block_size;
  const int64_t split_keys = static_cast<int64_t>(p.pages_per_split) * pv.block_size;
  KVSource src;
  src.init_paged(pv, b, kv_head, sizeof(KV));  // kernel parameters only
  const int spec_lo = static_cast<int>(min(capacity, split * split_keys));
  const int spec_hi = static_cast<int>(min(capacity, (split + 1) * split_keys));
  // The queries' source: 16-byte copies where q's rows and heads are 16-byte aligned (one commit
  // group, the first, issued after the wait), element loads otherwise (after the K/V copies,
  // and an empty group).
  const bool q_vec = decode_q_vec<T>(p);
  auto q_src = [&](int r, int c) { return decode_q_chunk<T>(p, b, kv_head, group, row0 + r, c); };  // r < block_rows
  // This thread's query chunks (a fixed count: no remainder code), addressed before the wait.
  constexpr int kQPasses = kRowsPerBlock * Tr::kChunks / kDecodeThreads;
  static_assert(kQPasses * kDecodeThreads == kRowsPerBlock * Tr::kChunks, "q chunks");
  const T* q_from[kQPasses];
  int q_dst[kQPasses];
  bool q_live[kQPasses];
#pragma unroll
  for (int k = 0; k < kQPasses; ++k) {
    const int i = tid + k * kDecodeThreads;
    const int r = i / Tr::kChunks, c = i % Tr::kChunks;
    q_live[k] = r < block_rows;
    q_from[k] = q_live[k] ? q_src(r, c) : static_cast<const T*>(p.q);
    q_dst[k] = swz<kHeadDim, T>(r, c);
  }

#if FLASHSERVE_DECODE_PREFETCH_TILES > 0 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Before the wait, the first wave's CTAs (launch order; resident = the CTAs the GPU holds at
  // once) prefetch their first tiles into L2 (first_tiles_piece): launched as a programmatic
  // dependent, the CTAs that become resident on the SMs the previous kernel frees start the
  // stream during its tail. A later CTA starts after this kernel's own, its wait already
  // satisfied, and a prefetch would only put an L2 round trip before its copies ((256,1k), 8
  // waves: -1.7% with every CTA prefetching; prefetching a successor's first tiles near a
  // CTA's end measured -2.4% and -3.9% at (128,2k) and (256,1k): bench/history/decode.md,
  // "decode v4.4" and "Experiments not adopted on top of v4.4").
  const int cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (cta < resident) {
    const char* addr;
    uint32_t bytes;
    first_tiles_piece<kHeadDim, KV>(p, cta, gridDim.x, gridDim.y, tid, addr, bytes);
    if (bytes > 0) prefetch_l2(addr, bytes);
  }
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // This kernel is itself launched as a programmatic dependent of the kernel before it (sm_90+):
  // its CTAs may be resident before that kernel has finished, so nothing in global memory (q,
  // the lengths, the block table, K/V, the workspace the previous merge may still read) that
  // the kernel computes with is read before that kernel's writes are visible (the prefetch
  // above reads a length and page ids only to warm L2, and never uses them after). A no-op for
  // an ordinary launch. The index arithmetic above (kernel parameters and block ids only) and
  // the first wave's prefetch run before it, while the previous kernel ends.
  if (!FS_DECODE_SKIPS(grid_wait)) asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  FS_DECODE_STAMP(t_start);
  // The sequence's length first: the copies' range waits on it (issued after the queries'
  // copies, its L2 round trip was the start's critical path: trace of v3.9, 2.4 us from the
  // wait to the first K/V copies at (1,32k)).
  const int seq_len_raw = pv.seq_lens[b];

  // The first kStages tiles' page ids are read before the sequence's length is known, for the
  // range the split starts at when no window moves it (the table row holds capacity entries,
  // so these reads are in bounds; ids of keys past the length are never used): the first
  // copies then wait one L2 round trip, not two (seq_lens, then the table). Block ids are
  // fetched one tile ahead of the copies that use them afterwards (ncu at (1,32k) before
  // that: 64% of DRAM bandwidth, each iteration's copies issued an L2 round trip late).
  using Copier = KVTileCopier<kDecodeThreads, kTileKeys, Tr::kKvChunks>;
  Copier first[kStages];
#pragma unroll
  for (int s = 0; s < kStages; ++s) first[s].fetch_ids(src, spec_lo, spec_hi, kStages, s, tid);

  // The queries of the row block go to shared memory (rows past block_rows are zero) ahead of
  // every K/V copy: issued after them (v3.6 and before), the 4 KB waited behind the CTA's first
  // 64 KB of K/V in the memory queue, and the first tile's compute with it (ncu at (1,32k): 12% of
  // the kernel's stall samples were warps waiting for q, or at the barrier after it).
  if (q_vec) {
#pragma unroll
    for (int k = 0; k < kQPasses; ++k) cp_async_16(smem_q + q_dst[k], q_from[k], q_live[k]);
  }
  cp_async_commit();

  const DecodeItemKeys keys = decode_item_keys(p, seq_len_raw, split, row0, block_rows, group);
  const int64_t lo_max = keys.lo_max, hi_min = keys.hi_min;
  const int lo = keys.lo, hi = keys.hi, num_tiles = keys.num_tiles;
  if (lo != spec_lo) {  // a window moved the start (or the split is empty): read the ids again
#pragma unroll
    for (int s = 0; s < kStages; ++s) first[s].fetch_ids(src, lo, hi, num_tiles, s, tid);
  }
  // K/V evict-first in L2 (FLASHSERVE_DECODE_KV_EVICT_FIRST, an A/B macro). Each byte comes from
  // DRAM once a call; where several row blocks (q_len × group > 16) read the same bytes, their
  // CTAs run together, and evict-first measured faster there too (bench/history/decode.md,
  // "decode v4.2 experiment").
  const uint64_t kv_policy = FLASHSERVE_DECODE_KV_EVICT_FIRST ? l2_evict_first_policy() : 0;
  auto load_tile = [&](const Copier& kv, int tile, int stage) {
    decode_copy_tile<kHeadDim, T, KV>(kv, src, lo, hi, tile, smem_k + stage * Tr::kTileElems,
                                      smem_v + stage * Tr::kTileElems, tid, kv_policy);
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_tiles) load_tile(first[s], s, s);
    cp_async_commit();
  }
  Copier kv = first[kStages - 1];  // ids for the first copy the main loop issues
  FS_DECODE_STAMP(t_issued);       // the first stages' copies issued

  // This lane's two rows (fragment rows gid and gid + 8): positions, visible ranges, logit
  // constants (ALiBi slopes differ by head). Only the compute needs them: after the first copies.
  int row_lo[2], row_hi[2], row_pos[2];
  LogitArgs la[2] = {LogitArgs(p.mask, 0), LogitArgs(p.mask, 0)};
  decode_lane_rows(p, keys, kv_head, group, row0, block_rows, gid, la, row_pos, row_lo, row_hi);
  if (!q_vec) {  // q only element-aligned: element loads, the first tiles already in flight
    for (int i = tid; i < kRowsPerBlock * Tr::kChunks; i += kDecodeThreads) {
      const int r = i / Tr::kChunks, c = i % Tr::kChunks;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (r < block_rows) {
        const T* q = q_src(r, c);
        T tmp[Tr::kElemsPerChunk];
#pragma unroll
        for (int e = 0; e < Tr::kElemsPerChunk; ++e) tmp[e] = q[e];
        v = *reinterpret_cast<const uint4*>(tmp);
      }
      *reinterpret_cast<uint4*>(smem_q + swz<kHeadDim, T>(r, c)) = v;
    }
  }
  cp_async_wait<kStages - 1>();  // the queries' group (the first); the first tiles' may be pending
  __syncthreads();               // smem_q written

  // Q fragments (A operand), all k-steps, in registers for the whole split.
  uint32_t qf[kKSteps][4];
  decode_q_fragments<kHeadDim, T, KV>(p, smem_q, kv_head, tid, warp, lane, qf, la);

  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  float acc[kNTiles][4];
#pragma unroll
  for (int n = 0; n < kNTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;

  FS_DECODE_STAMP_LATER(t_first);
  for (int tile = 0; tile < num_tiles; ++tile) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // the tile has landed for everyone; the stage read last iteration is free
    FS_DECODE_STAMP_IF(t_first, tile == 0);
    if (!FS_DECODE_SKIPS(copies_after_the_first) && tile + kStages - 1 < num_tiles)
      load_tile(kv, tile + kStages - 1, (tile + kStages - 1) % kStages);
    cp_async_commit();
    kv.fetch_ids(src, lo, hi, num_tiles, tile + kStages, tid);  // in flight while this tile computes

    if (FS_DECODE_SKIPS(compute)) continue;
    const int stage = tile % kStages;
    const KV* sk = smem_k + stage * Tr::kTileElems;
    const KV* sv = smem_v + stage * Tr::kTileElems;
    const int wkey0 = warp * kWarpKeys;  // this warp's 16 keys of the tile
    const int key0 = lo + tile * kTileKeys + wkey0;

    decode_tile<kHeadDim, T, KV>(sk, sv, wkey0, key0, tile, lane, qf, la, row_pos, row_lo, row_hi, lo_max, hi_min,
                                 block_rows, m_run, l_run, acc);
  }
  FS_DECODE_STAMP(t_loop);
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the stages: reuse them for the merge

  decode_finish<kHeadDim, T, KV>(p, reinterpret_cast<float*>(smem_raw), acc, m_run, l_run, b, kv_head, group, split,
                                 row0, block_rows, warp, lane);
  FS_DECODE_STAMPS_OUT(p, static_cast<int64_t>(p.batch) * p.q_len * p.num_heads, kHeadDim, tid, t_start, t_issued,
                       t_first, t_loop);
}

// Row blocks (CTAs) of one item (sequence, kv head, split) of `rows` query rows (q_len × group).
inline int row_blocks_of(int rows) { return (rows + kRowsPerBlock - 1) / kRowsPerBlock; }

// Readies the instance on the current device and says how many of its CTAs an SM holds
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor on this kernel, at its block size and shared
// memory; 2 at head_dim 128, 4 at 64 on the H200: registers, shared memory): lets it take its
// dynamic shared memory, a setting of the device's context. Once a device (decode_cuda.cu
// caches it, with the launch shape); launch_decode_split needs it done. Defined by the instance
// files.
template <int kHeadDim, typename T, typename KV = T>
cudaError_t prepare_decode_split(int* ctas_per_sm) {
  using Tr = DecodeTraits<kHeadDim, T, KV>;
  auto kernel = decode_split_kernel<kHeadDim, T, KV>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (err != cudaSuccess) return err;
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(ctas_per_sm, kernel, kDecodeThreads, Tr::kSmemBytes);
  return err;
}

// Launches the split kernel for one instance, prepared on this device (prepare_decode_split);
// defined by the instance files. dependent_launch (sm_90+): as a programmatic dependent of the
// previous kernel in the stream, so the launch and the CTAs' start overlap that kernel's tail
// (the kernel waits on the device before reading). first_wave: the CTAs the device holds at
// once (SMs × CTAs an SM holds), for the first tiles' prefetch.
template <int kHeadDim, typename T, typename KV = T>
cudaError_t launch_decode_split(const DecodeParams& p, cudaStream_t stream, bool dependent_launch, int first_wave) {
  using Tr = DecodeTraits<kHeadDim, T, KV>;
  const int group = p.num_heads / p.num_kv_heads;
  const int row_blocks = row_blocks_of(p.q_len * group);
  auto kernel = decode_split_kernel<kHeadDim, T, KV>;
  const int version = binary_version<decode_split_kernel<kHeadDim, T, KV>>();  // the instance's architecture
  dependent_launch = dependent_launch && version >= 90;
  LaunchConfig launch(dim3(p.num_splits, p.num_kv_heads * row_blocks, p.batch), dim3(kDecodeThreads),
                      Tr::kSmemBytes, stream, dependent_launch);
  // Row blocks of one kv head (q_len × group > 16 rows) read the same K/V bytes. Launched in
  // clusters of two (blockIdx.y 2k and 2k+1: row blocks of one head when row_blocks is even), a
  // pair is placed on one GPC at the same time and runs in step, so (likely: the L2 hit rate was
  // not measured) the second CTA's copies find in L2 what the first one's brought: q_len 8 × GQA
  // 4 +18-23%, other rows unchanged; clusters of 4 or 8 hold fewer CTAs at once and were 9-22%
  // slower on most rows (bench/history/decode.md, "thread-block clusters over the grid's y"
  // and "decode v4.5"). sm_90+, and only where a pair fits. With
  // clusters the block scheduler walks the grid a pair at a time, so with several splits the
  // launch order (and the first-wave set the prefetch above assumes) differs a little.
  bool clustered = false;
  if (row_blocks % 2 == 0 && version >= 90) {
    // Whether a pair fits: 0 not known yet, 1 yes, -1 no. Asked once an answer: a query that
    // fails is asked again at the next launch.
    static std::atomic<int> pairs_fit{0};
    if (pairs_fit.load(std::memory_order_relaxed) == 0) {
      LaunchConfig probe(dim3(1, 2, 1), dim3(kDecodeThreads), Tr::kSmemBytes, nullptr, false);
      probe.cluster(dim3(1, 2, 1));
      int clusters = 0;
      if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &probe.config) == cudaSuccess)
        pairs_fit.store(clusters > 0 ? 1 : -1, std::memory_order_relaxed);
      else
        (void)cudaGetLastError();  // the query's own error only: the launch is then unclustered
    }
    if (pairs_fit.load(std::memory_order_relaxed) == 1) {
      launch.cluster(dim3(1, 2, 1));
      clustered = true;
    }
  }
  cudaError_t err = cudaLaunchKernelEx(&launch.config, kernel, p, row_blocks, first_wave);
  if (err != cudaSuccess && clustered) {
    // A cluster the device cannot place now (e.g. SMs limited by MPS): the same launch without
    // (not while capturing a graph, which the failed launch has ended: the error goes back).
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusActive;
    if (cudaStreamIsCapturing(stream, &capture) == cudaSuccess && capture == cudaStreamCaptureStatusNone) {
      (void)cudaGetLastError();
      launch.drop_cluster();
      err = cudaLaunchKernelEx(&launch.config, kernel, p, row_blocks, first_wave);
    }
  }
  if (err != cudaSuccess) return err;
  return cudaGetLastError();
}

}  // namespace flashserve::cuda
