// KV cache sizing at start-up: how many blocks a memory budget holds. The arithmetic is pure
// (unit-tested on the CPU: tests/test_kv_storage.cc); device_memory() is the one call that
// asks the GPU. The server takes the budget from --num-blocks, --kv-cache-memory or
// --gpu-memory-utilization (server/main.cc); the CUDA model sizes its pool after its weights
// and activation buffers are allocated (server/model/cuda/llama_cuda.cc).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "kvcache/kv_storage.h"

namespace flashserve {

struct CacheSizing {
  int64_t bytes_per_block = 0;  // K and V of every layer (KVStorageShape::block_bytes)
  int32_t block_size = 0;       // tokens a block
  int32_t num_blocks = 0;       // including the null block 0
  int64_t num_tokens = 0;       // usable tokens: (num_blocks - 1) · block_size
  int64_t bytes = 0;            // num_blocks · bytes_per_block
};

// What a storage of this shape holds.
CacheSizing cache_sizing(const KVStorageShape& shape);

// The blocks of shape.block_bytes() that fit in budget_bytes (at most INT32_MAX), for a model
// whose longest sequence has max_seq_len tokens. RESOURCE_EXHAUSTED when they cannot hold one
// such sequence (ceil(max_seq_len / block_size) blocks beside the null block); its message starts
// with `what` (the server: the flag and its value) and gives what the budget holds and what the
// sequence needs. shape.num_blocks is not read.
Status size_cache(const std::string& what, int64_t budget_bytes, const KVStorageShape& shape, int64_t max_seq_len,
                  CacheSizing* out);

// The device's memory when the pool is sized.
struct DeviceMemory {
  int64_t total_bytes = 0;  // cudaMemGetInfo's total
  int64_t free_bytes = 0;   // free then: after this process's weights and activation buffers
  int64_t own_bytes = 0;    // of the memory in use (total - free), what those take (the message)
};

// --gpu-memory-utilization as vLLM defines it: the process may hold utilization × total bytes
// of the device, and everything in use when the pool is sized (total − free: our weights and
// activation buffers, the CUDA context and libraries, other processes) comes off that:
//     pool = utilization · total − (total − free),   blocks = floor(pool / bytes per block)
// e.g. a 140 GiB device at 0.9 allows 126 GiB; with 18 GiB in use (16 GiB of Llama-3-8B's bf16
// weights, 2 GiB of buffers, context and other processes) the pool gets 108 GiB, 55,296 blocks
// of 2 MiB (32 layers × 8 kv heads × 16 tokens × 128 × bf16, K and V): 884,720 tokens.
// What is allocated later, when first needed (the decode workspace, cuBLAS's workspace, CUDA
// graphs, the sampler's buffers), comes out of the (1 − utilization) left over.
// utilization must be in (0, 1] (INVALID_ARGUMENT); RESOURCE_EXHAUSTED when nothing is left
// for the pool, naming what holds the memory, or when the pool is too small (size_cache).
Status size_cache_for_utilization(const std::string& what, double utilization, const DeviceMemory& memory,
                                  const KVStorageShape& shape, int64_t max_seq_len, CacheSizing* out);

// cudaMemGetInfo on `device` now, with own_bytes as given. UNSUPPORTED in a build without CUDA.
Status device_memory(int device, int64_t own_bytes, DeviceMemory* out);

// "55296 blocks of 16 tokens (884720 tokens, 108.00 GiB)", and
// "139.75 GiB, 17.10 GiB in use (16.60 GiB weights and buffers, 0.50 GiB CUDA context and others)".
std::string describe(const CacheSizing& sizing);
std::string describe(const DeviceMemory& memory);

}  // namespace flashserve
