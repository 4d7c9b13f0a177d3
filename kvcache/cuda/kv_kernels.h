// The CUDA side of KVStorage: allocation, append and copy-blocks kernels.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "kvcache/kv_storage.h"

namespace flashserve::cuda {

Status alloc_zeroed(int64_t bytes, void** out);
void free_device(void* p);
// k_new, v_new of the pool's type (copied), or of fp32, fp16, bf16 into an FP8 pool (quantized
// with the device scales, [num_layers][K, V][num_kv_heads]).
Status append_kv(const KVStorage& s, int32_t first_layer, int32_t num_layers, DType src_dtype, const void* k_new,
                 const void* v_new, const int64_t* slots, int64_t n, const float* scales, void* stream);
// A host-to-device copy that has landed when it returns (its DMA waited for: a non-blocking stream
// launched after it reads the new bytes).
Status copy_to_device(void* dst, const void* src, int64_t bytes);
// pairs: host; staging: device buffer of at least n int64 (BlockCopy's 8 bytes each), shared by
// every call on the storage; staging_read: an event (made on the first call, a cudaEvent_t) that
// the last call's kernel recorded once launched, waited for before the staging is written again,
// so that calls on different streams do not overwrite pairs an earlier kernel has yet to read.
Status copy_blocks(const KVStorage& s, const BlockCopy* pairs, int32_t n, int64_t* staging, void** staging_read,
                   void* stream);
void destroy_event(void* event);

}  // namespace flashserve::cuda
