// What CUDA device this process can use, asked without failing where there is none (CI).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace flashserve {

struct CudaDeviceInfo {
  int device = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  int64_t total_memory = 0;          // bytes
  int64_t shared_memory_per_block = 0;  // bytes, opt-in maximum
};

// True when the build has CUDA and a device is present and usable.
bool cuda_available();
// Why cuda_available() is false, for skip messages ("built without CUDA", the driver's error).
std::string cuda_unavailable_reason();
Status cuda_device_info(int device, CudaDeviceInfo* info);
// Free and total device memory now (cudaMemGetInfo on `device`).
Status cuda_memory_info(int device, int64_t* free_bytes, int64_t* total_bytes);

}  // namespace flashserve
