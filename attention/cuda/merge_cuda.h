#pragma once

#include "attention/merge.h"
#include "common/status.h"

namespace flashserve::cuda {

// CUDA merge_states; params validated; asynchronous on `stream`. dependent_launch: launched as
// a programmatic dependent (PDL) of the kernel before it in the stream, which must trigger it;
// the merge then waits for that kernel's writes on the device, and its launch overlaps it.
Status merge_cuda(const MergeParams& p, void* stream, bool dependent_launch = false);

}  // namespace flashserve::cuda
