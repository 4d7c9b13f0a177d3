// Turning CUDA errors into Status. Every CUDA call and every launch is checked.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/status.h"

namespace flashserve {

inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return internal_error(std::string(what) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

}  // namespace flashserve

#define FS_CUDA_RETURN_IF_ERROR(expr) FS_RETURN_IF_ERROR(::flashserve::cuda_status((expr), #expr))
// After a launch: the launch's own error (bad configuration, too much shared memory).
#define FS_CUDA_CHECK_LAUNCH(what) FS_RETURN_IF_ERROR(::flashserve::cuda_status(cudaGetLastError(), what))
