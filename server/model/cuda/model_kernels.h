// Small CUDA kernels of the model's bf16 forward: embedding gather, RMSNorm, rotary, SwiGLU,
// residual add, row gather, and random bf16 fill for synthetic weights. All asynchronous on
// `stream`; each returns the launch's error. `dependent` (rms_norm, rope_append, gather_rows: a
// decode step's chain): launched as a programmatic dependent of the stream's previous kernel on
// sm_90+ (attention/cuda/pdl.cuh): the kernel waits for it on the device
// before it touches anything, and lets the next dependent kernel start its CTAs at once.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kvcache/page_view.h"

namespace flashserve::model::cuda {

// x[t, :] = embed[tokens[t], :] (fp32 residual stream from bf16 embeddings); a token -(r + 1) (a
// placeholder, ForwardBatch) is drawn[r], the step before's draw of row r.
cudaError_t embed_gather(const __nv_bfloat16* embed, const int32_t* tokens, const int32_t* drawn, int64_t t,
                         int64_t hidden, float* x, cudaStream_t s);
// y[t, :] = bf16(weight · x[t, :] · rsqrt(mean(x[t]²) + eps)), fp32 math.
cudaError_t rms_norm(const float* x, const __nv_bfloat16* weight, int64_t t, int64_t hidden, float eps,
                     __nv_bfloat16* y, cudaStream_t s, bool dependent = false);
// Rotary (Hugging Face's rotate_half pairs (i, i + D/2)) on q and k in place and, with `append`,
// the new tokens' K/V written into their cache slots, in one launch: pages is the layer's view
// of a bf16 or FP8 pool (its k_pages and v_pages written, at KVPageView::offset_of_slot; an FP8
// pool's codes quantized from the bf16 values left in k and v with the view's device scales,
// bit for bit what KVStorage::append writes; its tables and lengths unused); slots outside
// [0, num_blocks·block_size) are skipped. Without `append` (a layer's FP8 calibration, before
// its scales exist) pages and slots are not read.
cudaError_t rope_append(__nv_bfloat16* q, __nv_bfloat16* k, const __nv_bfloat16* v, const int32_t* positions,
                        const float* inv_freq, const int64_t* slots, int64_t t, int32_t heads, int32_t kv_heads,
                        int32_t head_dim, const KVPageView& pages, bool append, cudaStream_t s,
                        bool dependent = false);
// FP8 scale calibration (server/model/kv_cache_options.h): amax[h] = the largest finite |x| of
// k[0 .. t)[h][:] ([t, kv_heads, head_dim] bf16), amax[kv_heads + h] that of v; 0 where none
// is finite and non-zero (NaN and inf ignored).
cudaError_t kv_amax(const __nv_bfloat16* k, const __nv_bfloat16* v, int64_t t, int32_t kv_heads, int32_t head_dim,
                    float* amax, cudaStream_t s);
// gu: [t, 2·I] with gate in [:, :I] and up in [:, I:]; out[t, i] = silu(gate) · up.
cudaError_t silu_mul(const __nv_bfloat16* gu, int64_t t, int64_t inter, __nv_bfloat16* out, cudaStream_t s);
// x += y (fp32 += bf16), n elements.
cudaError_t add_into(float* x, const __nv_bfloat16* y, int64_t n, cudaStream_t s);
// out[i, :] = x[rows[i], :], fp32.
cudaError_t gather_rows(const float* x, const int32_t* rows, int64_t n, int64_t width, float* out, cudaStream_t s,
                        bool dependent = false);
// Fills n bf16 values with N(mean, stddev) from a counter-based generator (seed, index).
cudaError_t fill_normal(__nv_bfloat16* p, int64_t n, float mean, float stddev, uint64_t seed, cudaStream_t s);

}  // namespace flashserve::model::cuda
