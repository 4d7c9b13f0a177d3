// FS_HOST_DEVICE marks small functions that run in CPU and CUDA code alike.
#pragma once

#if defined(__CUDACC__)
#define FS_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FS_HOST_DEVICE inline
#endif
