#pragma once

#include <cstdint>

#include "attention/merge.h"
#include "common/status.h"

namespace flashserve::cuda {

// CUDA merge_states; params validated; asynchronous on `stream`. dependent_launch: launched as
// a programmatic dependent (PDL) of the kernel before it in the stream, which must trigger it;
// the merge then waits for that kernel's writes on the device, and its launch overlaps it.
// bump: a counter that CTA 0 increments once the previous kernel is done (decode's call
// counter; see decode_kernel.cuh); may be null.
Status merge_cuda(const MergeParams& p, void* stream, bool dependent_launch = false, uint64_t* bump = nullptr);

}  // namespace flashserve::cuda
