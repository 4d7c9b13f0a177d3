#include "attention/cuda/prefill_cuda.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "attention/cuda/prefill_kernel.cuh"
#include "common/cuda_check.h"
#include "kvcache/page_view_check.h"

namespace flashserve::cuda {

extern template cudaError_t launch_prefill<64, __half>(const PrefillParams&, cudaStream_t);
extern template cudaError_t launch_prefill<64, __nv_bfloat16>(const PrefillParams&, cudaStream_t);
extern template cudaError_t launch_prefill<128, __half>(const PrefillParams&, cudaStream_t);
extern template cudaError_t launch_prefill<128, __nv_bfloat16>(const PrefillParams&, cudaStream_t);
#if FLASHSERVE_PREFILL_HD256
extern template cudaError_t launch_prefill<256, __half>(const PrefillParams&, cudaStream_t);
extern template cudaError_t launch_prefill<256, __nv_bfloat16>(const PrefillParams&, cudaStream_t);
#endif
template <int kHeadDim, typename T>
cudaError_t launch_prefill_sm90(const PrefillParams& p, cudaStream_t stream);
extern template cudaError_t launch_prefill_sm90<64, __half>(const PrefillParams&, cudaStream_t);
extern template cudaError_t launch_prefill_sm90<64, __nv_bfloat16>(const PrefillParams&, cudaStream_t);
extern template cudaError_t launch_prefill_sm90<128, __half>(const PrefillParams&, cudaStream_t);
extern template cudaError_t launch_prefill_sm90<128, __nv_bfloat16>(const PrefillParams&, cudaStream_t);
cudaError_t prefill_sm90_runs_here(bool* runs);

#if FLASHSERVE_PREFILL_HD256
constexpr bool kHeadDim256 = true;
#else
constexpr bool kHeadDim256 = false;
#endif

namespace {

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// Which kernel: the wgmma one where the device runs this build's sm_90a code, else mma.sync.
// FLASHSERVE_PREFILL_KERNEL=mma forces the mma.sync kernel (cross-checks, A/B benchmarks);
// =wgmma insists on the Hopper one (an error where it cannot run). Read at every call.
Status pick_wgmma(bool* wgmma) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices];  // 0 unknown, 1 no, 2 yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    (void)cudaGetLastError();
    device = -1;
  }
  int known = device >= 0 ? cached[device].load(std::memory_order_relaxed) : 0;
  if (known == 0) {
    bool runs = false;
    const cudaError_t err = prefill_sm90_runs_here(&runs);
    if (err != cudaSuccess) return cuda_status(err, "prefill: kernel attributes");  // not cached: asked again
    known = runs ? 2 : 1;
    if (device >= 0) cached[device].store(known, std::memory_order_relaxed);
  }
  const char* force = std::getenv("FLASHSERVE_PREFILL_KERNEL");
  if (force != nullptr && std::strcmp(force, "mma") == 0) {
    *wgmma = false;
  } else if (force != nullptr && std::strcmp(force, "wgmma") == 0) {
    if (known != 2) return unsupported("prefill: FLASHSERVE_PREFILL_KERNEL=wgmma, but this device does not run the sm_90a kernel");
    *wgmma = true;
  } else {
    *wgmma = known == 2;
  }
  return Status::Ok();
}

}  // namespace

Status validate_prefill_cuda(const PrefillParams& p) {
  if (p.dtype == DType::kFloat32) return unsupported("prefill: the CUDA kernels take fp16 or bf16, not fp32");
  if (p.head_dim == 256 && !kHeadDim256)
    return unsupported("prefill: head_dim 256 on CUDA needs a build with -DFLASHSERVE_PREFILL_HD256=ON");
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256)
    return unsupported("prefill: head_dim " + std::to_string(p.head_dim) + " is not supported on CUDA (64, 128, 256)");
  if (p.batch > 65535 || p.num_heads > 65535) return unsupported("prefill: batch and num_heads must be <= 65535 on CUDA");
  if (p.batch > 0 && p.max_seqlen_q <= 0)
    return invalid_argument("prefill: CUDA needs max_seqlen_q > 0 (the longest query length)");
  const int64_t chunk = 16 / dtype_size(p.dtype);  // elements in 16 bytes
  if (!aligned16(p.q) || p.q_row_stride % chunk || p.q_head_stride % chunk)
    return invalid_argument("prefill: CUDA q must be 16-byte aligned, with strides of whole 16-byte chunks");
  if (reinterpret_cast<uintptr_t>(p.o) % 4 || p.o_row_stride % 2 || p.o_head_stride % 2)
    return invalid_argument("prefill: CUDA o must be 4-byte aligned, with even strides");
  if (p.paged) {
    FS_RETURN_IF_ERROR(validate_page_view_cuda("prefill", p.pages, dtype_size(p.dtype)));
  } else if (p.total_k > 0) {
    if (!aligned16(p.k) || !aligned16(p.v) || p.k_row_stride % chunk || p.k_head_stride % chunk ||
        p.v_row_stride % chunk || p.v_head_stride % chunk)
      return invalid_argument("prefill: CUDA k and v must be 16-byte aligned, with strides of whole 16-byte chunks");
  }
  return Status::Ok();
}

Status prefill_cuda(const PrefillParams& p, void* stream_ptr) {
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  cudaError_t err;
#if FLASHSERVE_PREFILL_HD256
  if (p.head_dim == 256) {  // the mma.sync kernel only (a wgmma tile of 256 columns does not fit)
    int device = 0, optin = 0;
    err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (err != cudaSuccess) return cuda_status(err, "prefill: device attributes");
    constexpr int kNeed = PrefillTraits<256, __half>::kSmemBytes;
    if (optin < kNeed)
      return unsupported("prefill: head_dim 256 needs " + std::to_string(kNeed) + " bytes of shared memory per block; " +
                         "this device allows " + std::to_string(optin));
    err = p.dtype == DType::kFloat16 ? launch_prefill<256, __half>(p, stream)
                                     : launch_prefill<256, __nv_bfloat16>(p, stream);
    return cuda_status(err, "prefill kernel (head_dim 256)");
  }
#endif
  bool wgmma = false;
  FS_RETURN_IF_ERROR(pick_wgmma(&wgmma));
  if (wgmma) {
    if (p.head_dim == 64) {
      err = p.dtype == DType::kFloat16 ? launch_prefill_sm90<64, __half>(p, stream)
                                       : launch_prefill_sm90<64, __nv_bfloat16>(p, stream);
    } else {
      err = p.dtype == DType::kFloat16 ? launch_prefill_sm90<128, __half>(p, stream)
                                       : launch_prefill_sm90<128, __nv_bfloat16>(p, stream);
    }
    return cuda_status(err, "prefill kernel (sm90)");
  }
  if (p.head_dim == 64) {
    err = p.dtype == DType::kFloat16 ? launch_prefill<64, __half>(p, stream) : launch_prefill<64, __nv_bfloat16>(p, stream);
  } else {
    err = p.dtype == DType::kFloat16 ? launch_prefill<128, __half>(p, stream)
                                     : launch_prefill<128, __nv_bfloat16>(p, stream);
  }
  return cuda_status(err, "prefill kernel");
}

}  // namespace flashserve::cuda
