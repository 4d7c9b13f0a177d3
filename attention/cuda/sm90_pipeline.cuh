// Hopper (sm_90) synchronisation for warp-specialized kernels: transaction mbarriers, the TMA
// tensor copy that completes on them, a ring of stages with full/empty barriers as a named
// type (producer_acquire / consumer_wait / consumer_release), named barriers between
// warpgroups, and setmaxnreg. Device code; the bodies are sm_90 PTX.
//
// Phases: an mbarrier completes a phase when its pending arrivals reach zero (and, for a
// transaction barrier, its expected bytes have landed); waiting on parity P waits for the phase
// of parity P to complete, and a fresh barrier counts its (never-run) phase of parity 1 as
// complete, so a producer waits on an empty barrier with the parity opposite the consumer's and
// its first pass through the ring does not block.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace flashserve::cuda {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

struct MBarrier {
  __device__ static void init(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
  }
  // Makes initialised barriers visible to the other threads and to the async proxy (TMA).
  __device__ static void fence_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
  __device__ static void arrive(uint64_t* bar) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(smem_u32(bar)) : "memory");
  }
  // One arrival that also expects `bytes` more of transactions (TMA copies) in this phase.
  __device__ static void arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(smem_u32(bar)),
                 "r"(bytes)
                 : "memory");
  }
  // An arrival made when this thread's earlier cp.async copies have landed; .noinc: the
  // barrier's count must include it.
  __device__ static void arrive_on_cp_async(uint64_t* bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar)) : "memory");
  }
  // kParked: each try_wait carries a suspend-time hint, so it may park the thread until the phase
  // completes (or kParkNs pass) instead of returning after the hardware's short default limit.
  // For the producer's waits on empty stages, usually long: its retry loop ran ~77 times a tile
  // at d 128 1x16k (the producer issued 117M of the kernel's 1.22G instructions on ncu, issue
  // slots taken from the consumer warps on its sub-partition; 29M with the hint:
  // bench/history/prefill.md "prefill v4.11").
  static constexpr uint32_t kParkNs = 1000000;  // 1 ms: far past any stage's wait
  template <bool kParked = false>
  __device__ static void wait(uint64_t* bar, uint32_t parity) {
    const uint32_t addr = smem_u32(bar);
    uint32_t done = 0;
    do {
      if constexpr (kParked) {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(addr), "r"(parity), "n"(kParkNs)
            : "memory");
      } else {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(addr), "r"(parity)
            : "memory");
      }
    } while (!done);
  }
};

// A 3-d box of a tensor map into shared memory (coordinates innermost first), completing as
// transaction bytes on `bar`, its L2 lines kept or evicted by `policy` (createpolicy's:
// l2_evict_last_policy, l2_evict_normal_policy for none). Elements outside the tensor land as
// zeros and count as bytes.
__device__ __forceinline__ void tma_load_3d(void* smem_dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1,
                                            int c2, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint "
      "[%0], [%1, {%3, %4, %5}], [%2], %6;\n" ::"r"(smem_u32(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2), "l"(policy)
      : "memory");
}
// tma_load_3d's 4-d box.
__device__ __forceinline__ void tma_load_4d(void* smem_dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1,
                                            int c2, int c3, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint "
      "[%0], [%1, {%3, %4, %5, %6}], [%2], %7;\n" ::"r"(smem_u32(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "l"(policy)
      : "memory");
}
// A 3-d box of shared memory (the tensor map's box and swizzle) into a tensor map's tensor
// (coordinates innermost first; elements outside the tensor are not written), in this thread's
// current bulk group. The shared memory's writers fence it for the async proxy
// (fence_proxy_async) and sync before; commit, then wait (bulk_wait_read) before it is written again.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, const void* smem_src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_u32(smem_src)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Until at most kPending of this thread's bulk groups still read their shared memory (read), or
// are not complete (bulk_wait: their writes done and visible).
template <int kPending>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}
template <int kPending>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
}
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Named barriers (ids 1..15; 0 is __syncthreads'): `threads` in all, a multiple of 32.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// A warpgroup's register budget: every warp of the warpgroup executes it.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// A position in a ring of kStages: the stage and the parity of its current pass.
template <int kStages>
struct PipeState {
  int index = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++index == kStages) {
      index = 0;
      phase ^= 1;
    }
  }
};

// A ring of kStages buffers between one producer and the consumers: full[s] completes when
// stage s has landed (TMA bytes, or the producer threads' cp.async arrivals), empty[s] when
// every consumer warp has released it.
template <int kStages>
struct Pipeline {
  uint64_t* full;   // [kStages]
  uint64_t* empty;  // [kStages]

  __device__ void init(uint32_t full_count, uint32_t empty_count) const {
    for (int s = 0; s < kStages; ++s) {
      MBarrier::init(full + s, full_count);
      MBarrier::init(empty + s, empty_count);
    }
  }
  __device__ __forceinline__ void producer_acquire(const PipeState<kStages>& st) const {
    MBarrier::wait<true>(empty + st.index, st.phase ^ 1);
  }
  __device__ __forceinline__ uint64_t* full_barrier(const PipeState<kStages>& st) const { return full + st.index; }
  __device__ __forceinline__ void consumer_wait(const PipeState<kStages>& st) const {
    MBarrier::wait(full + st.index, st.phase);
  }
  // One lane a consumer warp, after the warp's reads (wgmma retired) of the stage.
  __device__ __forceinline__ void consumer_release(const PipeState<kStages>& st, int lane) const {
    if (lane == 0) MBarrier::arrive(empty + st.index);
  }
};

}  // namespace flashserve::cuda
