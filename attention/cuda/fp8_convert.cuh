// FP8 pages on CUDA (issue 25): the tile layout of FP8 codes in shared memory and their exact
// conversion to fp16, shared by the decode kernel (fragments converted in registers) and the
// mma.sync prefill kernel (a tile converted once in shared memory). An FP8 code, e4m3 and e5m2
// alike, is exactly an fp16 value; the kernels run their MMAs in fp16 and fold the scales in.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "attention/cuda/device_utils.cuh"
#include "common/dtype.h"

namespace flashserve::cuda {

// Offset (bytes) of 16-byte chunk `chunk` of key `row` in a swizzled FP8 tile of kHeadDim-byte
// rows: 8 rows read at one chunk column (ldmatrix) hit 32 banks. 128-byte rows: chunks XOR row
// mod 8; 64-byte rows (two a 128-byte line): chunks XOR (row / 2) mod 4, so the even rows take
// four distinct chunk slots of their half of the line, the odd rows the other half's.
template <int kHeadDim>
__device__ __forceinline__ int swz_fp8(int row, int chunk) {
  if constexpr (kHeadDim == 128) {
    return row * 128 + ((chunk ^ (row & 7)) << 4);
  } else {
    return row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4);
  }
}

// Two FP8 codes (bits 0..15 of x) as an fp16 pair: e4m3 by the hardware's conversion, e5m2 by
// byte placement (exact: fp8_e5m2x4_to_fp16x2x2, common/dtype.h).
template <typename KV>
__device__ __forceinline__ uint32_t fp8x2_to_half2(uint32_t x) {
  if constexpr (std::is_same_v<KV, __nv_fp8_e5m2>) {
    uint32_t lo, hi;
    fp8_e5m2x4_to_fp16x2x2(x, lo, hi);
    return lo;
  } else {
    const __half2_raw a = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(x & 0xffffu), __NV_E4M3);
    return static_cast<uint32_t>(a.x) | (static_cast<uint32_t>(a.y) << 16);
  }
}
// Four FP8 codes (bytes 0..3 of x) as two fp16 pairs: lo = codes 0, 1; hi = codes 2, 3.
// kHiByImad: e4m3's high pair taken by a multiply-high by 2^16 (IMAD.HI, which ptxas keeps) instead
// of a shift (SHF, on the integer ALU pipe that the e4m3 conversions load); the same bits. The FP8
// prefill's register path takes it (session 36: there with its other changes, WsFp8Dst); alone on
// the copy path it measured level (454 vs 463 TFLOP/s, within the run's spread).
template <typename KV, bool kHiByImad = false>
__device__ __forceinline__ void fp8x4_to_half2x2(uint32_t x, uint32_t& lo, uint32_t& hi) {
  if constexpr (std::is_same_v<KV, __nv_fp8_e5m2>) {
    fp8_e5m2x4_to_fp16x2x2(x, lo, hi);
  } else {
    lo = fp8x2_to_half2<KV>(x);
    hi = fp8x2_to_half2<KV>(kHiByImad ? __umulhi(x, 0x10000u) : x >> 16);
  }
}

// A tile of kKeys rows of FP8 codes (src, swz_fp8) as fp16 (dst, the 16-bit kernels' swz<kHeadDim,
// __half>), by kThreads threads, a 16-byte chunk of 16 codes each a pass: one 16-byte shared
// load, 8 conversions, two 16-byte stores. Pass i of thread tid takes chunk c of row r with
// idx = tid + i·kThreads, r = idx % 8 + 8·(idx / (8·kC)), c = (idx / 8) % kC (kC = kHeadDim / 16
// chunks a row): the 8 threads of a shared-memory phase take 8 consecutive rows at one chunk
// column, which both swizzles spread over 32 banks (no conflicts on the load or the stores).
template <int kHeadDim, int kKeys, int kThreads, typename KV>
__device__ __forceinline__ void fp8_tile_to_half(const uint8_t* src, __half* dst, int tid) {
  constexpr int kC = kHeadDim / 16;
  static_assert((kKeys * kC) % kThreads == 0 && kKeys % 8 == 0, "whole passes of whole 8-row groups");
#pragma unroll
  for (int i = 0; i < kKeys * kC / kThreads; ++i) {
    const int idx = tid + i * kThreads;
    const int r = idx % 8 + 8 * (idx / (8 * kC)), c = (idx / 8) % kC;
    const uint4 codes = *reinterpret_cast<const uint4*>(src + swz_fp8<kHeadDim>(r, c));
    uint4 lo, hi;  // dims 16·c .. + 7, + 8 .. + 15
    fp8x4_to_half2x2<KV>(codes.x, lo.x, lo.y);
    fp8x4_to_half2x2<KV>(codes.y, lo.z, lo.w);
    fp8x4_to_half2x2<KV>(codes.z, hi.x, hi.y);
    fp8x4_to_half2x2<KV>(codes.w, hi.z, hi.w);
    *reinterpret_cast<uint4*>(dst + swz<kHeadDim, __half>(r, 2 * c)) = lo;
    *reinterpret_cast<uint4*>(dst + swz<kHeadDim, __half>(r, 2 * c + 1)) = hi;
  }
}

}  // namespace flashserve::cuda
