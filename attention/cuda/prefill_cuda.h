// The CUDA prefill path behind prefill().
#pragma once

#include "attention/params.h"
#include "common/status.h"

namespace flashserve::cuda {

// Checks specific to the CUDA kernels: head dims, dtypes, 16-byte alignment, max_seqlen_q.
Status validate_prefill_cuda(const PrefillParams& p);
// Launches on `stream` (asynchronous); params validated.
Status prefill_cuda(const PrefillParams& p, void* stream);

}  // namespace flashserve::cuda
