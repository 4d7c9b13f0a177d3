#pragma once

#include <cstdint>

#include "attention/merge.h"
#include "common/status.h"

namespace flashserve::cuda {

// Ready flags of the states (decode's split kernel): state s of row r is ready when
// flags[s·state_stride + r] == epoch (released after the state's o and lse). The merge of a row
// waits for its states' flags, then resets them to 0.
struct MergeReady {
  uint64_t* flags = nullptr;
  int64_t state_stride = 0;
  uint64_t epoch = 0;
};

// CUDA merge_states; params validated; asynchronous on `stream`. dependent_launch: launched as
// a programmatic dependent (PDL) of the kernel before it in the stream, which must trigger it
// (its launch then overlaps that kernel). The merge of a row waits on the device for its
// states: for their ready flags when `ready.flags` is set (the row is merged as soon as its
// states are done), otherwise for the whole previous kernel.
Status merge_cuda(const MergeParams& p, void* stream, bool dependent_launch = false, const MergeReady& ready = {});

}  // namespace flashserve::cuda
