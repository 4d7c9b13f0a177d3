// One copy-on-write copy between KV blocks: the cache manager plans them, KVStorage carries them
// out. Apart from kv_cache_manager.h so that the storage (and its CUDA kernels, compiled as
// C++17 by nvcc) need not see the manager (C++20: std::span).
#pragma once

#include <cstdint>

namespace flashserve {

// Copy block src's contents into dst (all layers, K and V): copy-on-write work.
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
};

}  // namespace flashserve
