// The warp-specialized Hopper prefill kernel (sm_90a), FlashAttention-3's design: one producer
// warpgroup loads, two consumer warpgroups compute. Same semantics as prefill_sm90_kernel.cuh
// and prefill_kernel.cuh; templated on head_dim and the storage type, one instance per file
// (prefill_sm90_ws_hd*_*.cu).
//
// CTA = (sequence, query head, tile of kBlockM = 128 query rows), 384 threads:
//  - warpgroup 0, the producer (setmaxnreg 24): Q once and K/V tiles of kBlockN keys into a ring
//    of kStages stages, K and V with barriers of their own (sm90_pipeline.cuh), issued in the
//    order the consumers need them: K(0), then K(t), V(t-1), ..., V(last). Packed K/V and Q
//    come by TMA (one elected thread; a box of 64 columns × 1 head × rows a 128-byte swizzled
//    column block, the layout wgmma.cuh describes); paged K/V by a cp.async gather of all 128
//    producer threads (zero-filled past the keys and on bad page ids), each arriving on the
//    stage's barrier when its copies land.
//  - warpgroups 1 and 2, the consumers (setmaxnreg 240), 64 query rows each: per tile
//    S = Q·Kᵀ (wgmma m64n128k16, both operands in shared memory), online softmax on the
//    accumulators (prefill_common.cuh), O += P·V (P from registers, V MN-major). Inside a
//    warpgroup, S(t) is issued before P(t-1)·V(t-1), so the softmax of t runs while the
//    tensor cores do P(t-1)·V(t-1); between the two warpgroups a pair of named barriers
//    orders their wgmma issue ("ping-pong"), so one's softmax runs under the other's GEMMs.
// bench/NOTES.md "prefill v4" has the floors, predictions and measurements.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/cuda/prefill_common.cuh"
#include "attention/cuda/sm90_pipeline.cuh"
#include "attention/cuda/wgmma.cuh"
#include "attention/params.h"

namespace flashserve::cuda {

// The TMA descriptors of a call (built on the host per call, prefill_cuda.cu): Q always; K and
// V when packed (paged K/V are gathered). Boxes of 64 columns × 1 head × kBlockM (Q) or kBlockN
// (K/V) rows, 128-byte swizzle.
struct PrefillTmaMaps {  // CUtensorMap is 64-byte aligned
  CUtensorMap q, k, v;
};

// Tile sizes of the warp-specialized kernel, by head dim (one place; FA3's tile_size.h).
struct PrefillWsTiles {
  int block_m, block_n, stages;
};
constexpr PrefillWsTiles prefill_ws_tiles(int head_dim) {
  // d 128: Q 32 KB + 2 stages × (K 32 + V 32) KB = 160 KB; d 64: 16 + 2 × 32 = 80 KB.
  return head_dim == 128 ? PrefillWsTiles{128, 128, 2} : PrefillWsTiles{128, 128, 2};
}

template <int kHeadDim, typename T>
struct PrefillWsTraits {
  static_assert(kHeadDim == 64 || kHeadDim == 128, "prefill ws: head_dim 64 or 128");
  static_assert(sizeof(T) == 2, "16-bit storage");
  static constexpr PrefillWsTiles kTiles = prefill_ws_tiles(kHeadDim);
  static constexpr int kBlockM = kTiles.block_m, kBlockN = kTiles.block_n, kStages = kTiles.stages;
  static_assert(kBlockM == 128 && kBlockN == 128, "two consumer warpgroups of 64 rows; S tiles of 128 keys");
  static constexpr int kThreads = 384;
  static constexpr int kProducerRegs = 24, kConsumerRegs = 240;
  static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= kThreads * 168, "register file");
  static constexpr int kChunks = kHeadDim / 8;   // 16-byte chunks a row
  static constexpr int kBlocks = kHeadDim / 64;  // 128-byte column blocks a row
  static constexpr int kKSteps = kHeadDim / 16;
  static constexpr int kQElems = kBlockM * kHeadDim;
  static constexpr int kTileElems = kBlockN * kHeadDim;
  static constexpr uint32_t kQBytes = kQElems * 2, kTileBytes = kTileElems * 2;
  static constexpr int kBarriers = 1 + 4 * kStages;  // q_full, k full/empty, v full/empty
  static constexpr int kSmemBytes = (kQElems + 2 * kStages * kTileElems) * 2 + kBarriers * 8 + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
};

// Paged K or V tile `tile` by the 128 producer threads with cp.async (chunk ptid % kChunks of
// keys ptid / kChunks + i·kPass), zero-filled at or past hi and on page ids outside the pool.
template <int kChunks, int kBlockN, typename T>
__device__ __forceinline__ void gather_tile(const KVSource& s, const char* base, int lo, int hi, int tile, T* dst,
                                            int ptid) {
  constexpr int kPass = 128 / kChunks, kRows = kBlockN / kPass;
  const int chunk = ptid % kChunks, j0 = ptid / kChunks;
  const int first = lo + tile * kBlockN + j0;
#pragma unroll 4
  for (int i = 0; i < kRows; ++i) {
    const int key = first + i * kPass;
    bool valid = key < hi;
    const uint32_t raw = valid ? static_cast<uint32_t>(s.table[key >> s.block_shift]) : 0u;
    valid = valid && raw < static_cast<uint32_t>(s.num_blocks);
    const uint32_t page = valid ? raw : 0u;
    const uint64_t off = static_cast<uint64_t>(page) * s.block_bytes +
                         (static_cast<uint32_t>(key & s.block_mask) * s.token_bytes + chunk * 16);
    cp_async_16(dst + sw128_offset<kBlockN>(j0 + i * kPass, chunk), base + off, valid);
  }
}

template <int kHeadDim, typename T>
__global__ void __launch_bounds__(384, 1)
    prefill_sm90_ws_kernel(const __grid_constant__ PrefillParams p, const __grid_constant__ PrefillTmaMaps maps) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tr = PrefillWsTraits<kHeadDim, T>;
  constexpr int kBN = Tr::kBlockN;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_addr = smem_u32(smem_raw);
  T* smem_q = reinterpret_cast<T*>(smem_raw + ((1024 - (raw_addr & 1023)) & 1023));
  T* smem_k = smem_q + Tr::kQElems;
  T* smem_v = smem_k + Tr::kStages * Tr::kTileElems;
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem_v + Tr::kStages * Tr::kTileElems);
  uint64_t* q_full = bars;
  const Pipeline<Tr::kStages> pipe_k{bars + 1, bars + 1 + Tr::kStages};
  const Pipeline<Tr::kStages> pipe_v{bars + 1 + 2 * Tr::kStages, bars + 1 + 3 * Tr::kStages};

  const int m_tile = gridDim.x - 1 - blockIdx.x;  // longest tiles first
  const int h = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, lane = tid % 32;
  PrefillCta cta;
  if (!cta.init(p, m_tile, h, b, Tr::kBlockM, kBN, 2)) return;  // uniform: before any barrier
  const int num_tiles = cta.num_tiles;

  if (tid == 0) {
    MBarrier::init(q_full, 1);
    // Paged tiles complete by the 128 producer threads' cp.async arrivals, TMA tiles by one
    // arrival with the tile's bytes. Empty: one arrival a consumer warp.
    pipe_k.init(p.paged ? 128 : 1, 8);
    pipe_v.init(p.paged ? 128 : 1, 8);
    MBarrier::fence_init();
  }
  __syncthreads();

  const int wg = tid / 128;
  if (wg == 0) {
    // ---- producer ----
    setmaxnreg_dec<Tr::kProducerRegs>();
    const int kv_head = h / (p.num_heads / p.num_kv_heads);
    if (tid == 0) {
      prefetch_tensor_map(&maps.q);
      MBarrier::arrive_expect_tx(q_full, Tr::kQBytes);
      const int q_row = static_cast<int>(cta.q0 + cta.row0);
#pragma unroll
      for (int c = 0; c < Tr::kBlocks; ++c) tma_load_3d(smem_q + c * Tr::kBlockM * 64, &maps.q, q_full, c * 64, h, q_row);
    }
    PipeState<Tr::kStages> sk, sv;
    if (!p.paged) {
      if (tid != 0) return;
      const int k_row0 = p.cu_seqlens_k[b] + cta.cta_lo;
      auto load = [&](const Pipeline<Tr::kStages>& pipe, PipeState<Tr::kStages>& st, const CUtensorMap* map, T* ring,
                      int tile) {
        pipe.producer_acquire(st);
        uint64_t* bar = pipe.full_barrier(st);
        MBarrier::arrive_expect_tx(bar, Tr::kTileBytes);
        T* dst = ring + st.index * Tr::kTileElems;
#pragma unroll
        for (int c = 0; c < Tr::kBlocks; ++c) tma_load_3d(dst + c * kBN * 64, map, bar, c * 64, kv_head, k_row0 + tile * kBN);
        st.advance();
      };
      if (num_tiles > 0) load(pipe_k, sk, &maps.k, smem_k, 0);
      for (int t = 1; t < num_tiles; ++t) {
        load(pipe_k, sk, &maps.k, smem_k, t);
        load(pipe_v, sv, &maps.v, smem_v, t - 1);
      }
      if (num_tiles > 0) load(pipe_v, sv, &maps.v, smem_v, num_tiles - 1);
    } else {
      auto load = [&](const Pipeline<Tr::kStages>& pipe, PipeState<Tr::kStages>& st, const char* base, T* ring,
                      int tile) {
        pipe.producer_acquire(st);
        gather_tile<Tr::kChunks, kBN>(cta.src, base, cta.cta_lo, cta.cta_hi, tile, ring + st.index * Tr::kTileElems,
                                      tid);
        MBarrier::arrive_on_cp_async(pipe.full_barrier(st));
        st.advance();
      };
      if (num_tiles > 0) load(pipe_k, sk, cta.src.k_base, smem_k, 0);
      for (int t = 1; t < num_tiles; ++t) {
        load(pipe_k, sk, cta.src.k_base, smem_k, t);
        load(pipe_v, sv, cta.src.v_base, smem_v, t - 1);
      }
      if (num_tiles > 0) load(pipe_v, sv, cta.src.v_base, smem_v, num_tiles - 1);
      cp_async_wait<0>();
    }
    return;
  }

  // ---- consumers ----
  setmaxnreg_inc<Tr::kConsumerRegs>();
  const int cw = wg - 1;           // consumer warpgroup 0 or 1
  const int ctid = tid - 128;
  const int gid = lane / 4, tig = lane % 4;
  const int wrow0 = cw * 64 + ((ctid / 32) % 4) * 16;
  int row_pos[2], row_lo[2], row_hi[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = wrow0 + gid + 8 * i;
    row_pos[i] = static_cast<int>(cta.pos0 + cta.row0 + r);
    int64_t lo = 0, hi = 0;
    if (r < cta.block_rows) visible(p.mask, cta.pos0 + cta.row0 + r, 0, cta.k_len, lo, hi);
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
  const T* q_wg = smem_q + cw * 64 * 64;  // this warpgroup's 64 rows in each column block

  float s[64];
  auto issue_s = [&](int stage) {
    const T* sk = smem_k + stage * Tr::kTileElems;
#pragma unroll
    for (int ks = 0; ks < Tr::kKSteps; ++ks) {
      const int blk = ks / 4, col = (ks % 4) * 16;
      wgmma_ss_n128<T>(s, kmajor_desc(q_wg + blk * Tr::kBlockM * 64 + col), kmajor_desc(sk + blk * kBN * 64 + col),
                       ks > 0);
    }
    wgmma_commit();
  };
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
  auto issue_pv = [&](int stage) {
    const T* sv = smem_v + stage * Tr::kTileElems;
#pragma unroll
    for (int kk = 0; kk < 8; ++kk)
#pragma unroll
      for (int c = 0; c < Tr::kBlocks; ++c) wgmma_rs_n64<T>(o[c], pa[kk], mnmajor_desc(sv + c * kBN * 64 + kk * 16 * 64));
    wgmma_commit();
  };
  float f[2] = {1.f, 1.f};
  auto softmax = [&](int tile) {
    const int key0 = cta.cta_lo + tile * kBN;
    const bool masked = cta.masked(key0, kBN);
#pragma unroll
    for (int i = 0; i < 2; ++i)
      f[i] = softmax_row<16>([&](int nt, int e) -> float& { return s[4 * nt + 2 * i + e]; }, la, key0, tig,
                             row_pos[i], row_lo[i], row_hi[i], masked, m_run[i], l_run[i]);
  };
  auto rescale_o = [&] {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int c = 0; c < Tr::kBlocks; ++c)
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          o[c][4 * n + 2 * i] *= f[i];
          o[c][4 * n + 2 * i + 1] *= f[i];
        }
  };
  // Ping-pong: warpgroup cw issues its GEMMs after syncing on barrier 1 + cw and lets the other
  // go by arriving on the other's barrier. Each warpgroup has num_tiles + 1 issue slots; the
  // second starts the first off and skips its last arrival, so the counts match.
  const int my_bar = 1 + cw, other_bar = 2 - cw;
  int slots_left = num_tiles + 1;
  auto sched_wait = [&] { named_barrier_sync(my_bar, 256); };
  auto sched_arrive = [&] {
    if (--slots_left > 0 || cw == 0) named_barrier_arrive(other_bar, 256);
  };

  // Paged stages are written by cp.async (the generic proxy): made visible to wgmma (the async
  // proxy) by a proxy fence after the barrier's acquire.
  const bool gathered = p.paged;
  auto wait_stage = [&](const Pipeline<Tr::kStages>& pipe, const PipeState<Tr::kStages>& st) {
    pipe.consumer_wait(st);
    if (gathered) fence_proxy_async();
  };

  MBarrier::wait(q_full, 0);
  if (num_tiles > 0) {
    if (cw == 1) named_barrier_arrive(other_bar, 256);
    PipeState<Tr::kStages> sk, sv;
    wait_stage(pipe_k, sk);
    sched_wait();
    wgmma_fence();
    issue_s(sk.index);
    sched_arrive();
    wgmma_wait<0>();
    pipe_k.consumer_release(sk, lane);
    sk.advance();
    softmax(0);
    pack_p();
    for (int t = 1; t < num_tiles; ++t) {
      wait_stage(pipe_k, sk);
      sched_wait();
      wgmma_fence();
      issue_s(sk.index);
      rescale_o();
      wait_stage(pipe_v, sv);
      wgmma_fence();
      issue_pv(sv.index);
      sched_arrive();
      wgmma_wait<1>();  // S(t) is in; P(t-1)·V(t-1) may still run
      pipe_k.consumer_release(sk, lane);
      sk.advance();
      softmax(t);
      wgmma_wait<0>();
      pipe_v.consumer_release(sv, lane);
      sv.advance();
      pack_p();
    }
    rescale_o();
    wait_stage(pipe_v, sv);
    sched_wait();
    wgmma_fence();
    issue_pv(sv.index);
    sched_arrive();
    wgmma_wait<0>();
    pipe_v.consumer_release(sv, lane);
  }

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
cudaError_t launch_prefill_sm90_ws(const PrefillParams& p, const PrefillTmaMaps& maps, cudaStream_t stream) {
  using Tr = PrefillWsTraits<kHeadDim, T>;
  auto kernel = prefill_sm90_ws_kernel<kHeadDim, T>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (err != cudaSuccess) return err;
  const dim3 grid((p.max_seqlen_q + Tr::kBlockM - 1) / Tr::kBlockM, p.num_heads, p.batch);
  kernel<<<grid, Tr::kThreads, Tr::kSmemBytes, stream>>>(p, maps);
  return cudaGetLastError();
}

}  // namespace flashserve::cuda
