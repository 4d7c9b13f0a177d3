// How many KV blocks a memory budget holds.
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "common/status.h"

namespace flashserve {

struct CacheSizing {
  int64_t bytes_per_block = 0;  // K and V of every layer
  int32_t num_blocks = 0;       // including the null block 0
  int64_t num_tokens = 0;       // usable tokens: (num_blocks - 1) · block_size
  int64_t bytes = 0;            // num_blocks · bytes_per_block
};

// Blocks that fit in budget_bytes for a model with these shapes. RESOURCE_EXHAUSTED when not
// even two blocks (the null block and one usable) fit.
Status size_cache(int64_t budget_bytes, int32_t num_layers, int32_t num_kv_heads, int32_t head_dim, DType dtype,
                  int32_t block_size, CacheSizing* out);

// The same for a fraction (0, 1] of the CUDA device's free memory now (cudaMemGetInfo).
Status size_cache_from_gpu(double fraction, int device, int32_t num_layers, int32_t num_kv_heads, int32_t head_dim,
                           DType dtype, int32_t block_size, CacheSizing* out);

}  // namespace flashserve
