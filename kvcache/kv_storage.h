// Page storage: every layer's K/V pool on one device (CPU or CUDA), in the layout of
// page_view.h, with the two writes the engine needs: append (new tokens' K/V into their slots)
// and copy_blocks (copy-on-write). One allocation holds
//     [num_layers][num_blocks][K, V][num_kv_heads][block_size][head_dim]
// so a layer is exactly the [num_blocks, 2, num_kv_heads, block_size, head_dim] pool the
// kernels read, and a block's K and V (every head) are one contiguous run.
//
// FP8 pools (dtype fp8_e4m3 / fp8_e5m2, issue 25) hold one byte an element and, beside the
// pages, a scale per (layer, kv head) for K and for V (1.0 until set_scales): element =
// scale·fp8(code). append quantizes the model's K/V, code = sat_rne(x / scale); view() hands the
// layer's scales to the kernels (a CUDA pool keeps a device copy of them).
#pragma once

#include <cstdint>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "kvcache/block_copy.h"
#include "kvcache/page_view.h"

namespace flashserve {

struct KVStorageShape {
  int32_t num_layers = 1;
  int32_t num_blocks = 0;
  int32_t num_kv_heads = 0;
  int32_t block_size = 16;
  int32_t head_dim = 0;
  DType dtype = DType::kBFloat16;

  int64_t block_elems() const { return static_cast<int64_t>(num_kv_heads) * block_size * head_dim; }
  int64_t pool_elems() const { return 2 * block_elems() * num_blocks; }  // one layer's K and V
  // Every layer's K and V of one block (FP8: one byte an element).
  int64_t block_bytes() const { return 2 * num_layers * block_elems() * dtype_size(dtype); }
  int64_t bytes() const { return block_bytes() * num_blocks; }
  Status validate() const;
};

class KVStorage {
 public:
  KVStorage() = default;
  ~KVStorage();
  KVStorage(KVStorage&& o) noexcept;
  KVStorage& operator=(KVStorage&& o) noexcept;
  KVStorage(const KVStorage&) = delete;
  KVStorage& operator=(const KVStorage&) = delete;

  // Allocates (cudaMalloc on CUDA) and zero-fills. RESOURCE_EXHAUSTED when memory is short.
  static Status create(Device device, const KVStorageShape& shape, KVStorage* out);

  Device device() const { return device_; }
  const KVStorageShape& shape() const { return shape_; }
  // Layer `layer`'s pool; its block b's K at k_pages + b·2·block_elems() elements, its V
  // block_elems() further (v_pages(layer) = k_pages(layer) + block_elems() elements).
  void* k_pages(int32_t layer) const;
  void* v_pages(int32_t layer) const;
  // The view of one layer for a batch (block_table and seq_lens on the storage's device); FP8
  // pools: with the layer's scales where the pool lives (CUDA: the device copy).
  KVPageView view(int32_t layer, const int32_t* block_table, int64_t block_table_stride,
                  const int32_t* seq_lens) const;

  // FP8 pools: layer `layer`'s K and V scales, [num_kv_heads] fp32 each (host arrays; one
  // value in every head is a per-tensor scale). Every value must be finite and > 0, the layer
  // in range and the pool FP8: INVALID_ARGUMENT / OUT_OF_RANGE otherwise, and nothing changes.
  // Set them before appending: the pages keep the codes written under the old scales. CUDA:
  // the device copy is written at once (a synchronous copy), for the calls issued after.
  Status set_scales(int32_t layer, const float* k_scales, const float* v_scales);
  // The layer's scales ([num_kv_heads], host); null for pools that are not FP8.
  const float* k_scales(int32_t layer) const;
  const float* v_scales(int32_t layer) const;

  // Writes n tokens' keys and values into layers [first_layer, first_layer + num_layers):
  // k_new, v_new: [num_layers, n, num_kv_heads, head_dim] contiguous, storage dtype;
  // slots: [n] int64 (block·block_size + offset), negative = padding, skipped. All on the
  // storage's device. CPU: an out-of-range slot is OUT_OF_RANGE and nothing is written.
  // CUDA: one launch for all the layers; a slot out of range is skipped on the device (never a
  // write outside the pool); callers with host slot arrays check them with check_slots.
  Status append(int32_t first_layer, int32_t num_layers, const void* k_new, const void* v_new, const int64_t* slots,
                int64_t n, void* stream = nullptr);
  // The same with k_new, v_new of type src_dtype: the storage dtype (copied as they are: for
  // an FP8 pool, codes already quantized with its scales), or, into an FP8 pool, fp32, fp16 or
  // bf16 (what the model produces: the CPU model fp32, the CUDA model bf16), quantized as
  // code = sat_rne(x / scale[layer, kv head]) with x / scale in fp32; or fp32 into a bf16/fp16
  // pool (the CPU model with a 16-bit cache), rounded to nearest even. Any other pair is a
  // mismatch: INVALID_ARGUMENT, nothing written. CUDA: the storage dtype, or fp32/fp16/bf16 into
  // an FP8 pool (one launch, the same quantization bit for bit).
  Status append(int32_t first_layer, int32_t num_layers, DType src_dtype, const void* k_new, const void* v_new,
                const int64_t* slots, int64_t n, void* stream = nullptr);
  // OUT_OF_RANGE naming the first slot outside [-1, num_blocks·block_size) (host array).
  Status check_slots(const int64_t* slots_host, int64_t n) const;

  // Copies block src to dst in every layer, K and V (pairs: host array), byte for byte (FP8:
  // the codes; the scales are per layer, not per block). Ids are checked first: OUT_OF_RANGE
  // and nothing copied.
  Status copy_blocks(const BlockCopy* pairs, int32_t n, void* stream = nullptr);

 private:
  void release();
  Device device_ = Device::kCPU;
  KVStorageShape shape_;
  char* data_ = nullptr;
  std::vector<float> scales_;  // FP8: [num_layers][K, V][num_kv_heads], host; empty otherwise
  float* device_scales_ = nullptr;  // CUDA FP8: the device copy of scales_
  int64_t* device_pairs_ = nullptr;  // CUDA: staging for copy_blocks' pairs
  int32_t device_pairs_cap_ = 0;
  void* device_pairs_read_ = nullptr;  // CUDA: the event after the last copy_blocks kernel (cuda::copy_blocks)
};

}  // namespace flashserve
