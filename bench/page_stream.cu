// A copies-only stream over a paged K/V pool (a diagnostic, not part of the library): how fast the
// GPU reads the (64,8k) decode row's bytes the way the decode kernel copies them (cp.async,
// 16-byte chunks, 3 stages of 64 key rows of K and of V a CTA, 128 threads, 2 CTAs an SM; unlike
// the kernel, no evict-first L2 hint and the page ids staged in shared memory first), for
// different shares of a page's heads a CTA reads.
//
// Pools [blocks][kv_heads][block_size][head_dim] (bf16-sized elements, random bits), one K and one
// V, each sequence's block table a random permutation of the pool (fixed seed) or in order. A CTA
// reads `heads` consecutive kv heads of one sequence over a 1/splits share of its keys: each page
// visit is heads × 4 KB contiguous (16 keys × 256 bytes a head). Output: GB/s of K/V read (the
// staged page ids: only the K/V stream is measured).
//
// Build: the CMake target page_stream (scripts/build_gpu.sh builds it into build-gpu/tools/)
// Run:   build-gpu/tools/page_stream   (prints one line a configuration)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_check.h"

constexpr int kThreads = 128, kStages = 3, kTileRows = 64, kRowBytes = 256, kBlock = 16, kKvHeads = 8;
constexpr int kHeadBytes = kBlock * kRowBytes;           // 4 KB: one head's slice of a page
constexpr int kBlockBytes = kKvHeads * kHeadBytes;       // 32 KB
constexpr int kStageBytes = kTileRows * kRowBytes;       // 16 KB of K (and of V)

__device__ __forceinline__ void cp16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

// grid: (splits, kv_heads / heads, batch); a tile is kTileRows / heads keys × heads heads.
__global__ void __launch_bounds__(kThreads, 2)
    stream_pages(const char* k, const char* v, const int32_t* table, int pages, int heads, bool kv_apart,
                 int64_t* sink) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int tid = threadIdx.x;
  const int b = blockIdx.z, g = blockIdx.y, splits = gridDim.x;
  const int keys = pages * kBlock, lo = blockIdx.x * (keys / splits), hi = lo + keys / splits;
  const int tile_keys = kTileRows / heads, tiles = (hi - lo) / tile_keys;
  // The range's page ids into shared memory first (the kernel reads them a tile ahead instead):
  // the copies never wait on a table read.
  int32_t* tb = reinterpret_cast<int32_t*>(smem + kStages * 2 * kStageBytes);
  for (int i = tid; i < pages; i += kThreads) tb[i] = table[static_cast<int64_t>(b) * pages + i];
  __syncthreads();
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  // A thread's chunk i of the stage: its byte offset in either pool.
  auto offset = [&](int t, int i) {
    const int c = tid + i * kThreads;
    const int row = c / 16, chunk = c % 16;
    const int h = row / tile_keys, key = lo + t * tile_keys + row % tile_keys;
    return static_cast<int64_t>(tb[key / kBlock]) * kBlockBytes + (g * heads + h) * kHeadBytes +
           (key % kBlock) * kRowBytes + chunk * 16;
  };
  constexpr int kPasses = kStageBytes / 16 / kThreads;  // 8 passes of 2 KB
  auto issue = [&](int t) {
    const uint32_t st = base + (t % kStages) * 2 * kStageBytes;
    if (kv_apart) {  // every K chunk of the stage, then every V chunk
#pragma unroll
      for (int i = 0; i < kPasses; ++i) cp16(st + (tid + i * kThreads) * 16, k + offset(t, i));
#pragma unroll
      for (int i = 0; i < kPasses; ++i) cp16(st + kStageBytes + (tid + i * kThreads) * 16, v + offset(t, i));
    } else {  // as the kernel: a chunk of K, then the same chunk of V
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        const int64_t off = offset(t, i);
        cp16(st + (tid + i * kThreads) * 16, k + off);
        cp16(st + kStageBytes + (tid + i * kThreads) * 16, v + off);
      }
    }
  };
  for (int t = 0; t < kStages - 1; ++t) {
    if (t < tiles) issue(t);
    asm volatile("cp.async.commit_group;\n");
  }
  int64_t acc = 0;
  for (int t = 0; t < tiles; ++t) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2));
    __syncthreads();
    if (t + kStages - 1 < tiles) issue(t + kStages - 1);
    asm volatile("cp.async.commit_group;\n");
    const int st = (t % kStages) * 2 * kStageBytes;
    acc += reinterpret_cast<const int*>(smem + st)[tid] ^ reinterpret_cast<const int*>(smem + st + kStageBytes)[tid];
  }
  if (acc == 0x7fffffff) sink[0] = acc;  // keeps the reads; never true on random data in practice
}

int main() {
  const int batch = 64, pages = 512;  // (64,8k), page 16
  const int64_t blocks = static_cast<int64_t>(batch) * pages;
  const int64_t pool = blocks * kBlockBytes;
  char *k, *v;
  int32_t* table;
  int64_t* sink;
  CHECK(cudaMalloc(&k, pool));
  CHECK(cudaMalloc(&v, pool));
  CHECK(cudaMalloc(&table, blocks * 4));
  CHECK(cudaMalloc(&sink, 8));
  {  // random bits, never zeros
    std::vector<uint32_t> h(pool / 4);
    std::mt19937 rng(7);
    for (auto& x : h) x = rng() | 1u;
    CHECK(cudaMemcpy(k, h.data(), pool, cudaMemcpyHostToDevice));
    for (auto& x : h) x = rng() | 1u;
    CHECK(cudaMemcpy(v, h.data(), pool, cudaMemcpyHostToDevice));
  }
  // scattered: the pool's blocks in a random permutation (the decode benchmark's tables); sorted:
  // each sequence's same random blocks visited in ascending order (every CTA sweeps the pool
  // from its start, so the CTAs in flight read from a narrow window of it); sequential: each
  // sequence's blocks consecutive.
  std::vector<int32_t> perm(blocks), sorted, seq(blocks);
  std::iota(seq.begin(), seq.end(), 0);
  perm = seq;
  std::shuffle(perm.begin(), perm.end(), std::mt19937(11));
  sorted = perm;
  for (int b = 0; b < batch; ++b) std::sort(sorted.begin() + b * pages, sorted.begin() + (b + 1) * pages);
  const std::vector<int32_t>* orders[] = {&perm, &sorted, &seq};
  const char* order_names[] = {"scattered", "sorted", "sequential"};
  const int smem = kStages * 2 * kStageBytes + pages * 4;
  CHECK(cudaFuncSetAttribute(stream_pages, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  struct Cfg { int heads, splits; bool kv_apart; };
  // heads × splits: 512, 512, 256, ... CTAs; the last: all of a stage's K copies before its V's
  const Cfg cfgs[] = {{1, 1, false}, {2, 2, false}, {2, 1, false}, {4, 4, false},
                      {8, 8, false}, {1, 2, false}, {1, 1, true}};
  std::printf("order      heads splits  ctas   GB/s (median of 5 x 10 calls)  copies\n");
  for (int order = 0; order < 3; ++order) {
    CHECK(cudaMemcpy(table, orders[order]->data(), blocks * 4, cudaMemcpyHostToDevice));
    for (int rep = 0; rep < 2; ++rep) {
      for (const Cfg& c : cfgs) {
        const dim3 grid(c.splits, kKvHeads / c.heads, batch);
        auto launch = [&] { stream_pages<<<grid, kThreads, smem>>>(k, v, table, pages, c.heads, c.kv_apart, sink); };
        for (int w = 0; w < 3; ++w) launch();
        CHECK(cudaGetLastError());
        std::vector<float> ms;
        for (int r = 0; r < 5; ++r) {
          CHECK(cudaEventRecord(e0));
          for (int i = 0; i < 10; ++i) launch();
          CHECK(cudaEventRecord(e1));
          CHECK(cudaEventSynchronize(e1));
          float t;
          CHECK(cudaEventElapsedTime(&t, e0, e1));
          ms.push_back(t / 10);
        }
        std::sort(ms.begin(), ms.end());
        std::printf("%-10s %5d %6d %5d %7.0f  %s\n", order_names[order], c.heads, c.splits,
                    grid.x * grid.y * grid.z, 2.0 * pool / (ms[2] * 1e-3) / 1e9,
                    c.kv_apart ? "K then V" : "K, V interleaved");
      }
    }
  }
  return 0;
}
