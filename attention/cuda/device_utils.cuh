// Helpers shared by the CUDA attention kernels (decode and prefill): on the host, the
// architecture a kernel was built for and the launch configuration (programmatic dependent
// launch, thread-block clusters); on the device, storage-type conversions, cp.async (with an
// optional L2 cache policy), mma.sync m16n8k16 and ldmatrix, the swizzled tile layout, and the
// mask rule of MaskParams.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cassert>
#include <cstdint>

#include "attention/params.h"

namespace flashserve::cuda {

// The architecture a kernel's loaded code was written for, asked once a kernel: the lower of
// cudaFuncAttributes::binaryVersion (90 for sm_90) and ptxVersion (the virtual architecture its
// source targeted, which decides __CUDA_ARCH__: PTX of an older architecture JIT-run on a Hopper
// has binaryVersion 90 but no sm_90 code paths); 0 if the runtime cannot say. Kernels that wait
// for their predecessor with griddepcontrol do so only in code for sm_90+: launch them as
// programmatic dependents only when this is >= 90.
template <auto Kernel>
int binary_version() {
  static const int version = [] {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, Kernel) != cudaSuccess) return 0;
    return attr.ptxVersion > 0 && attr.ptxVersion < attr.binaryVersion ? attr.ptxVersion : attr.binaryVersion;
  }();
  return version;
}

// A cudaLaunchKernelEx configuration; `dependent`: launched as a programmatic dependent of the
// previous kernel in the stream (programmatic stream serialization), so its CTAs may start
// before that kernel ends. Such a kernel must execute griddepcontrol.wait before it reads what
// the previous kernel writes (see binary_version). Not copyable: config.attrs points into it.
struct LaunchConfig {
  cudaLaunchConfig_t config = {};
  cudaLaunchAttribute attr[2] = {};

  LaunchConfig(dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream, bool dependent) {
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem_bytes;
    config.stream = stream;
    config.attrs = attr;
    if (dependent) {
      attr[config.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[config.numAttrs].val.programmaticStreamSerializationAllowed = 1;
      ++config.numAttrs;
    }
  }
  LaunchConfig(const LaunchConfig&) = delete;
  LaunchConfig& operator=(const LaunchConfig&) = delete;
  // Launch in thread-block clusters of dims (sm_90+; the grid a multiple of dims): a cluster's
  // CTAs are placed on the SMs of one GPC together. At most once.
  void cluster(dim3 dims) {
    assert(config.numAttrs < sizeof(attr) / sizeof(attr[0]));
    attr[config.numAttrs].id = cudaLaunchAttributeClusterDimension;
    attr[config.numAttrs].val.clusterDim.x = dims.x;
    attr[config.numAttrs].val.clusterDim.y = dims.y;
    attr[config.numAttrs].val.clusterDim.z = dims.z;
    ++config.numAttrs;
  }
  // Back to unclustered CTAs (after a clustered launch failed).
  void drop_cluster() {
    unsigned kept = 0;
    for (unsigned i = 0; i < config.numAttrs; ++i) {
      if (attr[i].id != cudaLaunchAttributeClusterDimension) attr[kept++] = attr[i];
    }
    config.numAttrs = kept;
  }
};

__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int src_size = valid ? 16 : 0;  // 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_size));
}
// An L2 cache policy for a stream a kernel reads once from DRAM (decode's K/V): its lines are
// evicted first, so the small data read every call (lengths, block tables, queries, partial
// states) stays in L2 beside a stream larger than it.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}
// The prefill kernels' policies (prefill v4.36): K and V, which the CTAs on the q tiles of a
// (query head, sequence) pair read again and again, kept in L2 before the data read once (Q: evict
// first); evict_normal is the same hint's "none", for A/B.
__device__ __forceinline__ uint64_t l2_evict_last_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ uint64_t l2_evict_normal_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}
// cp_async_16 with an L2 cache policy (l2_evict_first_policy).
__device__ __forceinline__ void cp_async_16_hint(void* smem, const void* gmem, bool valid, uint64_t policy) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int src_size = valid ? 16 : 0;  // 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(dst), "l"(gmem),
               "r"(src_size), "l"(policy));
}
// Prefetches bytes (a multiple of 16) from gmem (16-byte aligned) into L2 (sm_90's bulk
// prefetch; a no-op before): no register result and no L1 line, so it may run on data another
// kernel is still writing (L2 is the GPU's point of coherence; the data is read later, after
// the kernels' ordering is established).
__device__ __forceinline__ void prefetch_l2(const void* gmem, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(gmem), "r"(bytes));
#endif
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// mma.sync.m16n8k16 with fp32 accumulation: D = A·B + D. A: 16×16 (row), B: 16×8 (col).
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// stmatrix (sm_90): four 8 x 8 b16 matrices from the mma accumulator layout (r[j]: matrix j's row
// lane / 4, columns 2·(lane % 4) and + 1); lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void stmatrix_x4(void* smem_row, const uint32_t (&r)[4]) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_row));
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n"
               :
               : "r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Offset (elements) of 16-byte chunk `chunk` of row `row` in a swizzled [rows][kHeadDim] tile:
// chunks XOR (row mod 8), so 8 rows read at one chunk column (ldmatrix) hit 32 banks.
template <int kHeadDim, typename T>
__device__ __forceinline__ int swz(int row, int chunk) {
  constexpr int kElems = 16 / sizeof(T);
  return row * kHeadDim + ((chunk ^ (row & 7)) * kElems);
}

// 2^x, the hardware approximation (relative error ~2^-22; ex2 of -inf is 0).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace flashserve::cuda
