#include "server/model/cuda/model_kernels.h"

#include "attention/cuda/pdl.cuh"
#include "kvcache/page_view.h"
#include "server/model/cuda/rope_append.cuh"

namespace flashserve::model::cuda {

namespace {

using ::flashserve::cuda::launch_kernel;
using ::flashserve::cuda::pdl_launch_dependents;
using ::flashserve::cuda::pdl_wait;

constexpr int kThreads = 256;

__global__ void embed_gather_kernel(const __nv_bfloat16* embed, const int32_t* tokens, const int32_t* drawn,
                                    int64_t hidden, float* x) {
  const int64_t t = blockIdx.x;
  int32_t tok = tokens[t];
  if (tok < 0) tok = drawn[-tok - 1];  // a placeholder: the step before's draw
  const __nv_bfloat16* row = embed + static_cast<int64_t>(tok) * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) x[t * hidden + i] = __bfloat162float(row[i]);
}

__global__ void rms_norm_kernel(const float* x, const __nv_bfloat16* w, int64_t hidden, float eps, __nv_bfloat16* y) {
  pdl_wait();  // (a dependent launch: see model_kernels.h)
  pdl_launch_dependents();
  const int64_t t = blockIdx.x;
  const float* row = x + t * hidden;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) ss += row[i] * row[i];
  __shared__ float part[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0.f;
  for (int i = 0; i < kThreads / 32; ++i) total += part[i];
  const float inv = rsqrtf(total / static_cast<float>(hidden) + eps);
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x)
    y[t * hidden + i] = __float2bfloat16_rn(__bfloat162float(w[i]) * (row[i] * inv));
}

// An FP8 pool: the bf16 value quantized with its kv head's scale (kv_store), as
// KVStorage::append would quantize the bf16 K/V this kernel leaves in k and v: the same codes.
__global__ void rope_append_kernel(__nv_bfloat16* q, __nv_bfloat16* k, const __nv_bfloat16* v,
                                   const int32_t* positions, const float* inv_freq, const int64_t* slots,
                                   int32_t heads, int32_t kv_heads, int32_t head_dim,
                                   const __grid_constant__ KVPageView pages, bool append) {
  pdl_wait();
  pdl_launch_dependents();
  const int64_t t = blockIdx.x;
  const int half = head_dim / 2;
  const float pos = static_cast<float>(positions[t]);
  const int64_t base = kv_slot_base(pages, slots, t, append);  // once (a 64-bit division)
  for (int j = threadIdx.x; j < (heads + kv_heads) * half; j += blockDim.x) {
    const int h = j / half, i = j % half;
    const bool is_q = h < heads;
    __nv_bfloat16* row = is_q ? q + (t * heads + h) * head_dim : k + (t * kv_heads + (h - heads)) * head_dim;
    __nv_bfloat16 a = row[i], b = row[i + half];
    rope_rotate(pos, inv_freq[i], a, b);
    row[i] = a;
    row[i + half] = b;
    if (!is_q && base >= 0) {
      kv_store(pages, false, base, h - heads, i, a);
      kv_store(pages, false, base, h - heads, i + half, b);
    }
  }
  if (base >= 0)
    for (int j = threadIdx.x; j < kv_heads * head_dim; j += blockDim.x)
      kv_store(pages, true, base, j / head_dim, j % head_dim, v[t * kv_heads * head_dim + j]);
}

// Block b: K's (b < kv_heads) or V's head b % kv_heads; a max over the block (|x| >= 0, so the
// float bits order as unsigned integers: an atomicMax on them in shared memory).
__global__ void kv_amax_kernel(const __nv_bfloat16* k, const __nv_bfloat16* v, int64_t t, int32_t kv_heads,
                               int32_t head_dim, float* amax) {
  __shared__ unsigned best;
  if (threadIdx.x == 0) best = 0u;
  __syncthreads();
  const int h = static_cast<int>(blockIdx.x) % kv_heads;
  const __nv_bfloat16* x = blockIdx.x < static_cast<unsigned>(kv_heads) ? k : v;
  float mx = 0.f;
  for (int64_t i = threadIdx.x; i < t * head_dim; i += blockDim.x) {
    const float a = fabsf(__bfloat162float(x[((i / head_dim) * kv_heads + h) * head_dim + i % head_dim]));
    if (isfinite(a)) mx = fmaxf(mx, a);  // NaN and inf must not decide every later token's scale
  }
  atomicMax(&best, __float_as_uint(mx));
  __syncthreads();
  if (threadIdx.x == 0) amax[blockIdx.x] = __uint_as_float(best);
}

__global__ void silu_mul_kernel(const __nv_bfloat16* gu, int64_t t, int64_t inter, __nv_bfloat16* out) {
  const int64_t n = t * inter;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = k / inter, i = k % inter;
    const float g = __bfloat162float(gu[row * 2 * inter + i]), u = __bfloat162float(gu[row * 2 * inter + inter + i]);
    out[k] = __float2bfloat16_rn(g / (1.f + __expf(-g)) * u);
  }
}

__global__ void add_into_kernel(float* x, const __nv_bfloat16* y, int64_t n) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[k] += __bfloat162float(y[k]);
}

__global__ void gather_rows_kernel(const float* x, const int32_t* rows, int64_t width, float* out) {
  pdl_wait();
  pdl_launch_dependents();
  const int64_t i = blockIdx.x;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) out[i * width + j] = x[rows[i] * width + j];
}

__device__ uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void fill_normal_kernel(__nv_bfloat16* p, int64_t n, float mean, float stddev, uint64_t seed) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t r = splitmix(seed ^ splitmix(static_cast<uint64_t>(k)));
    const float u1 = (static_cast<float>(r >> 40) + 1.f) * (1.f / 16777217.f);
    const float u2 = static_cast<float>((r >> 16) & 0xffffff) * (1.f / 16777216.f);
    p[k] = __float2bfloat16_rn(mean + stddev * sqrtf(-2.f * __logf(u1)) * __cosf(6.2831853f * u2));
  }
}

unsigned grid_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65536 ? b : 65536);
}

}  // namespace

cudaError_t embed_gather(const __nv_bfloat16* embed, const int32_t* tokens, const int32_t* drawn, int64_t t,
                         int64_t hidden, float* x, cudaStream_t s) {
  embed_gather_kernel<<<static_cast<unsigned>(t), kThreads, 0, s>>>(embed, tokens, drawn, hidden, x);
  return cudaGetLastError();
}

cudaError_t rms_norm(const float* x, const __nv_bfloat16* weight, int64_t t, int64_t hidden, float eps,
                     __nv_bfloat16* y, cudaStream_t s, bool dependent) {
  return launch_kernel<rms_norm_kernel>(dim3(static_cast<unsigned>(t)), dim3(kThreads), 0, s, dependent, x, weight,
                                        hidden, eps, y);
}

cudaError_t rope_append(__nv_bfloat16* q, __nv_bfloat16* k, const __nv_bfloat16* v, const int32_t* positions,
                        const float* inv_freq, const int64_t* slots, int64_t t, int32_t heads, int32_t kv_heads,
                        int32_t head_dim, const KVPageView& pages, bool append, cudaStream_t s,
                        bool dependent) {
  if (append && !kv_appendable(pages)) return cudaErrorInvalidValue;
  return launch_kernel<rope_append_kernel>(dim3(static_cast<unsigned>(t)), dim3(kThreads), 0, s, dependent, q, k, v,
                                           positions, inv_freq, slots, heads, kv_heads, head_dim, pages, append);
}

cudaError_t kv_amax(const __nv_bfloat16* k, const __nv_bfloat16* v, int64_t t, int32_t kv_heads, int32_t head_dim,
                    float* amax, cudaStream_t s) {
  if (kv_heads < 1 || head_dim < 1 || t < 0) return cudaErrorInvalidValue;
  kv_amax_kernel<<<static_cast<unsigned>(2 * kv_heads), kThreads, 0, s>>>(k, v, t, kv_heads, head_dim, amax);
  return cudaGetLastError();
}

cudaError_t silu_mul(const __nv_bfloat16* gu, int64_t t, int64_t inter, __nv_bfloat16* out, cudaStream_t s) {
  silu_mul_kernel<<<grid_for(t * inter), kThreads, 0, s>>>(gu, t, inter, out);
  return cudaGetLastError();
}

cudaError_t add_into(float* x, const __nv_bfloat16* y, int64_t n, cudaStream_t s) {
  add_into_kernel<<<grid_for(n), kThreads, 0, s>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t gather_rows(const float* x, const int32_t* rows, int64_t n, int64_t width, float* out, cudaStream_t s,
                        bool dependent) {
  return launch_kernel<gather_rows_kernel>(dim3(static_cast<unsigned>(n)), dim3(kThreads), 0, s, dependent, x, rows,
                                           width, out);
}

cudaError_t fill_normal(__nv_bfloat16* p, int64_t n, float mean, float stddev, uint64_t seed, cudaStream_t s) {
  fill_normal_kernel<<<grid_for(n), kThreads, 0, s>>>(p, n, mean, stddev, seed);
  return cudaGetLastError();
}

}  // namespace flashserve::model::cuda
