// KVStorage on the GPU (label gpu): append and copy_blocks produce, byte for byte, what the
// CPU storage produces from the same inputs; bad slots are skipped on the device, bad ids are
// errors; cache sizing from the device's memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kvcache/kv_storage.h"
#include "kvcache/sizing.h"
#include "tests/cuda_support.h"

namespace flashserve::test {
namespace {

KVStorageShape shape(DType t, int bs) {
  KVStorageShape s;
  s.num_layers = 3;
  s.num_blocks = 37;
  s.num_kv_heads = 4;
  s.block_size = bs;
  s.head_dim = 128;
  s.dtype = t;
  return s;
}

std::vector<uint16_t> random_halfs(size_t n, uint32_t seed, DType t) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = t == DType::kFloat16 ? float_to_fp16(normal(rng)) : float_to_bf16(normal(rng));
  return v;
}

TEST(KVStorageCuda, AppendAndCopyBlocksMatchCpu) {
  FS_SKIP_WITHOUT_CUDA();
  for (DType t : {DType::kBFloat16, DType::kFloat16}) {
    for (int bs : {1, 16, 64}) {
      const KVStorageShape sh = shape(t, bs);
      KVStorage cpu, gpu;
      ASSERT_TRUE(KVStorage::create(Device::kCPU, sh, &cpu).ok());
      ASSERT_TRUE(KVStorage::create(Device::kCUDA, sh, &gpu).ok());
      // 300 tokens into distinct random slots (a few padding -1), all layers in one call.
      const int64_t capacity = int64_t{sh.num_blocks} * bs;
      const int64_t n = std::min<int64_t>(300, capacity);
      std::vector<int64_t> slots(static_cast<size_t>(capacity));
      std::iota(slots.begin(), slots.end(), 0);
      std::mt19937 rng(bs);
      std::shuffle(slots.begin(), slots.end(), rng);
      slots.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; i += 37) slots[i] = -1;
      const size_t elems = static_cast<size_t>(sh.num_layers * n * sh.num_kv_heads * sh.head_dim);
      const auto k = random_halfs(elems, 1, t), v = random_halfs(elems, 2, t);
      ASSERT_TRUE(cpu.append(0, sh.num_layers, k.data(), v.data(), slots.data(), n).ok());
      DeviceBuffer dk = to_device(k), dv = to_device(v), ds = to_device(slots);
      ASSERT_TRUE(gpu.append(0, sh.num_layers, dk.get(), dv.get(), ds.as<int64_t>(), n, nullptr).ok());
      // A second call for layer 1 alone, then copy-on-write pairs.
      const auto k1 = random_halfs(static_cast<size_t>(n * sh.num_kv_heads * sh.head_dim), 3, t);
      ASSERT_TRUE(cpu.append(1, 1, k1.data(), k1.data(), slots.data(), n).ok());
      DeviceBuffer dk1 = to_device(k1);
      ASSERT_TRUE(gpu.append(1, 1, dk1.get(), dk1.get(), ds.as<int64_t>(), n, nullptr).ok());
      const std::vector<BlockCopy> pairs = {{3, 30}, {5, 6}, {0, 36}, {12, 2}};
      ASSERT_TRUE(cpu.copy_blocks(pairs.data(), 4).ok());
      ASSERT_TRUE(gpu.copy_blocks(pairs.data(), 4, nullptr).ok());
      FS_ASSERT_CUDA(cudaDeviceSynchronize());
      std::vector<char> host(static_cast<size_t>(sh.bytes()));
      FS_ASSERT_CUDA(cudaMemcpy(host.data(), gpu.k_pages(0), host.size(), cudaMemcpyDeviceToHost));
      EXPECT_EQ(std::memcmp(host.data(), cpu.k_pages(0), host.size()), 0) << dtype_name(t) << " block_size " << bs;
    }
  }
}

// copy_blocks on two streams back to back: the pairs' staging is the storage's one device buffer,
// so the second call must not overwrite it before the first call's kernel has read it (it waits
// for that kernel's event). The first call's kernel is long (every layer of 400 pairs), the
// second's pairs differ and copy to other blocks; the result must be the CPU's, pair for pair.
TEST(KVStorageCuda, CopyBlocksOnTwoStreams) {
  FS_SKIP_WITHOUT_CUDA();
  KVStorageShape sh = shape(DType::kBFloat16, 16);
  sh.num_layers = 8;
  sh.num_blocks = 1024;
  KVStorage cpu, gpu;
  ASSERT_TRUE(KVStorage::create(Device::kCPU, sh, &cpu).ok());
  ASSERT_TRUE(KVStorage::create(Device::kCUDA, sh, &gpu).ok());
  std::vector<uint16_t> pool(static_cast<size_t>(sh.bytes() / 2));  // any bits: the copies are compared bytewise
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (auto& e : pool) e = static_cast<uint16_t>((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 48);
  std::memcpy(cpu.k_pages(0), pool.data(), static_cast<size_t>(sh.bytes()));
  FS_ASSERT_CUDA(cudaMemcpy(gpu.k_pages(0), pool.data(), static_cast<size_t>(sh.bytes()), cudaMemcpyHostToDevice));
  std::vector<BlockCopy> first, second;
  for (int i = 0; i < 400; ++i) first.push_back({i, 512 + i});
  for (int i = 0; i < 64; ++i) second.push_back({400 + i, 960 + i});
  cudaStream_t a = nullptr, b = nullptr;
  FS_ASSERT_CUDA(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  FS_ASSERT_CUDA(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  std::vector<char> host(static_cast<size_t>(sh.bytes()));
  for (int round = 0; round < 4; ++round) {  // (the first round makes the event)
    ASSERT_TRUE(cpu.copy_blocks(first.data(), 400).ok());
    ASSERT_TRUE(cpu.copy_blocks(second.data(), 64).ok());
    ASSERT_TRUE(gpu.copy_blocks(first.data(), 400, a).ok());
    ASSERT_TRUE(gpu.copy_blocks(second.data(), 64, b).ok());
    FS_ASSERT_CUDA(cudaDeviceSynchronize());
    FS_ASSERT_CUDA(cudaMemcpy(host.data(), gpu.k_pages(0), host.size(), cudaMemcpyDeviceToHost));
    EXPECT_EQ(std::memcmp(host.data(), cpu.k_pages(0), host.size()), 0) << "round " << round;
    for (auto& p : first) p.src = (p.src + 1) % 400;  // other sources the next round
  }
  FS_ASSERT_CUDA(cudaStreamDestroy(a));
  FS_ASSERT_CUDA(cudaStreamDestroy(b));
}

TEST(KVStorageCuda, BadSlotsNeverWriteOutsideThePool) {
  FS_SKIP_WITHOUT_CUDA();
  const KVStorageShape sh = shape(DType::kBFloat16, 16);
  KVStorage gpu;
  ASSERT_TRUE(KVStorage::create(Device::kCUDA, sh, &gpu).ok());
  const std::vector<int64_t> slots = {int64_t{1} << 40, -5, 17};
  EXPECT_EQ(gpu.check_slots(slots.data(), 3).code(), StatusCode::kOutOfRange);
  const auto k = random_halfs(static_cast<size_t>(3 * sh.num_kv_heads * sh.head_dim), 4, sh.dtype);
  DeviceBuffer dk = to_device(k), ds = to_device(slots);
  ASSERT_TRUE(gpu.append(0, 1, dk.get(), dk.get(), ds.as<int64_t>(), 3, nullptr).ok());
  FS_ASSERT_CUDA(cudaDeviceSynchronize());  // no illegal address: the bad slots were skipped
  const std::vector<BlockCopy> bad = {{1, 37}};
  EXPECT_EQ(gpu.copy_blocks(bad.data(), 1, nullptr).code(), StatusCode::kOutOfRange);
}

// cudaMemGetInfo through device_memory, and a pool sized by a utilization a little above what
// is in use: it takes what the utilization leaves, and after its allocation the device holds
// no more than utilization × total (64 MiB aside: allocation rounding, lazily loaded modules).
TEST(KVStorageCuda, SizedFromTheDeviceMemory) {
  FS_SKIP_WITHOUT_CUDA();
  DeviceMemory m;
  ASSERT_TRUE(device_memory(0, 0, &m).ok());
  ASSERT_GT(m.total_bytes, 0);
  ASSERT_GT(m.free_bytes, 0);
  ASSERT_LE(m.free_bytes, m.total_bytes);
  KVStorageShape sh = shape(DType::kBFloat16, 16);
  const double used = static_cast<double>(m.total_bytes - m.free_bytes) / static_cast<double>(m.total_bytes);
  const double u = std::min(1.0, used + 0.02);
  CacheSizing s;
  ASSERT_TRUE(size_cache_for_utilization("t", u, m, sh, 16, &s).ok());
  EXPECT_EQ(s.num_blocks, (static_cast<int64_t>(u * static_cast<double>(m.total_bytes)) - (m.total_bytes - m.free_bytes)) /
                              sh.block_bytes());
  sh.num_blocks = s.num_blocks;
  KVStorage pool;
  ASSERT_TRUE(KVStorage::create(Device::kCUDA, sh, &pool).ok());
  DeviceMemory after;
  ASSERT_TRUE(device_memory(0, 0, &after).ok());
  EXPECT_LE(after.total_bytes - after.free_bytes, static_cast<int64_t>(u * static_cast<double>(m.total_bytes)) + (64 << 20));
}

}  // namespace
}  // namespace flashserve::test
