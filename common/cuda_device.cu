#include <cuda_runtime.h>

#include "common/cuda_device.h"

namespace flashserve {

namespace {

cudaError_t probe() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaSuccess && count == 0) err = cudaErrorNoDevice;
  return err;
}

}  // namespace

bool cuda_available() { return probe() == cudaSuccess; }

std::string cuda_unavailable_reason() {
  const cudaError_t err = probe();
  if (err == cudaSuccess) return "";
  return std::string("no usable CUDA device: ") + cudaGetErrorString(err);
}

Status cuda_device_info(int device, CudaDeviceInfo* info) {
  cudaDeviceProp prop{};
  const cudaError_t err = cudaGetDeviceProperties(&prop, device);
  if (err != cudaSuccess)
    return internal_error(std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(err));
  info->device = device;
  info->name = prop.name;
  info->sm_count = prop.multiProcessorCount;
  info->cc_major = prop.major;
  info->cc_minor = prop.minor;
  info->total_memory = static_cast<int64_t>(prop.totalGlobalMem);
  info->shared_memory_per_block = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  return Status::Ok();
}

Status cuda_memory_info(int device, int64_t* free_bytes, int64_t* total_bytes) {
  int current = 0;
  cudaError_t err = cudaGetDevice(&current);
  if (err == cudaSuccess && current != device) err = cudaSetDevice(device);
  size_t free_b = 0, total_b = 0;
  if (err == cudaSuccess) err = cudaMemGetInfo(&free_b, &total_b);
  if (current != device) cudaSetDevice(current);
  if (err != cudaSuccess) return internal_error(std::string("cudaMemGetInfo: ") + cudaGetErrorString(err));
  *free_bytes = static_cast<int64_t>(free_b);
  *total_bytes = static_cast<int64_t>(total_b);
  return Status::Ok();
}

}  // namespace flashserve
