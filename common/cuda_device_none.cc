// The CPU-only build's answers.
#include "common/cuda_device.h"

namespace flashserve {

bool cuda_available() { return false; }
std::string cuda_unavailable_reason() { return "flashserve was built without CUDA"; }
Status cuda_device_info(int, CudaDeviceInfo*) { return unsupported("flashserve was built without CUDA"); }
Status cuda_memory_info(int, int64_t*, int64_t*) { return unsupported("flashserve was built without CUDA"); }

}  // namespace flashserve
