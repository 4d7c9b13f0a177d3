// Hopper (sm_90a) warpgroup MMA helpers: shared-memory matrix descriptors for the 128-byte
// swizzled layout, the wgmma shapes the sm90 prefill kernels issue, and the fences.
//
// Layout ("SW128"): a tile of R rows × C 16-bit columns is stored as C/64 column blocks, each
// [R rows][64 elements = 128 bytes], with the 16-byte chunk c of row r at chunk c ^ (r mod 8)
// (sw128_offset). Every tile starts on a 1024-byte boundary, so the hardware's swizzle (address
// bits 4-6 XOR bits 7-9) matches it, and a k-step of 16 columns inside a column block is the
// descriptor's start address plus 32 bytes.
//  - K-major operand (Q as A, K as B of S = Q·Kᵀ): 8-row groups 1024 bytes apart (SBO); the
//    leading offset is unused with swizzling (1).
//  - MN-major operand (V as B of O = P·V, rows = keys = the K dimension): 8-key groups 1024
//    bytes apart (SBO); over more than one column block (N > 64) the leading offset is the
//    stride between the column blocks (mnmajor_desc_blocks), else unused (mnmajor_desc sets it
//    to 1024 too).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace flashserve::cuda {

// Element offset of chunk `chunk` (16 bytes) of row `row` in a SW128 tile of kRows rows.
template <int kRows>
__device__ __forceinline__ int sw128_offset(int row, int chunk) {
  return (chunk >> 3) * (kRows * 64) + row * 64 + (((chunk & 7) ^ (row & 7)) << 3);
}

// The fields of a SW128 descriptor other than its start address.
__device__ __forceinline__ constexpr uint64_t sw128_desc_fields(uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return (static_cast<uint64_t>(lbo_bytes >> 4) << 16) | (static_cast<uint64_t>(sbo_bytes >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ uint64_t sw128_desc(const void* smem, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | sw128_desc_fields(lbo_bytes, sbo_bytes);
}
__device__ __forceinline__ uint64_t kmajor_desc(const void* smem) { return sw128_desc(smem, 16, 1024); }
__device__ __forceinline__ uint64_t mnmajor_desc(const void* smem) { return sw128_desc(smem, 1024, 1024); }
// kmajor_desc in two words, for a kernel that keeps one 32-bit value live instead of a 64-bit
// descriptor a k-step: kmajor_desc_lo(smem) + bytes / 16 is the low word (start address and
// leading offset) of kmajor_desc(smem + bytes), as shared memory is below 256 KB (the 14-bit
// start field does not carry); kmajor_desc_from_lo puts the constant high word above it.
__device__ __forceinline__ uint32_t kmajor_desc_lo(const void* smem) { return static_cast<uint32_t>(kmajor_desc(smem)); }
__device__ __forceinline__ uint64_t kmajor_desc_from_lo(uint32_t lo) {
  return (sw128_desc_fields(16, 1024) & 0xFFFFFFFF00000000ull) | lo;
}
// Any SW128 descriptor from its low word: the leading offset is in the low word, and the high
// word (the 1024-byte stride offset, the swizzle mode) is the same for the K-major and MN-major
// ones made here, so kmajor_desc_from_lo's serves both.
__device__ __forceinline__ uint64_t sw128_desc_from_lo(uint32_t lo) { return kmajor_desc_from_lo(lo); }
// MN-major over several column blocks (N > 64): the leading offset is the stride between the
// 64-column blocks along N, the stride offset the 8-key groups' 1024 bytes.
__device__ __forceinline__ uint64_t mnmajor_desc_blocks(const void* smem, uint32_t block_bytes) {
  return sw128_desc(smem, block_bytes, 1024);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pins registers at this point of the program: the compiler sees wgmma's accumulators and A
// operands as read and written when the instruction is issued, not when wgmma_wait retires it,
// so after each wait the registers it retires are fenced (else the code that reads or rewrites
// them may be moved above the wait, and code placed between two waits may sink below the second).
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i][0]), "+r"(r[i][1]), "+r"(r[i][2]), "+r"(r[i][3])::"memory");
}
// Makes this thread's generic-proxy shared-memory writes (cp.async, st.shared) visible to the
// async proxy (wgmma operands); a barrier must follow before other threads' wgmmas read them.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// d[N/2] (+)= A(64×16, K-major in shared memory) · B(16×N, K-major): m64nNk16, N = 80, 128 or
// 176 (the S tile widths of the Hopper kernels). accumulate = 0 overwrites d.
template <int N, typename T>
__device__ void wgmma_ss(float (&d)[N / 2], uint64_t a, uint64_t b, int accumulate);
// d[N/2] += A(64×16, registers: the mma.sync A fragment of this warp's 16 rows) · B(16×N,
// MN-major in shared memory): m64nNk16. N = 64: one column block (mnmajor_desc); N = 128 or 256:
// the whole head dim of O = P·V in one instruction, N/64 column blocks `block_bytes` apart
// (mnmajor_desc_blocks), d the column blocks' accumulators one after another (o[c][32] flattened).
template <int N, typename T>
__device__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b);
template <typename T>
__device__ __forceinline__ void wgmma_rs_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t b) {
  wgmma_rs<64, T>(d, a, b);
}

#define FS_D8(o)                                                                                         \
  "+f"(d[o]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), "+f"(d[o + 4]), "+f"(d[o + 5]), "+f"(d[o + 6]), \
      "+f"(d[o + 7])
#define FS_D32 FS_D8(0), FS_D8(8), FS_D8(16), FS_D8(24)
#define FS_D40 FS_D32, FS_D8(32)
#define FS_D64 FS_D32, FS_D8(32), FS_D8(40), FS_D8(48), FS_D8(56)
#define FS_D88 FS_D64, FS_D8(64), FS_D8(72), FS_D8(80)
#define FS_D128 FS_D88, FS_D8(88), FS_D8(96), FS_D8(104), FS_D8(112), FS_D8(120)
#define FS_R32 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
  "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FS_R40 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
  "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}"
#define FS_R64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
  "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, " \
  "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define FS_R88 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
  "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, " \
  "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, " \
  "%66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87}"
#define FS_R128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
// One m64nNk16 with both operands in shared memory: N/2 accumulators, then a, b, accumulate.
#define FS_WGMMA_SS(N, T, TY, DLIST, RLIST, IA, IB, IACC)                                                  \
  template <>                                                                                             \
  __device__ __forceinline__ void wgmma_ss<N, T>(float (&d)[N / 2], uint64_t a, uint64_t b, int accumulate) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IACC ", 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " " RLIST ", %" #IA ", %" #IB   \
                 ", p, 1, 1, 0, 0;\n}\n"                                                                  \
                 : DLIST                                                                                  \
                 : "l"(a), "l"(b), "r"(accumulate));                                                      \
  }
// One m64nNk16 with A from registers: N/2 accumulators, then a[0..3], b and the constant 1
// (accumulate).
#define FS_WGMMA_RS(N, T, TY, DLIST, RLIST, A0, A1, A2, A3, IB, IONE)                                    \
  template <>                                                                                           \
  __device__ __forceinline__ void wgmma_rs<N, T>(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IONE ", 0;\n"                                   \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " " RLIST ", {%" #A0 ", %" #A1 \
                 ", %" #A2 ", %" #A3 "}, %" #IB ", p, 1, 1, 1;\n}\n"                                     \
                 : DLIST                                                                                \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));                        \
  }
#define FS_WGMMA_DEFINE(T, TY)                                                                           \
  FS_WGMMA_SS(64, T, TY, FS_D32, FS_R32, 32, 33, 34)                                                      \
  FS_WGMMA_SS(80, T, TY, FS_D40, FS_R40, 40, 41, 42)                                                      \
  FS_WGMMA_SS(128, T, TY, FS_D64, FS_R64, 64, 65, 66)                                                     \
  FS_WGMMA_SS(176, T, TY, FS_D88, FS_R88, 88, 89, 90)                                                     \
  FS_WGMMA_RS(64, T, TY, FS_D32, FS_R32, 32, 33, 34, 35, 36, 37)                                          \
  FS_WGMMA_RS(128, T, TY, FS_D64, FS_R64, 64, 65, 66, 67, 68, 69)                                         \
  FS_WGMMA_RS(256, T, TY, FS_D128, FS_R128, 128, 129, 130, 131, 132, 133)
FS_WGMMA_DEFINE(__nv_bfloat16, "bf16")
FS_WGMMA_DEFINE(__half, "f16")
#undef FS_WGMMA_DEFINE
#undef FS_WGMMA_RS
#undef FS_R128
#undef FS_D128
#undef FS_WGMMA_SS
#undef FS_R88
#undef FS_R64
#undef FS_R40
#undef FS_R32
#undef FS_D88
#undef FS_D64
#undef FS_D40
#undef FS_D32
#undef FS_D8

}  // namespace flashserve::cuda
