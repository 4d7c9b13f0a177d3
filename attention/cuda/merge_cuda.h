#pragma once

#include "attention/merge.h"
#include "common/status.h"

namespace flashserve::cuda {

// CUDA merge_states; params validated; asynchronous on `stream`. dependent_launch: launched as
// a programmatic dependent (PDL) of the kernel before it in the stream, which must trigger it;
// the merge then waits for that kernel's writes on the device, and its launch overlaps it.
// sm_count: the device's SMs where the caller has them (0: asked here when needed).
Status merge_cuda(const MergeParams& p, void* stream, bool dependent_launch = false, int sm_count = 0);

}  // namespace flashserve::cuda
