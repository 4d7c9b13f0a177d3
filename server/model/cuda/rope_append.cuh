// The rotary embedding of one (i, i + D/2) pair and the new K/V's write into their pool slot:
// the one definition behind rope_append (model_kernels.cu) and the skinny GEMM's fused QKV
// epilogue (skinny_gemm.cu, SkinnyEpilogue::kRopeAppend), which must write the same bits.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kvcache/cuda/fp8_quantize.cuh"
#include "kvcache/page_view.h"

namespace flashserve::model::cuda {

// Hugging Face's rotate_half on bf16 values a (dim i) and b (dim i + D/2) at position pos, in
// fp32, rounded back to bf16 in place.
__device__ __forceinline__ void rope_rotate(float pos, float inv_freq, __nv_bfloat16& a, __nv_bfloat16& b) {
  float sn, cs;
  sincosf(pos * inv_freq, &sn, &cs);
  const float x = __bfloat162float(a), y = __bfloat162float(b);
  a = __float2bfloat16_rn(x * cs - y * sn);
  b = __float2bfloat16_rn(y * cs + x * sn);
}

// Token t's slot in `pages`: the elements from the pool to its kv head 0 (offset_of_slot), or
// -1 where nothing is written (no append, or a slot outside [0, num_blocks·block_size)).
__device__ __forceinline__ int64_t kv_slot_base(const KVPageView& pages, const int64_t* slots, int64_t t,
                                                bool append) {
  if (!append) return -1;
  const int64_t slot = slots[t], capacity = int64_t{pages.num_blocks} * pages.block_size;
  return slot >= 0 && slot < capacity ? pages.offset_of_slot(slot, 0) : -1;
}

// Element d of kv head h of K (or V) at a slot's base (kv_slot_base >= 0): bf16 pages take x as
// it is, FP8 pages its code under the head's scale (fp8_code, as KVStorage::append quantizes).
// The view holds its pages const for its readers; they are the layer's storage, written here.
__device__ __forceinline__ void kv_store(const KVPageView& pages, bool is_v, int64_t base, int h, int d,
                                         __nv_bfloat16 x) {
  void* pool = const_cast<void*>(is_v ? pages.v_pages : pages.k_pages);
  const int64_t at = base + pages.offset(0, h, 0) + d;
  if (pages.dtype == DType::kFp8E4M3 || pages.dtype == DType::kFp8E5M2) {  // (is_fp8 is host-only constexpr)
    const float scale = (is_v ? pages.v_scales : pages.k_scales)[h];
    static_cast<uint8_t*>(pool)[at] = static_cast<uint8_t>(
        ::flashserve::cuda::fp8_code(__bfloat162float(x), scale, pages.dtype == DType::kFp8E5M2));
  } else {
    static_cast<__nv_bfloat16*>(pool)[at] = x;
  }
}

// Whether pages can take an append (bf16, or FP8 with both scales; blocks of >= 1 slot): the
// host's check before either kernel launches.
inline bool kv_appendable(const KVPageView& pages) {
  return pages.block_size >= 1 && pages.k_pages != nullptr && pages.v_pages != nullptr &&
         (pages.dtype == DType::kBFloat16 ||
          (is_fp8(pages.dtype) && pages.k_scales != nullptr && pages.v_scales != nullptr));
}

}  // namespace flashserve::model::cuda
