// The prefill family's entry point: one call, dispatched on params.device.
#pragma once

#include "attention/params.h"
#include "common/status.h"

namespace flashserve {

// Most head_dim the CPU path takes (any value 1..kMaxHeadDimCPU); CUDA takes fewer.
inline constexpr int kMaxHeadDimCPU = 256;

// Runs varlen prefill attention. On the CPU, stream must be null; on CUDA it is the
// cudaStream_t to launch on. Returns a status and writes nothing when the params are bad.
Status prefill(const PrefillParams& params, void* stream = nullptr);

// The key tile the CUDA warp-specialized (Hopper) kernel takes for params (cuda::prefill_ws_key_tile:
// 176 or 128 at head_dim 128, by the call's shapes and mask), into *key_tile; benchmarks read it
// rather than restate the rule. Unsupported in a build without CUDA.
Status prefill_ws_key_tile(const PrefillParams& params, int* key_tile);

// Checks everything that can be checked without reading tensor contents: dtypes, head
// counts, head_dim, null and misaligned pointers, strides, mask fields. Shared by all
// devices.
Status validate_prefill_shapes(const PrefillParams& params);

// Checks the length arrays and block tables; they must be readable on the host
// (the CPU path, or a caller that mirrors them).
Status validate_prefill_lengths_host(const PrefillParams& params);

}  // namespace flashserve
