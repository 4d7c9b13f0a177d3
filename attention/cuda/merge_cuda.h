#pragma once

#include "attention/merge.h"
#include "common/status.h"

namespace flashserve::cuda {

// CUDA merge_states; params validated; asynchronous on `stream`.
Status merge_cuda(const MergeParams& p, void* stream);

}  // namespace flashserve::cuda
