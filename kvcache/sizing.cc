#include "kvcache/sizing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "common/cuda_device.h"

namespace flashserve {

namespace {

// "1000 bytes" below a MiB, else "4.00 MiB" or "108.00 GiB".
std::string bytes_text(int64_t n) {
  char buf[64];
  if (n < (int64_t{1} << 20) && n > -(int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(n));
  else if (n < (int64_t{1} << 30) && n > -(int64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(n) / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(n) / (1 << 30));
  return buf;
}

// "17.10 GiB in use (16.60 GiB weights and buffers, 0.50 GiB CUDA context and others)".
std::string in_use_text(const DeviceMemory& m) {
  const int64_t in_use = m.total_bytes - m.free_bytes;
  return bytes_text(in_use) + " in use (" + bytes_text(m.own_bytes) + " weights and buffers, " +
         bytes_text(in_use - m.own_bytes) + " CUDA context and others)";
}

}  // namespace

CacheSizing cache_sizing(const KVStorageShape& shape) {
  CacheSizing s;
  s.bytes_per_block = shape.block_bytes();
  s.block_size = shape.block_size;
  s.num_blocks = shape.num_blocks;
  s.num_tokens = static_cast<int64_t>(std::max(shape.num_blocks - 1, 0)) * shape.block_size;
  s.bytes = shape.bytes();
  return s;
}

Status size_cache(const std::string& what, int64_t budget_bytes, const KVStorageShape& shape, int64_t max_seq_len,
                  CacheSizing* out) {
  KVStorageShape one = shape;
  one.num_blocks = 2;  // the smallest valid pool: the shape's other fields checked
  FS_RETURN_IF_ERROR(one.validate());
  if (max_seq_len < 1) return invalid_argument("size_cache: max_seq_len must be >= 1");
  const int64_t block_bytes = shape.block_bytes();
  const int64_t blocks = std::min<int64_t>(std::max<int64_t>(budget_bytes, 0) / block_bytes,
                                           std::numeric_limits<int32_t>::max());
  one.num_blocks = static_cast<int32_t>(blocks);
  const CacheSizing s = cache_sizing(one);
  const int64_t needed = (max_seq_len + shape.block_size - 1) / shape.block_size + 1;  // the null block too
  if (blocks < needed)
    return resource_exhausted(what + ": a KV cache of " + bytes_text(budget_bytes) + " holds " + std::to_string(blocks) +
                              " blocks of " + bytes_text(block_bytes) + " (" + std::to_string(s.num_tokens) +
                              " tokens), but one sequence of the context length, " + std::to_string(max_seq_len) +
                              " tokens, needs " + std::to_string(needed) + " blocks with the null block (" +
                              bytes_text(needed * block_bytes) + ")");
  *out = s;
  return Status::Ok();
}

Status size_cache_for_utilization(const std::string& what, double utilization, const DeviceMemory& m,
                                  const KVStorageShape& shape, int64_t max_seq_len, CacheSizing* out) {
  if (!(utilization > 0.0 && utilization <= 1.0))
    return invalid_argument(what + ": the utilization must be in (0, 1]");
  if (m.total_bytes <= 0 || m.free_bytes < 0 || m.free_bytes > m.total_bytes || m.own_bytes < 0)
    return invalid_argument(what + ": inconsistent device memory (" + std::to_string(m.total_bytes) + " total, " +
                            std::to_string(m.free_bytes) + " free, " + std::to_string(m.own_bytes) + " own bytes)");
  const int64_t allowed = static_cast<int64_t>(std::floor(utilization * static_cast<double>(m.total_bytes)));
  const int64_t in_use = m.total_bytes - m.free_bytes;
  if (allowed <= in_use)
    return resource_exhausted(what + " allows " + bytes_text(allowed) + " of the device's " + bytes_text(m.total_bytes) +
                              ", but " + in_use_text(m) + ": nothing is left for the KV cache");
  return size_cache(what, allowed - in_use, shape, max_seq_len, out);
}

Status device_memory(int device, int64_t own_bytes, DeviceMemory* out) {
  DeviceMemory m;
  FS_RETURN_IF_ERROR(cuda_memory_info(device, &m.free_bytes, &m.total_bytes));
  m.own_bytes = own_bytes;
  *out = m;
  return Status::Ok();
}

std::string describe(const CacheSizing& s) {
  return std::to_string(s.num_blocks) + " blocks of " + std::to_string(s.block_size) + " tokens (" +
         std::to_string(s.num_tokens) + " tokens, " + bytes_text(s.bytes) + ")";
}

std::string describe(const DeviceMemory& m) { return bytes_text(m.total_bytes) + ", " + in_use_text(m); }

}  // namespace flashserve
