// Append and copy-blocks on the GPU: 16-byte loads and stores, coalesced on both sides (a
// token's head row of head_dim elements is contiguous in the new K/V and in the page).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <string>

#include "common/cuda_check.h"
#include "kvcache/cuda/fp8_quantize.cuh"
#include "kvcache/cuda/kv_kernels.h"

namespace flashserve::cuda {

namespace {

constexpr int kThreads = 128;

struct AppendArgs {
  char* pool;                // layer first_layer's pool [blocks][K, V][heads][block_size][head_dim]
  int64_t layer_bytes;       // K + V of one layer
  int64_t v_bytes;           // from a block's K to its V
  const char* k_new;
  const char* v_new;
  const int64_t* slots;
  int64_t n;
  int64_t capacity;          // num_blocks · block_size
  KVPageView pages;          // layer first_layer's view: slot -> element offset (offset_of_slot)
  int32_t elem;              // bytes an element
  int32_t chunks_per_head;   // 16-byte chunks in head_dim elements
  int32_t num_kv_heads;
  // FP8 pools (append_fp8_kernel): the new K/V's type and the scales.
  const float* scales;       // device: layer first_layer's [K, V][num_kv_heads], then the next layer's
  int32_t src;               // 0 fp32, 1 fp16, 2 bf16
  int32_t e5m2;              // 0 e4m3, 1 e5m2
};

// grid: (tokens, layers). Each thread copies 16-byte chunks of the token's K and V rows.
__global__ void __launch_bounds__(kThreads) append_kernel(const __grid_constant__ AppendArgs a) {
  const int64_t t = blockIdx.x;
  const int layer = blockIdx.y;
  const int64_t slot = a.slots[t];
  if (slot < 0 || slot >= a.capacity) return;  // padding, or a bad slot: never written
  const int64_t row_bytes = static_cast<int64_t>(a.num_kv_heads) * a.chunks_per_head * 16;
  const char* ks = a.k_new + (layer * a.n + t) * row_bytes;
  const char* vs = a.v_new + (layer * a.n + t) * row_bytes;
  // The slot's kv head 0 (the division once); kv head h is offset(0, h, 0) further.
  char* kd = a.pool + layer * a.layer_bytes + a.pages.offset_of_slot(slot, 0) * a.elem;
  char* vd = kd + a.v_bytes;
  const int chunks = a.num_kv_heads * a.chunks_per_head;
  for (int c = threadIdx.x; c < chunks; c += kThreads) {
    const int h = c / a.chunks_per_head, cc = c % a.chunks_per_head;
    const int64_t dst = a.pages.offset(0, h, 0) * a.elem + cc * 16;
    *reinterpret_cast<uint4*>(kd + dst) = __ldg(reinterpret_cast<const uint4*>(ks) + c);
    *reinterpret_cast<uint4*>(vd + dst) = __ldg(reinterpret_cast<const uint4*>(vs) + c);
  }
}

// An FP8 pool's append (issue 25): the new K/V in src (fp32, fp16 or bf16) quantized (fp8_code).
__device__ __forceinline__ float load_src(const char* p, int32_t src, int i) {
  if (src == 0) return reinterpret_cast<const float*>(p)[i];
  if (src == 1) return __half2float(reinterpret_cast<const __half*>(p)[i]);
  return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p)[i]);
}

// 16 values from src (x / scale) as 16 codes.
__device__ __forceinline__ uint4 quantize16(const char* src_row, int32_t src, float scale, bool e5m2) {
  uint32_t w[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    uint32_t word = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      word |= fp8_code(load_src(src_row, src, 4 * q + j), scale, e5m2) << (8 * j);
    }
    w[q] = word;
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// grid: (tokens, layers). Each thread writes 16-code chunks of the token's K and V rows.
__global__ void __launch_bounds__(kThreads) append_fp8_kernel(const __grid_constant__ AppendArgs a) {
  const int64_t t = blockIdx.x;
  const int layer = blockIdx.y;
  const int64_t slot = a.slots[t];
  if (slot < 0 || slot >= a.capacity) return;  // padding, or a bad slot: never written
  const int64_t src_elem = a.src == 0 ? 4 : 2;
  const int head_dim = a.chunks_per_head * 16;  // one-byte codes: 16 a chunk
  const int64_t row = static_cast<int64_t>(a.num_kv_heads) * head_dim;  // elements a token
  const char* ks = a.k_new + (layer * a.n + t) * row * src_elem;
  const char* vs = a.v_new + (layer * a.n + t) * row * src_elem;
  char* kd = a.pool + layer * a.layer_bytes + a.pages.offset_of_slot(slot, 0);
  char* vd = kd + a.v_bytes;
  const float* k_scale = a.scales + static_cast<int64_t>(layer) * 2 * a.num_kv_heads;
  const float* v_scale = k_scale + a.num_kv_heads;
  const int chunks = a.num_kv_heads * a.chunks_per_head;
  for (int c = threadIdx.x; c < chunks; c += kThreads) {
    const int h = c / a.chunks_per_head, cc = c % a.chunks_per_head;
    const int64_t dst = a.pages.offset(0, h, 0) + cc * 16;  // elements = bytes
    const int64_t from = (static_cast<int64_t>(h) * head_dim + cc * 16) * src_elem;
    *reinterpret_cast<uint4*>(kd + dst) = quantize16(ks + from, a.src, k_scale[h], a.e5m2 != 0);
    *reinterpret_cast<uint4*>(vd + dst) = quantize16(vs + from, a.src, v_scale[h], a.e5m2 != 0);
  }
}

// grid: (pairs, layers). Copies one block (its K and V, one run of block_stride elements from its
// first key) of one layer with 16-byte vectors.
__global__ void __launch_bounds__(kThreads) copy_blocks_kernel(char* data, const int2* pairs, int64_t layer_bytes,
                                                               const __grid_constant__ KVPageView pages, int32_t elem) {
  const int2 pr = pairs[blockIdx.x];
  char* pool = data + blockIdx.y * layer_bytes;
  const int64_t block_bytes = pages.block_stride * elem;
  const uint4* src = reinterpret_cast<const uint4*>(pool + pages.offset(pr.x, 0, 0) * elem);
  uint4* dst = reinterpret_cast<uint4*>(pool + pages.offset(pr.y, 0, 0) * elem);
  for (int64_t i = threadIdx.x; i < block_bytes / 16; i += kThreads) dst[i] = src[i];
}

}  // namespace

Status alloc_zeroed(int64_t bytes, void** out) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, static_cast<size_t>(bytes));
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the sticky-free allocation error
    return resource_exhausted("cudaMalloc of " + std::to_string(bytes) + " bytes: out of device memory");
  }
  FS_RETURN_IF_ERROR(cuda_status(err, "cudaMalloc"));
  const Status st = cuda_status(cudaMemset(p, 0, static_cast<size_t>(bytes)), "cudaMemset");
  if (!st.ok()) {
    cudaFree(p);
    return st;
  }
  *out = p;
  return Status::Ok();
}

void free_device(void* p) {
  if (p) cudaFree(p);
}

Status append_kv(const KVStorage& s, int32_t first_layer, int32_t num_layers, DType src_dtype, const void* k_new,
                 const void* v_new, const int64_t* slots, int64_t n, const float* scales, void* stream) {
  const KVStorageShape& sh = s.shape();
  const int64_t elem = dtype_size(sh.dtype);
  const bool quantize = src_dtype != sh.dtype;  // into an FP8 pool (KVStorage::append checked the pair)
  if ((sh.head_dim * elem) % 16 || reinterpret_cast<uintptr_t>(k_new) % 16 || reinterpret_cast<uintptr_t>(v_new) % 16)
    return invalid_argument("KVStorage::append: on CUDA, head_dim must fill whole 16-byte chunks and k_new, v_new be "
                            "16-byte aligned");
  if (n > 0x7fffffff) return unsupported("KVStorage::append: more than 2^31 tokens in one call");
  const KVPageView pv = s.view(first_layer, nullptr, 0, nullptr);  // the layout's one description
  AppendArgs a;
  a.pool = static_cast<char*>(s.k_pages(first_layer));
  a.layer_bytes = sh.pool_elems() * elem;
  a.v_bytes = static_cast<const char*>(pv.v_pages) - static_cast<const char*>(pv.k_pages);
  a.k_new = static_cast<const char*>(k_new);
  a.v_new = static_cast<const char*>(v_new);
  a.slots = slots;
  a.n = n;
  a.capacity = static_cast<int64_t>(sh.num_blocks) * sh.block_size;
  a.pages = pv;
  a.elem = static_cast<int32_t>(elem);
  a.chunks_per_head = static_cast<int32_t>(sh.head_dim * elem / 16);
  a.num_kv_heads = sh.num_kv_heads;
  a.scales = scales == nullptr ? nullptr : scales + static_cast<int64_t>(first_layer) * 2 * sh.num_kv_heads;
  a.src = src_dtype == DType::kFloat32 ? 0 : src_dtype == DType::kFloat16 ? 1 : 2;
  a.e5m2 = sh.dtype == DType::kFp8E5M2 ? 1 : 0;
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(num_layers));
  if (quantize) {
    append_fp8_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a);
  } else {
    append_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a);
  }
  FS_CUDA_CHECK_LAUNCH("append kernel");
  return Status::Ok();
}

Status copy_to_device(void* dst, const void* src, int64_t bytes) {
  // From pageable memory cudaMemcpy may return before the DMA reaches dst, and a non-blocking
  // stream (the CUDA model's) is not ordered after the legacy one: wait for the copy itself.
  FS_RETURN_IF_ERROR(cuda_status(
      cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, cudaStreamLegacy), "cudaMemcpy"));
  return cuda_status(cudaStreamSynchronize(cudaStreamLegacy), "cudaMemcpy");
}

Status copy_blocks(const KVStorage& s, const BlockCopy* pairs, int32_t n, int64_t* staging, void** staging_read,
                   void* stream) {
  static_assert(sizeof(BlockCopy) == 8, "BlockCopy is two int32");
  const KVStorageShape& sh = s.shape();
  const int64_t elem = dtype_size(sh.dtype);
  const KVPageView pv = s.view(0, nullptr, 0, nullptr);
  const int64_t block_bytes = pv.block_stride * elem;  // a block's K and V
  if (block_bytes % 16) return invalid_argument("KVStorage::copy_blocks: on CUDA, blocks must be whole 16-byte chunks");
  auto st = static_cast<cudaStream_t>(stream);
  auto* read = reinterpret_cast<cudaEvent_t*>(staging_read);
  if (*read == nullptr) {
    FS_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(read, cudaEventDisableTiming));
  } else {
    FS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(st, *read, 0));  // the last call's kernel, on any stream
  }
  FS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(staging, pairs, static_cast<size_t>(n) * 8, cudaMemcpyHostToDevice, st));
  copy_blocks_kernel<<<dim3(static_cast<unsigned>(n), static_cast<unsigned>(sh.num_layers)), kThreads, 0, st>>>(
      static_cast<char*>(s.k_pages(0)), reinterpret_cast<const int2*>(staging), sh.pool_elems() * elem, pv,
      static_cast<int32_t>(elem));
  FS_CUDA_CHECK_LAUNCH("copy_blocks kernel");
  FS_CUDA_RETURN_IF_ERROR(cudaEventRecord(*read, st));
  return Status::Ok();
}

void destroy_event(void* event) {
  if (event) cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

}  // namespace flashserve::cuda
