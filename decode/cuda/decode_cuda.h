// The CUDA decode path behind decode(): instance selection, split kernel, merge; and the split
// kernel's launch shape, which the planner plans for.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "decode/params.h"
#include "decode/planner.h"

namespace flashserve::cuda {

// Whether the CUDA kernels take head_dim × dtype (the instances built: 64, 128; fp16, bf16).
bool decode_cuda_supports(int32_t head_dim, DType dtype);
// Shape checks specific to the CUDA kernels (head dims, dtypes, 16-byte page alignment).
Status validate_decode_cuda(const DecodeParams& p);
// Launches on `stream`; params validated. Asynchronous: returns after the launches.
Status decode_cuda(const DecodeParams& p, void* stream);

// The split kernel's launch shape on the current device for the head_dim × dtype instance:
// rows_per_cta = kDecodeRowsPerCta (a CTA takes up to 16 of an item's q_len × group rows; an
// item takes decode_row_blocks of them), ctas_per_sm = what the occupancy API says of the
// instance that would be launched (FlashInfer's num_blocks_per_sm), sm_count = the device's.
// Asked of the device once per device and instance (which also readies the instance: its
// shared-memory setting), then cached: decode_cuda reads the same cache, so no call after the
// first asks the device anything but which device is current. A failed query is not cached.
// A cudaDeviceReset drops the instance's setting, not the cache: do not reset a device that
// decode has run on.
Status decode_launch_shape(int32_t head_dim, DType dtype, DType pages_dtype, DecodeLaunchShape* shape);
// CTAs the split kernel launches for one item (sequence, kv head, split):
// ceil(q_len × group / rows_per_cta), as the launch computes it.
int32_t decode_row_blocks(int32_t q_len, int32_t group);
// Times decode_launch_shape's cache has asked a device (misses), for tests.
int64_t decode_launch_shape_queries();

}  // namespace flashserve::cuda
