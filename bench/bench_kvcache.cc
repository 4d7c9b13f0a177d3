// KV cache benchmark: the block manager's throughput on the CPU (slot allocations per second
// for decode steps, sequence admissions with prefix hits, raw pool operations), CPU append
// bandwidth, and on a GPU (when there is one) the append and copy-blocks bandwidth.
// Usage: bench_kvcache [--quick]
#if FLASHSERVE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_device.h"
#include "kvcache/kv_cache_manager.h"
#include "kvcache/kv_storage.h"

using namespace flashserve;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

struct Row {
  std::string what;
  double value;
  const char* unit;
};

void die(const Status& st) {
  std::fprintf(stderr, "bench_kvcache: %s\n", st.to_string().c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::vector<Row> rows;

  {  // Decode steps: 256 sequences of 1000-token prompts, one new token each per step.
    KVCacheConfig cfg;
    cfg.num_blocks = 256 * 200;
    cfg.block_size = 16;
    KVCacheManager m(cfg);
    std::vector<int32_t> prompt(1000);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(i * 7 % 32000);
    std::vector<std::vector<int32_t>> tokens(256);  // each sequence's, the caller's (the manager keeps none)
    std::vector<int64_t> slots;
    std::vector<BlockCopy> copies;
    for (int s = 0; s < 256; ++s) {
      prompt[0] = s;  // distinct sequences
      int32_t cached;
      if (!m.add_sequence(s, prompt.data(), 1000, 0, &cached).ok()) return 1;
      if (!m.allocate_slots(s, prompt, 1000, &slots, &copies).ok()) return 1;
      tokens[s] = prompt;
    }
    const int steps = quick ? 200 : 1000;
    const auto t0 = clock_type::now();
    for (int step = 0; step < steps; ++step) {
      slots.clear();
      for (int s = 0; s < 256; ++s) {
        tokens[s].push_back(step);
        const Status st = m.allocate_slots(s, tokens[s], 1, &slots, &copies);
        if (!st.ok()) die(st);
      }
    }
    rows.push_back({"decode slot allocations (256 seqs)", 256.0 * steps / seconds_since(t0) / 1e6, "M/s"});
  }
  {  // Admissions with a shared 512-token prefix, 640-token prompts, then free.
    KVCacheConfig cfg;
    cfg.num_blocks = 4096;
    cfg.block_size = 16;
    KVCacheManager m(cfg);
    std::vector<int32_t> prompt(640);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(i);
    std::vector<int64_t> slots;
    std::vector<BlockCopy> copies;
    const int n = quick ? 2000 : 10000;
    const auto t0 = clock_type::now();
    for (int s = 0; s < n; ++s) {
      for (int i = 512; i < 640; ++i) prompt[i] = s + i;
      int32_t cached;
      if (!m.add_sequence(s, prompt.data(), 640, 0, &cached).ok()) return 1;
      slots.clear();
      if (!m.allocate_slots(s, prompt, 640 - cached, &slots, &copies).ok()) return 1;
      if (!m.free_sequence(s).ok()) return 1;
    }
    rows.push_back({"admit+prefill slots+free (640 tok, 512 cached)", n / seconds_since(t0) / 1e3, "k seq/s"});
    rows.push_back({"  prefix hit rate", 100.0 * m.stats().prefix_hits / m.stats().prefix_queries, "%"});
  }
  {  // Raw pool: allocate 64, release 64.
    BlockPool pool(100000, 16, true);
    std::vector<int32_t> got;
    const int n = quick ? 20000 : 100000;
    const auto t0 = clock_type::now();
    for (int i = 0; i < n; ++i) {
      got.clear();
      if (!pool.allocate(64, &got).ok() || !pool.release(got.data(), 64).ok()) return 1;
    }
    rows.push_back({"pool allocate+release", 2.0 * 64 * n / seconds_since(t0) / 1e6, "M blocks/s"});
  }

  // Append bandwidth: 4096 new tokens, 8 kv heads, head_dim 128, bf16, 32 layers in one call.
  KVStorageShape sh;
  sh.num_layers = 32;
  sh.num_blocks = 4096 / 16 + 1;
  sh.num_kv_heads = 8;
  sh.block_size = 16;
  sh.head_dim = 128;
  sh.dtype = DType::kBFloat16;
  const int64_t n = 4096;
  const int64_t elems = sh.num_layers * n * sh.num_kv_heads * sh.head_dim;
  std::vector<uint16_t> k(static_cast<size_t>(elems)), v(static_cast<size_t>(elems));
  std::mt19937 rng(1);
  for (auto& x : k) x = float_to_bf16(std::normal_distribution<float>()(rng));
  for (auto& x : v) x = float_to_bf16(std::normal_distribution<float>()(rng));
  std::vector<int64_t> slots(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) slots[i] = 16 + (i * 4099) % n;  // scattered, block 0 unused
  const double moved = 2.0 * 2 * elems * 2;  // K and V, read + written
  {
    KVStorage cpu;
    if (const Status st = KVStorage::create(Device::kCPU, sh, &cpu); !st.ok()) die(st);
    const int reps = quick ? 3 : 10;
    const auto t0 = clock_type::now();
    for (int r = 0; r < reps; ++r)
      if (!cpu.append(0, sh.num_layers, k.data(), v.data(), slots.data(), n).ok()) return 1;
    rows.push_back({"CPU append 4096 tok x 32 layers (read+write)", moved * reps / seconds_since(t0) / 1e9, "GB/s"});
  }
#if FLASHSERVE_WITH_CUDA
  if (cuda_available()) {
    KVStorage gpu;
    if (const Status st = KVStorage::create(Device::kCUDA, sh, &gpu); !st.ok()) die(st);
    void *dk, *dv, *ds;
    cudaMalloc(&dk, elems * 2);
    cudaMalloc(&dv, elems * 2);
    cudaMalloc(&ds, n * 8);
    cudaMemcpy(dk, k.data(), elems * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dv, v.data(), elems * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(ds, slots.data(), n * 8, cudaMemcpyHostToDevice);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    auto time_it = [&](auto&& fn, int reps) {
      fn();
      cudaDeviceSynchronize();
      cudaEventRecord(e0);
      for (int r = 0; r < reps; ++r) fn();
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      return ms * 1e-3 / reps;
    };
    const double t_append = time_it(
        [&] {
          if (!gpu.append(0, sh.num_layers, dk, dv, static_cast<const int64_t*>(ds), n, nullptr).ok()) std::exit(1);
        },
        50);
    rows.push_back({"GPU append 4096 tok x 32 layers (read+write)", moved / t_append / 1e9, "GB/s"});
    rows.push_back({"  time per call", t_append * 1e6, "us"});
    std::vector<BlockCopy> pairs;
    for (int i = 0; i < 128; ++i) pairs.push_back({1 + i, 129 + i});
    const double t_copy = time_it(
        [&] {
          if (!gpu.copy_blocks(pairs.data(), 128, nullptr).ok()) std::exit(1);
        },
        50);
    const double copy_bytes = 2.0 * 128 * 2 * sh.num_layers * sh.block_elems() * 2;
    rows.push_back({"GPU copy_blocks 128 pairs x 32 layers (r+w)", copy_bytes / t_copy / 1e9, "GB/s"});
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
      std::fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));
      return 1;
    }
  } else {
    std::printf("GPU rows skipped: %s\n", cuda_unavailable_reason().c_str());
  }
#else
  std::printf("GPU rows skipped: %s\n", cuda_unavailable_reason().c_str());
#endif

  std::printf("\nflashserve KV cache benchmark\n");
  for (const Row& r : rows) std::printf("%-50s %12.2f %s\n", r.what.c_str(), r.value, r.unit);
  return 0;
}
