// The CUDA decode path behind decode(): instance selection, split kernel, merge.
#pragma once

#include "common/status.h"
#include "decode/params.h"

namespace flashserve::cuda {

// Shape checks specific to the CUDA kernels (head dims, dtypes, 16-byte page alignment).
Status validate_decode_cuda(const DecodeParams& p);
// Launches on `stream`; params validated. Asynchronous: returns after the launches.
Status decode_cuda(const DecodeParams& p, void* stream);

}  // namespace flashserve::cuda
