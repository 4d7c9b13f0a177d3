// Split-K Flash-Decoding over the paged KV cache: the decode family's entry point.
#pragma once

#include "common/status.h"
#include "decode/params.h"

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

// Checks that need no tensor contents (shared by all devices).
Status validate_decode_shapes(const DecodeParams& params);
// Checks the block table and lengths, which must be host-readable, and that the plan covers
// every sequence.
Status validate_decode_lengths_host(const DecodeParams& params);

}  // namespace flashserve
