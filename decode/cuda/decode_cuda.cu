#include "decode/cuda/decode_cuda.h"

#include <atomic>
#include <mutex>
#include <string>

#include "attention/cuda/merge_cuda.h"
#include "attention/dispatch.h"
#include "attention/merge.h"
#include "common/cuda_check.h"
#include "decode/cuda/decode_kernel.cuh"
#include "kvcache/page_view_check.h"

namespace flashserve::cuda {

// The instances built, one per file (decode_hd*_*.cu), declared here.
using DecodeInstances = KernelInstances<HeadDims<64, 128>, DTypes<DType::kFloat16, DType::kBFloat16>>;
#define FS_DECODE_INSTANCE(HD, T, KV)                                                                          \
  extern template cudaError_t launch_decode_split<HD, T, KV>(const DecodeParams&, cudaStream_t, bool, int); \
  extern template cudaError_t prepare_decode_split<HD, T, KV>(int*);
#define FS_DECODE_INSTANCES(HD, T)          \
  FS_DECODE_INSTANCE(HD, T, T)              \
  FS_DECODE_INSTANCE(HD, T, __nv_fp8_e4m3) \
  FS_DECODE_INSTANCE(HD, T, __nv_fp8_e5m2)
// Each (head_dim, dtype) with 16-bit pages of its own type and with FP8 pages of either format
// (issue 25; decode_hd*_*_e4m3.cu, _e5m2.cu).
FS_DECODE_INSTANCES(64, __half)
FS_DECODE_INSTANCES(64, __nv_bfloat16)
FS_DECODE_INSTANCES(128, __half)
FS_DECODE_INSTANCES(128, __nv_bfloat16)
#undef FS_DECODE_INSTANCES
#undef FS_DECODE_INSTANCE

namespace {

// The pages' element type as a compile-time tag for a call of the instance with storage type T:
// T itself (16-bit pages), or an FP8 format. pages is a call's KVPageView::dtype, validated.
template <typename T, typename F>
auto with_page_type(DType pages, F&& f) {
  if (pages == DType::kFp8E4M3) return f(static_cast<__nv_fp8_e4m3*>(nullptr));
  if (pages == DType::kFp8E5M2) return f(static_cast<__nv_fp8_e5m2*>(nullptr));
  return f(static_cast<T*>(nullptr));
}
// The index of the pages' kind in LaunchFacts' table: 0 the call's own type, 1 e4m3, 2 e5m2.
int page_kind(DType pages) { return pages == DType::kFp8E4M3 ? 1 : pages == DType::kFp8E5M2 ? 2 : 0; }

// What a launch needs of the device, per device and instance: asked once (launch_facts).
struct LaunchFacts {
  std::atomic<bool> ready{false};  // the fields below are set (release) and final
  int sm_count = 0;
  int cc_major = 0;
  int ctas_per_sm = 0;
};

constexpr int kMaxDevices = 64;
constexpr int kInstances = instance_count<DecodeInstances>();
LaunchFacts g_facts[kMaxDevices][kInstances][3];  // [.][.][page_kind]
std::mutex g_facts_mutex;  // held while a device is asked
std::atomic<int64_t> g_queries{0};


// The current device's facts for a built instance (with pages of `pages`' type: the call's own,
// or FP8). After the first call for a device and instance: cudaGetDevice and an atomic load.
Status launch_facts(int32_t head_dim, DType dtype, DType pages, const LaunchFacts** out) {
  int device = 0;
  FS_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  if (device < 0 || device >= kMaxDevices)
    return unsupported("decode: device " + std::to_string(device) + " (the launch-shape cache holds " +
                       std::to_string(kMaxDevices) + ")");
  FS_RETURN_IF_ERROR(check_built<DecodeInstances>("decode on CUDA", head_dim, dtype));
  LaunchFacts& f = g_facts[device][instance_index<DecodeInstances>(head_dim, dtype)][page_kind(pages)];
  if (!f.ready.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(g_facts_mutex);
    if (!f.ready.load(std::memory_order_relaxed)) {
      g_queries.fetch_add(1, std::memory_order_relaxed);
      int sms = 0, cc_major = 0, ctas_per_sm = 0;
      FS_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
      FS_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, device));
      auto prepare = [&](auto hd, auto dt) {
        using T = cuda_storage_t<decltype(dt)::value>;
        return with_page_type<T>(pages, [&](auto* kv) {
          using KV = std::remove_pointer_t<decltype(kv)>;
          return cuda_status(prepare_decode_split<decltype(hd)::value, T, KV>(&ctas_per_sm),
                             "decode: the split kernel's shared memory and occupancy");
        });
      };
      FS_RETURN_IF_ERROR(dispatch_head_dim_dtype<DecodeInstances>("decode on CUDA", head_dim, dtype, prepare));
      if (ctas_per_sm < 1 || sms < 1)
        return internal_error("decode: the split kernel fits no SM of device " + std::to_string(device) + " (" +
                              std::to_string(ctas_per_sm) + " CTAs an SM, " + std::to_string(sms) + " SMs)");
      f.sm_count = sms;
      f.cc_major = cc_major;
      f.ctas_per_sm = ctas_per_sm;
      f.ready.store(true, std::memory_order_release);
    }
  }
  *out = &f;
  return Status::Ok();
}

}  // namespace

bool decode_cuda_supports(int32_t head_dim, DType dtype) { return is_built<DecodeInstances>(head_dim, dtype); }

Status decode_launch_shape(int32_t head_dim, DType dtype, DType pages_dtype, DecodeLaunchShape* shape) {
  if (shape == nullptr) return invalid_argument("decode_launch_shape: shape is null");
  FS_RETURN_IF_ERROR(check_built<DecodeInstances>("decode_launch_shape", head_dim, dtype));
  if (pages_dtype != dtype && !is_fp8(pages_dtype))
    return invalid_argument(std::string("decode_launch_shape: ") + dtype_name(pages_dtype) + " pages under a " +
                            dtype_name(dtype) + " call (the call's own type, or FP8)");
  const LaunchFacts* f = nullptr;
  FS_RETURN_IF_ERROR(launch_facts(head_dim, dtype, pages_dtype, &f));
  shape->rows_per_cta = kRowsPerBlock;
  shape->ctas_per_sm = f->ctas_per_sm;
  shape->sm_count = f->sm_count;
  return Status::Ok();
}

int32_t decode_row_blocks(int32_t q_len, int32_t group) { return row_blocks_of(q_len * group); }

int64_t decode_launch_shape_queries() { return g_queries.load(std::memory_order_relaxed); }

Status validate_decode_cuda(const DecodeParams& p) {
  FS_RETURN_IF_ERROR(check_built<DecodeInstances>("decode on CUDA", p.head_dim, p.dtype));
  if (p.batch > 65535) return unsupported("decode: batch > 65535 on CUDA");
  FS_RETURN_IF_ERROR(validate_page_view_cuda("decode", p.pages, dtype_size(p.pages.dtype)));
  if (p.num_splits > 1 && reinterpret_cast<uintptr_t>(p.workspace) % 16)
    return invalid_argument("decode: workspace must be 16-byte aligned");
  return Status::Ok();
}

Status decode_cuda(const DecodeParams& p, void* stream_ptr) {
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  const LaunchFacts* f = nullptr;
  FS_RETURN_IF_ERROR(launch_facts(p.head_dim, p.dtype, p.pages.dtype, &f));  // cached: no device query per call
  // Programmatic dependent launch exists from Hopper (sm_90) on: the split kernel follows the
  // previous kernel in the stream that way, and the merge follows the split kernel.
  const bool pdl = f->cc_major >= 9;
  const int sms = f->sm_count;
  const int first_wave = sms * f->ctas_per_sm;  // CTAs resident at once
  auto launch = [&](auto hd, auto dt) {
    using T = cuda_storage_t<decltype(dt)::value>;
    return with_page_type<T>(p.pages.dtype, [&](auto* kv) {
      using KV = std::remove_pointer_t<decltype(kv)>;
      return cuda_status(launch_decode_split<decltype(hd)::value, T, KV>(p, stream, pdl, first_wave),
                         "decode split kernel");
    });
  };
  FS_RETURN_IF_ERROR(dispatch_head_dim_dtype<DecodeInstances>("decode on CUDA", p.head_dim, p.dtype, launch));
  if (p.num_splits == 1) return Status::Ok();

  const int64_t rows = static_cast<int64_t>(p.batch) * p.q_len * p.num_heads;
  MergeParams m;
  m.device = Device::kCUDA;
  m.num_states = p.num_splits;
  m.num_rows = rows;
  m.head_dim = p.head_dim;
  m.in_dtype = DType::kFloat32;
  m.o_in = p.workspace;
  m.o_in_state_stride = rows * p.head_dim;
  m.o_in_row_stride = p.head_dim;
  m.lse_in = static_cast<const float*>(p.workspace) + p.num_splits * rows * p.head_dim;
  m.lse_in_state_stride = rows;
  m.lse_in_row_stride = 1;
  m.out_dtype = p.dtype;
  m.lse_out = p.lse;
  m.lse_out_row_stride = 1;
  if (p.o_row_stride == static_cast<int64_t>(p.num_heads) * p.o_head_stride) {
    m.o_out = p.o;
    m.o_out_row_stride = p.o_head_stride;
    return merge_cuda(m, stream_ptr, /*dependent_launch=*/pdl, sms);
  }
  // Token rows not evenly strided with heads: one merge per token row.
  for (int64_t t = 0; t < static_cast<int64_t>(p.batch) * p.q_len; ++t) {
    m.num_rows = p.num_heads;
    m.o_in = static_cast<const float*>(p.workspace) + t * p.num_heads * p.head_dim;
    m.lse_in = static_cast<const float*>(p.workspace) + p.num_splits * rows * p.head_dim + t * p.num_heads;
    m.o_out = static_cast<char*>(p.o) + t * p.o_row_stride * dtype_size(p.dtype);
    m.o_out_row_stride = p.o_head_stride;
    m.lse_out = p.lse ? p.lse + t * p.num_heads : nullptr;
    FS_RETURN_IF_ERROR(merge_states(m, stream_ptr));
  }
  return Status::Ok();
}

}  // namespace flashserve::cuda
