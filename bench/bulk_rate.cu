// How fast one SM's producer can bring scattered 16-token pages into shared memory, by three
// means (a diagnostic, not part of the library; issue 22's paged prefill): the question is
// whether a page layout stored pre-swizzled, so that one 1-d bulk copy (cp.async.bulk, no tensor
// map) puts a page's column block where wgmma reads it, would cost the TMA unit less than the
// 16-row tensor boxes that lost 20-27% at d 128 (bench/history/prefill.md "Session 40": ~120
// cycles a 2 KB box), and its producer fewer instructions than the row gather.
//
// Modes, each filling a ring of `stages` stages of `copies` copies of `bytes` from random 4 KB
// pages of a pool (pages by a hash of the copy's index), one CTA an SM, a producer warpgroup and a
// consumer warpgroup that only waits for each stage and frees it:
//   bulk   - thread 0 issues cp.async.bulk (1-d) of `bytes` a copy, completing on the stage's
//            transaction mbarrier;
//   tma    - thread 0 issues 2-d tensor boxes of bytes / 128 rows of 128 bytes (128-byte
//            swizzle), as the packed kernels' TMA loads, sized like a page's;
//   gather - the 128 producer threads issue cp.async of 16 bytes (the row gather's unit) and
//            arrive on the stage's barrier by cp.async.mbarrier.arrive.noinc;
//   tma_mc - tma in clusters of two CTAs on the same copies, each CTA issuing every other one
//            multicast to both (the boxes land in both CTAs' stages and complete on both
//            barriers); a stage is freed by both CTAs' consumers (an arrival on the peer's empty
//            barrier too). The grid: as many clusters as run at once. Its bytes a cycle an SM
//            against tma's say whether two CTAs that share K/V tiles (issue 22: d 256's and d 128's
//            packed tiles want ~22-29 bytes a cycle an SM of the ~31 measured) could each take
//            them faster than one alone.
// Then tma's 16 KB boxes from the L2 pool on 1/8 .. all of the SMs: whether the ~31 bytes a cycle
// an SM are the SM's limit (level at any count) or the L2's over all SMs (more an SM with fewer).
// Output, a line a configuration: GB/s over the grid, and cycles a copy an SM (the SM clock from
// clock64 on each CTA's thread 0, averaged), for a pool in the L2 (16 MB) and one far past it (2 GB).
// Bulk and tma copies are issued by warp 0's lanes, one a copy, after lane 0 sets the stage's
// bytes.
// Session 41 calls 6-7 (H100; bench/history/prefill.md "Session 41"): bulk and tma cost the same,
// from the L2 ~72 / 91 / 133 / 531 cycles a copy an SM at 1 / 2 / 4 / 16 KB (~31 bytes a cycle
// at 16 KB, 22 at 2 KB), so a pre-swizzled page layout read by 1-d bulk copies would pace d 128
// like the 16-row boxes did. The gather mode here read ~530 cycles a copy at 1 and 2 KB whatever
// the pool: a cost of this loop (one 16-byte copy a thread an iteration), not the kernels' row
// gather, which keeps pages at ~0.9 of packed; its numbers are not the row gather's.
//
// Build: the CMake target bulk_rate (build-gpu/tools/bulk_rate). Run: build-gpu/tools/bulk_rate, or
// `bulk_rate power SECONDS` under bench/power_bulk.py (the stretches for the board's power, below)
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "attention/cuda/device_utils.cuh"
#include "attention/cuda/sm90_pipeline.cuh"
#include "cuda_check.h"

using flashserve::cuda::cp_async_16;
using flashserve::cuda::MBarrier;
using flashserve::cuda::smem_u32;

namespace {

constexpr int kPageBytes = 4096;  // a kv head's slice of a 16-token page at d 128
enum Mode { kBulk = 0, kTma = 1, kGather = 2, kTmaMc = 3 };
const char* const kModeNames[] = {"bulk", "tma", "gather", "tma_mc"};

__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
__device__ __forceinline__ void tma_2d(uint32_t dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
      : "memory");
}

// tma_2d multicast to both CTAs of a cluster of two: the box lands at dst in each CTA's shared
// memory and completes its bytes on the barrier at the same offset in each.
__device__ __forceinline__ void tma_2d_mc(uint32_t dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "h"(static_cast<uint16_t>(3))
      : "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// An arrival on the barrier at bar's offset in the cluster's CTA `rank`.
__device__ __forceinline__ void arrive_remote(uint64_t* bar, uint32_t rank) {
  asm volatile(
      "{\n.reg .b32 a;\nmapa.shared::cluster.u32 a, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [a];\n}\n" ::"r"(smem_u32(bar)),
      "r"(rank)
      : "memory");
}

// Copy n (j in its stage): a page by a hash of n (no load: the kernels stage their page offsets
// a tile ahead; a page list read here put a load's latency before each gather copy, session 41
// call 6) and, within it, the part j % (4 KB / bytes) (a column block at d 128 for 2 KB).
__device__ __forceinline__ int64_t src_offset(uint32_t page_mask, int64_t n, int bytes, int j) {
  uint32_t h = static_cast<uint32_t>(n) * 0x9e3779b1u;
  h ^= h >> 15;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  return static_cast<int64_t>(h & page_mask) * kPageBytes + (bytes < kPageBytes ? (j % (kPageBytes / bytes)) * bytes : 0);
}

template <int kMode>
__global__ void __launch_bounds__(256, 1)
    fill_ring(const char* pool, uint32_t page_mask, int bytes, int copies, int stages, int iters,
              const __grid_constant__ CUtensorMap map, long long* cycles) {
  extern __shared__ unsigned char smem_raw[];
  // 1024-byte aligned: the 128-byte swizzle's pattern repeats every 1024 bytes.
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const int stage_bytes = bytes * copies;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + stages * stage_bytes);
  uint64_t* empty = full + stages;
  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < stages; ++s) {
      MBarrier::init(full + s, kMode == kGather ? 128 : 1);
      MBarrier::init(empty + s, kMode == kTmaMc ? 8 : 4);  // one arrival a consumer warp (of both CTAs)
    }
    MBarrier::fence_init();
  }
  __syncthreads();
  uint32_t rank = 0;
  if constexpr (kMode == kTmaMc) {
    rank = cluster_rank();
    cluster_sync();  // the peer's barriers are initialised before any copy or arrival reaches them
  }
  const long long t0 = clock64();
  const uint32_t base = smem_u32(smem);
  if (tid < 128) {  // the producer warpgroup
    for (int it = 0; it < iters; ++it) {
      const int s = it % stages;
      const uint32_t phase = (it / stages) & 1;
      const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * iters + it) * copies;
      if (kMode == kGather || tid < 32) MBarrier::wait<true>(empty + s, phase ^ 1);
      if constexpr (kMode == kGather) {
        // Each copy's page read once a thread (an L1 hit after the first), its 16-byte chunks
        // spread over the 128 threads: about the row gather's instructions a chunk.
        const int chunks = bytes / 16;
        for (int j = 0; j < copies; ++j) {
          const char* src = pool + src_offset(page_mask, n0 + j, bytes, j);
          for (int c = tid; c < chunks; c += 128)
            cp_async_16(smem + s * stage_bytes + j * bytes + c * 16, src + c * 16, true);
        }
        MBarrier::arrive_on_cp_async(full + s);
      } else if (tid < 32) {
        // Warp 0: lane 0 sets the stage's bytes, then lane j issues copy j (copies <= 32), so the
        // page reads' latency is paid once a stage, not once a copy.
        if (tid == 0) MBarrier::arrive_expect_tx(full + s, stage_bytes);
        __syncwarp();
        if (tid < copies) {
          const int j = tid;
          // kTmaMc: the pair's copies are the cluster's (n0 from the cluster's first CTA), and
          // each CTA issues every other one, multicast to both.
          const int64_t n = kMode == kTmaMc ? n0 - static_cast<int64_t>(rank) * iters * copies : n0;
          const int64_t off = src_offset(page_mask, n + j, bytes, j);
          const uint32_t dst = base + s * stage_bytes + j * bytes;
          if constexpr (kMode == kBulk) {
            bulk_copy(dst, pool + off, bytes, full + s);
          } else if constexpr (kMode == kTmaMc) {
            if (j % 2 == static_cast<int>(rank)) tma_2d_mc(dst, &map, full + s, 0, static_cast<int>(off / 128));
          } else {
            tma_2d(dst, &map, full + s, 0, static_cast<int>(off / 128));
          }
        }
      }
    }
  } else {  // the consumer warpgroup: wait for each stage, free it
    for (int it = 0; it < iters; ++it) {
      const int s = it % stages;
      MBarrier::wait(full + s, (it / stages) & 1);
      __syncwarp();
      if (tid % 32 == 0) {
        MBarrier::arrive(empty + s);
        if constexpr (kMode == kTmaMc) arrive_remote(empty + s, rank ^ 1);  // the peer writes here too
      }
    }
  }
  __syncthreads();
  if (tid == 0) cycles[blockIdx.x] = clock64() - t0;
  if constexpr (kMode == kTmaMc) cluster_sync();  // no CTA leaves while its peer may still arrive on it
}

// The pool as rows of 128 bytes (64 bf16), boxes of `rows` rows, 128-byte swizzle.
CUtensorMap pool_map(PFN_cuTensorMapEncodeTiled_v12000 encode, void* pool, int64_t pool_bytes, int rows) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {64, static_cast<cuuint64_t>(pool_bytes / 128)};
  const cuuint64_t strides[1] = {128};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(rows)};
  const cuuint32_t elem[2] = {1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, pool, dims, strides, box, elem,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) std::fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", static_cast<int>(r));
  return map;
}

struct Run {
  double gbps, cycles_per_copy, ms;
};

// fill_ring's launch: ctas CTAs of 256 threads, smem bytes, in clusters of two where `pairs`
// (attr: the cluster's attribute, kept by the caller while the config is used).
cudaLaunchConfig_t ring_config(int ctas, int smem, bool pairs, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(ctas);
  cfg.blockDim = dim3(256);
  cfg.dynamicSmemBytes = smem;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = 2;
  attr->val.clusterDim.y = attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pairs ? 1 : 0;
  return cfg;
}

template <int kMode>
Run run(const char* pool, uint32_t page_mask, int bytes, int copies, int stages, int iters, int sms,
        const CUtensorMap& map, long long* d_cycles) {
  const int smem = 1024 + stages * bytes * copies + 2 * stages * 8;
  CHECK(cudaFuncSetAttribute(fill_ring<kMode>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  cudaLaunchAttribute attr{};
  const cudaLaunchConfig_t cfg = ring_config(sms, smem, kMode == kTmaMc, &attr);
  CHECK(cudaLaunchKernelEx(&cfg, fill_ring<kMode>, pool, page_mask, bytes, copies, stages, iters / 4, map,
                           d_cycles));  // warm-up
  CHECK(cudaEventRecord(a));
  CHECK(cudaLaunchKernelEx(&cfg, fill_ring<kMode>, pool, page_mask, bytes, copies, stages, iters, map, d_cycles));
  CHECK(cudaEventRecord(b));
  CHECK(cudaEventSynchronize(b));
  CHECK(cudaGetLastError());
  float ms = 0.f;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  std::vector<long long> cyc(sms);
  CHECK(cudaMemcpy(cyc.data(), d_cycles, sms * sizeof(long long), cudaMemcpyDeviceToHost));
  double mean = 0;
  for (long long c : cyc) mean += static_cast<double>(c) / sms;
  const double copies_total = static_cast<double>(iters) * copies;  // a CTA's
  return {static_cast<double>(sms) * copies_total * bytes / (ms * 1e6), mean / copies_total, ms};
}

// Every SM's threads spin on clock64 for `cycles`: the power stretches' baseline (SMs busy at the
// clock the copies run at, no bytes moved).
__global__ void __launch_bounds__(256, 1) spin(long long cycles, long long* sink) {
  const long long t0 = clock64();
  long long t = t0;
  while (t - t0 < cycles) t = clock64();
  if (t == 0) *sink = t;  // never: keeps the loop
}

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// `bulk_rate power SECONDS` (bench/power_bulk.py samples the board meanwhile): stretches of about
// SECONDS each of 16 KB boxes back to back, tma on every SM and tma_mc, from the L2 pool and from
// the 2 GB one, and the spin baseline; a line a stretch's start and end (wall-clock seconds) with
// its bytes a second received. The question (session 50): the energy of a byte from the L2 into
// shared memory, and so what halving the L2's reads by multicast could give back to the clock
// under the 700 W cap that every prefill row runs at.
int power_stretches(double seconds, int sms, int mc_ctas, PFN_cuTensorMapEncodeTiled_v12000 encode, char* pool,
                    const int64_t* pool_bytes, long long* d_cycles) {
  for (int p = 0; p < 2; ++p) {
    const CUtensorMap map = pool_map(encode, pool, pool_bytes[p], 128);
    const uint32_t page_mask = static_cast<uint32_t>(pool_bytes[p] / kPageBytes) - 1;
    for (int mode : {kTma, kTmaMc}) {
      const double t0 = now_s();
      std::printf("stretch %s_%lldM begin %.3f\n", kModeNames[mode], static_cast<long long>(pool_bytes[p] >> 20), t0);
      std::fflush(stdout);
      double bytes = 0, secs = 0;
      while (now_s() - t0 < seconds) {
        const int ctas = mode == kTma ? sms : mc_ctas;
        const Run r = mode == kTma ? run<kTma>(pool, page_mask, 16384, 2, 4, 30000, ctas, map, d_cycles)
                                   : run<kTmaMc>(pool, page_mask, 16384, 2, 4, 30000, ctas, map, d_cycles);
        bytes += r.gbps * r.ms * 1e6;
        secs += r.ms * 1e-3;
      }
      std::printf("stretch %s_%lldM end %.3f %.0f GB/s\n", kModeNames[mode], static_cast<long long>(pool_bytes[p] >> 20),
                  now_s(), bytes / secs * 1e-9);
      std::fflush(stdout);
    }
  }
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const double t0 = now_s();
  std::printf("stretch spin begin %.3f\n", t0);
  std::fflush(stdout);
  while (now_s() - t0 < seconds) {
    spin<<<sms, 256>>>(static_cast<long long>(clock_khz) * 20, d_cycles);  // ~20 ms a launch
    CHECK(cudaDeviceSynchronize());
  }
  std::printf("stretch spin end %.3f 0 GB/s\n", now_s());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  const auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  const int64_t pool_bytes[2] = {int64_t{16} << 20, int64_t{2} << 30};
  char* pool = nullptr;
  CHECK(cudaMalloc(&pool, pool_bytes[1]));
  CHECK(cudaMemset(pool, 0x3c, pool_bytes[1]));  // the bytes' values do not matter to a copy
  long long* d_cycles = nullptr;
  CHECK(cudaMalloc(&d_cycles, sms * sizeof(long long)));
  // tma_mc's grid: as many clusters of two as can run at once (the largest smem configuration's).
  int mc_ctas = 0;
  {
    const int smem = 1024 + 4 * 16384 * 2 + 2 * 4 * 8;
    CHECK(cudaFuncSetAttribute(fill_ring<kTmaMc>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaLaunchAttribute attr{};
    const cudaLaunchConfig_t cfg = ring_config(sms & ~1, smem, true, &attr);
    int clusters = 0;
    CHECK(cudaOccupancyMaxActiveClusters(&clusters, fill_ring<kTmaMc>, &cfg));
    mc_ctas = 2 * clusters < sms ? 2 * clusters : sms & ~1;
    std::printf("tma_mc: clusters of two CTAs, %d CTAs at once (%d SMs)\n", mc_ctas, sms);
  }
  if (argc == 3 && std::string(argv[1]) == "power")
    return power_stretches(std::atof(argv[2]), sms, mc_ctas, encode, pool, pool_bytes, d_cycles);
  std::printf("%-7s %8s %6s %6s %6s %9s %9s %14s\n", "mode", "pool", "bytes", "copies", "stages", "ms", "GB/s",
              "cycles/copy/SM");
  for (int p = 0; p < 2; ++p) {
    const uint32_t page_mask = static_cast<uint32_t>(pool_bytes[p] / kPageBytes) - 1;  // a power of two
    // (bytes, copies a stage, stages): 2 KB copies (a 16-token page's column block at d 128, a
    // whole page-head at d 64) in stages of 32 KB; 1, 4 and 16 KB for the size curve; 128-row
    // boxes (16 KB) as the packed kernels' TMA loads.
    const int configs[][3] = {{2048, 16, 4}, {2048, 16, 2}, {1024, 32, 4}, {4096, 8, 4}, {16384, 2, 4}};
    for (const auto& c : configs) {
      const int bytes = c[0], copies = c[1], stages = c[2];
      const int iters = 3000;
      const CUtensorMap map = pool_map(encode, pool, pool_bytes[p], bytes / 128);
      for (int mode = 0; mode < 4; ++mode) {
        if ((mode == kTma || mode == kTmaMc) && bytes / 128 > 256) continue;
        Run r{};
        if (mode == kBulk) r = run<kBulk>(pool, page_mask, bytes, copies, stages, iters, sms, map, d_cycles);
        if (mode == kTma) r = run<kTma>(pool, page_mask, bytes, copies, stages, iters, sms, map, d_cycles);
        if (mode == kGather) r = run<kGather>(pool, page_mask, bytes, copies, stages, iters, sms, map, d_cycles);
        if (mode == kTmaMc) r = run<kTmaMc>(pool, page_mask, bytes, copies, stages, iters, mc_ctas, map, d_cycles);
        std::printf("%-7s %7lldM %6d %6d %6d %9.3f %9.0f %14.1f\n", kModeNames[mode],
                    static_cast<long long>(pool_bytes[p] >> 20), bytes, copies, stages, r.ms, r.gbps,
                    r.cycles_per_copy);
      }
    }
  }
  // Fewer SMs (16 KB boxes from the L2 pool, tma): whether an SM's ~31 bytes a cycle is its own
  // limit (the same at any count) or the L2's over all SMs (more an SM with fewer).
  {
    const CUtensorMap map = pool_map(encode, pool, pool_bytes[0], 128);
    const uint32_t page_mask = static_cast<uint32_t>(pool_bytes[0] / kPageBytes) - 1;
    for (int n : {sms / 8, sms / 4, sms / 2, 3 * sms / 4, sms}) {
      const Run r = run<kTma>(pool, page_mask, 16384, 2, 4, 3000, n, map, d_cycles);
      std::printf("tma on %3d SMs: 16 KB boxes from the L2 pool, %9.0f GB/s, %7.1f cycles a copy an SM\n", n, r.gbps,
                  r.cycles_per_copy);
    }
  }
  CHECK(cudaFree(pool));
  CHECK(cudaFree(d_cycles));
  return 0;
}
