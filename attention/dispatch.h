// Run-time (head_dim, dtype) to a compile-time call: the one dispatch of the CUDA kernel
// families (decode, merge, prefill) over the instances a file has built. The lists name what is
// built; the helper instantiates nothing but the caller's lambda, once per listed pair, so each
// kernel instance still lives in its own file (decode_hd128_bf16.cu, ...) behind an `extern
// template` and a list longer than what is built fails at link time, not silently.
//
//   using Built = KernelInstances<HeadDims<64, 128>, DTypes<DType::kFloat16, DType::kBFloat16>>;
//   cudaError_t err;
//   FS_RETURN_IF_ERROR(dispatch_head_dim_dtype<Built>("decode", p.head_dim, p.dtype, [&](auto hd, auto dt) {
//     err = launch<decltype(hd)::value, cuda_storage_t<decltype(dt)::value>>(p, stream);
//   }));
//
// The lambda gets std::integral_constant<int, head_dim> and std::integral_constant<DType, dtype>
// and returns void or Status (passed through). A pair not in the lists is UNSUPPORTED, naming it
// and what is built. Host code, C++17 (nvcc compiles the .cu files that use it as C++17).
#pragma once

#include <string>
#include <type_traits>

#include "common/dtype.h"
#include "common/status.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace flashserve {

template <int... kHeadDims>
struct HeadDims {};
template <DType... kDTypes>
struct DTypes {};
// The product of a head-dim list and a dtype list: one instance each.
template <typename HeadDimList, typename DTypeList>
struct KernelInstances {
  using HeadDimsT = HeadDimList;
  using DTypesT = DTypeList;
};

namespace dispatch_detail {

template <typename F, typename... Args>
Status call(F& f, Args... args) {
  if constexpr (std::is_same_v<decltype(f(args...)), Status>) {
    return f(args...);
  } else {
    f(args...);
    return Status::Ok();
  }
}

inline std::string name(DType dtype) { return is_valid(dtype) ? dtype_name(dtype) : "an invalid dtype"; }

template <int... kHeadDims>
std::string names(HeadDims<kHeadDims...>) {
  std::string s;
  ((s += (s.empty() ? "" : ", ") + std::to_string(kHeadDims)), ...);
  return s;
}

template <DType... kDTypes>
std::string names(DTypes<kDTypes...>) {
  std::string s;
  ((s += std::string(s.empty() ? "" : ", ") + dtype_name(kDTypes)), ...);
  return s;
}

template <int... kHeadDims>
constexpr bool contains(HeadDims<kHeadDims...>, int head_dim) {
  return ((head_dim == kHeadDims) || ...);
}

template <DType... kDTypes>
constexpr bool contains(DTypes<kDTypes...>, DType dtype) {
  return ((dtype == kDTypes) || ...);
}

template <int... kHeadDims, DType... kDTypes, typename F>
Status dispatch(HeadDims<kHeadDims...>, DTypes<kDTypes...>, int head_dim, DType dtype, F& f) {
  Status st;
  auto one = [&](auto hd, auto dt) {
    if (head_dim == decltype(hd)::value && dtype == decltype(dt)::value)
      static_cast<void>(st = call(f, hd, dt));  // (nvcc warns of a discarded Status& otherwise)
  };
  auto row = [&](auto hd) { (one(hd, std::integral_constant<DType, kDTypes>{}), ...); };
  (row(std::integral_constant<int, kHeadDims>{}), ...);
  return st;
}

template <int... kHeadDims>
constexpr int count(HeadDims<kHeadDims...>) {
  return static_cast<int>(sizeof...(kHeadDims));
}
template <DType... kDTypes>
constexpr int count(DTypes<kDTypes...>) {
  return static_cast<int>(sizeof...(kDTypes));
}
template <int... kHeadDims>
constexpr int index_of(HeadDims<kHeadDims...>, int head_dim) {
  int i = 0, found = -1;
  ((found = found < 0 && kHeadDims == head_dim ? i : found, ++i), ...);
  return found;
}
template <DType... kDTypes>
constexpr int index_of(DTypes<kDTypes...>, DType dtype) {
  int i = 0, found = -1;
  ((found = found < 0 && kDTypes == dtype ? i : found, ++i), ...);
  return found;
}

}  // namespace dispatch_detail

// How many (head_dim, dtype) instances the set holds, and the position of one in it (head dims
// slowest; -1 when it is not built): for tables kept per instance.
template <typename Instances>
constexpr int instance_count() {
  using I = Instances;
  return dispatch_detail::count(typename I::HeadDimsT{}) * dispatch_detail::count(typename I::DTypesT{});
}
template <typename Instances>
constexpr int instance_index(int head_dim, DType dtype) {
  using I = Instances;
  const int h = dispatch_detail::index_of(typename I::HeadDimsT{}, head_dim);
  const int d = dispatch_detail::index_of(typename I::DTypesT{}, dtype);
  return h < 0 || d < 0 ? -1 : h * dispatch_detail::count(typename I::DTypesT{}) + d;
}

// Whether the instance set holds (head_dim, dtype).
template <typename Instances>
constexpr bool is_built(int head_dim, DType dtype) {
  using I = Instances;
  return dispatch_detail::contains(typename I::HeadDimsT{}, head_dim) &&
         dispatch_detail::contains(typename I::DTypesT{}, dtype);
}

// UNSUPPORTED ("<where>: head_dim 96 with bf16 is not built (head_dim 64, 128; fp16, bf16)")
// unless Instances holds (head_dim, dtype).
template <typename Instances>
Status check_built(const char* where, int head_dim, DType dtype) {
  using I = Instances;
  if (is_built<Instances>(head_dim, dtype)) return Status::Ok();
  return unsupported(std::string(where) + ": head_dim " + std::to_string(head_dim) + " with " +
                     dispatch_detail::name(dtype) + " is not built (head_dim " +
                     dispatch_detail::names(typename I::HeadDimsT{}) + "; " +
                     dispatch_detail::names(typename I::DTypesT{}) + ")");
}

// Calls f(integral_constant<int, head_dim>, integral_constant<DType, dtype>) for the listed pair
// equal to the run-time one; check_built's UNSUPPORTED when none is.
template <typename Instances, typename F>
Status dispatch_head_dim_dtype(const char* where, int head_dim, DType dtype, F&& f) {
  FS_RETURN_IF_ERROR(check_built<Instances>(where, head_dim, dtype));
  using I = Instances;
  return dispatch_detail::dispatch(typename I::HeadDimsT{}, typename I::DTypesT{}, head_dim, dtype, f);
}

// The same over dtypes alone (kernels whose instances do not depend on head_dim):
// f(integral_constant<DType, dtype>), or UNSUPPORTED ("<where>: fp32 is not built (fp16, bf16)").
template <typename DTypeList, typename F>
Status dispatch_dtype(const char* where, DType dtype, F&& f) {
  if (!dispatch_detail::contains(DTypeList{}, dtype))
    return unsupported(std::string(where) + ": " + dispatch_detail::name(dtype) + " is not built (" +
                       dispatch_detail::names(DTypeList{}) + ")");
  auto g = [&](auto, auto dt) { return dispatch_detail::call(f, dt); };
  return dispatch_detail::dispatch(HeadDims<0>{}, DTypeList{}, 0, dtype, g);
}

#if defined(__CUDACC__)
// The CUDA storage type of a DType.
template <DType kDType>
struct CudaStorage;
template <>
struct CudaStorage<DType::kFloat32> {
  using type = float;
};
template <>
struct CudaStorage<DType::kFloat16> {
  using type = __half;
};
template <>
struct CudaStorage<DType::kBFloat16> {
  using type = __nv_bfloat16;
};
template <DType kDType>
using cuda_storage_t = typename CudaStorage<kDType>::type;
#endif

}  // namespace flashserve
