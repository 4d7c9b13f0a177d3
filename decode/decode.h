// Split-K Flash-Decoding over the paged KV cache: the decode family's entry point.
#pragma once

#include "common/status.h"
#include "decode/params.h"
#include "decode/planner.h"

namespace flashserve {

// Runs decode attention, dispatched on params.device. On the CPU, stream must be null and
// num_splits == 0 asks decode() to plan (plan_decode with the thread pool's size) and to use
// a workspace of its own. Returns a status and writes nothing when the params are bad.
// On CUDA, from sm_90 on, the kernels use programmatic dependent launch: the split kernel may
// become resident while the kernel before it in the stream is finishing, but reads nothing (q,
// lengths, table, K/V, workspace) before that kernel's writes are visible; the merge follows
// the split kernel the same way and lets the next kernel launch early. A kernel after decode
// that is itself launched as a programmatic dependent must wait on the device
// (cudaGridDependencySynchronize / griddepcontrol.wait) before it reads decode's output, as
// PDL requires anyway; and if the kernel just before decode is itself a programmatic dependent,
// it must wait for its own predecessor before it ends, or decode's wait covers only that kernel.
// Ordinary launches and graph captures of them need nothing.
Status decode(const DecodeParams& params, void* stream = nullptr);

// The machine plan_decode plans for (DecodePlanInput::shape) when decode runs on `device`: on
// CUDA, the split kernel's on the current device for head_dim × dtype (cuda::decode_launch_shape:
// asked of the device once, then cached; an error where the build has no CUDA, there is no
// device, or the kernels lack head_dim or dtype); on the CPU, {0, 1, the thread pool's threads}
// (the plan decode() makes itself with num_splits 0). pages_dtype: the pages' type where it is not
// dtype (FP8: its instance holds another number of CTAs an SM, e.g. 3 at head_dim 64 where the
// bf16 one holds 4); the four-argument form takes dtype's own pages.
Status decode_launch_shape(Device device, int32_t head_dim, DType dtype, DecodeLaunchShape* shape);
Status decode_launch_shape(Device device, int32_t head_dim, DType dtype, DType pages_dtype, DecodeLaunchShape* shape);
// The machine when the caller names none (the C ABI's num_workers = 0): the CUDA one where the
// build has CUDA, a device is usable (cuda_available) and the CUDA kernels take head_dim and
// dtype; otherwise the CPU's. Once a CUDA device is chosen, its query's failure is an error.
Status decode_local_launch_shape(int32_t head_dim, DType dtype, DecodeLaunchShape* shape);
// The same for pages of pages_dtype (dtype's own, or FP8: the CUDA shape of its FP8 instance).
Status decode_local_launch_shape(int32_t head_dim, DType dtype, DType pages_dtype, DecodeLaunchShape* shape);

// Checks that need no tensor contents (shared by all devices).
Status validate_decode_shapes(const DecodeParams& params);
// Checks the block table and lengths, which must be host-readable, and that the plan covers
// every sequence.
Status validate_decode_lengths_host(const DecodeParams& params);

}  // namespace flashserve
