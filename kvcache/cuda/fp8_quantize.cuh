// An FP8 cache's quantization on the device (issue 25), one place for every kernel that writes
// FP8 pages (KVStorage's append, the CUDA model's fused rotary + append): code = sat_rne(x /
// scale) with x / scale in fp32 (IEEE division), the host's convention (dtype.h: round to nearest
// even, finite overflow and ±inf to ±max, NaN kept): cvt.rn.satfinite.
#pragma once

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace flashserve::cuda {

__device__ __forceinline__ uint32_t fp8_code(float x, float scale, bool e5m2) {
  return __nv_cvt_float_to_fp8(__fdiv_rn(x, scale), __NV_SATFINITE, e5m2 ? __NV_E5M2 : __NV_E4M3);
}

}  // namespace flashserve::cuda
