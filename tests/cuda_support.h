// GPU test support: device buffers (checked, freed), copies of a ProblemData to the device,
// and the skip that every GPU test starts with.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/cuda_device.h"
#include "decode/decode.h"
#include "decode/planner.h"
#include "tests/support.h"

#define FS_SKIP_WITHOUT_CUDA()                                                     \
  do {                                                                             \
    if (!::flashserve::cuda_available()) GTEST_SKIP() << ::flashserve::cuda_unavailable_reason(); \
  } while (0)

#define FS_ASSERT_CUDA(expr)                                                                     \
  do {                                                                                           \
    const cudaError_t fs_err_ = (expr);                                                          \
    ASSERT_EQ(fs_err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(fs_err_);            \
  } while (0)

namespace flashserve::test {

// An environment variable set (value) or unset (null) for a scope, then put back as it was: a
// failed ASSERT in between leaves no override (e.g. FLASHSERVE_SKINNY_GEMM) behind for later tests.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value != nullptr) setenv(name, value, 1); else unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1); else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(int64_t bytes) { allocate(bytes); }
  ~DeviceBuffer() { if (ptr_) cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      if (ptr_) cudaFree(ptr_);
      ptr_ = o.ptr_;
      bytes_ = o.bytes_;
      o.ptr_ = nullptr;
    }
    return *this;
  }

  // Allocates and fills with 0xff bytes: NaN in fp32, fp16 and bf16 (poison).
  void allocate(int64_t bytes) {
    bytes_ = bytes < 16 ? 16 : bytes;
    EXPECT_EQ(cudaMalloc(&ptr_, static_cast<size_t>(bytes_)), cudaSuccess);
    EXPECT_EQ(cudaMemset(ptr_, 0xff, static_cast<size_t>(bytes_)), cudaSuccess);
  }
  void upload(const void* host, int64_t bytes) {
    EXPECT_EQ(cudaMemcpy(ptr_, host, static_cast<size_t>(bytes), cudaMemcpyHostToDevice), cudaSuccess);
  }
  void download(void* host, int64_t bytes) const {
    EXPECT_EQ(cudaMemcpy(host, ptr_, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost), cudaSuccess);
  }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  void* get() const { return ptr_; }
  int64_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
};

template <typename T>
DeviceBuffer to_device(const std::vector<T>& v) {
  DeviceBuffer b(static_cast<int64_t>(v.size() * sizeof(T)));
  b.upload(v.data(), static_cast<int64_t>(v.size() * sizeof(T)));
  return b;
}

inline DeviceBuffer to_device(const Buffer& v) {
  DeviceBuffer b(static_cast<int64_t>(v.storage.size() * sizeof(double)));
  b.upload(v.data(), static_cast<int64_t>(v.storage.size() * sizeof(double)));
  return b;
}

// A problem's inputs on the device (paged), and poisoned outputs.
struct DeviceProblem {
  DeviceBuffer q, k, v, cu_q, cu_k, pages, block_table, seq_lens, alibi, o, lse;
};

inline DeviceProblem upload(const Problem& p, const ProblemData& d) {
  DeviceProblem g;
  g.q = to_device(d.q_buf);
  g.k = to_device(d.k_buf);
  g.v = to_device(d.v_buf);
  g.cu_q = to_device(d.cu_seqlens_q);
  g.cu_k = to_device(d.cu_seqlens_k);
  g.pages = to_device(d.pages);
  g.block_table = to_device(d.block_table);
  g.seq_lens = to_device(d.seq_lens);
  if (!d.alibi_slopes.empty()) g.alibi = to_device(d.alibi_slopes);
  g.o.allocate(p.total_q() * p.num_heads * p.head_dim * dtype_size(p.dtype));
  g.lse.allocate(p.total_q() * p.num_heads * 4);
  return g;
}

// Decode params over the device copies (host params re-pointed).
inline DecodeParams device_decode_params(const Problem& p, ProblemData& d, Outputs& host_out, DeviceProblem& g) {
  DecodeParams dp = decode_params(p, d, host_out);
  dp.device = Device::kCUDA;
  dp.q = g.q.get();
  point_pages(p, d, g.pages.get(), &dp.pages);
  dp.pages.block_table = g.block_table.as<int32_t>();
  dp.pages.seq_lens = g.seq_lens.as<int32_t>();
  dp.mask.alibi_slopes = d.alibi_slopes.empty() ? nullptr : g.alibi.as<float>();
  dp.o = g.o.get();
  dp.lse = g.lse.as<float>();
  return dp;
}

// Prefill params over the device copies (packed or paged as the problem says).
inline PrefillParams device_prefill_params(const Problem& p, ProblemData& d, Outputs& host_out, DeviceProblem& g) {
  PrefillParams pp = prefill_params(p, d, host_out);
  pp.device = Device::kCUDA;
  pp.q = g.q.get();
  pp.cu_seqlens_q = g.cu_q.as<int32_t>();
  int32_t max_q = 0;
  for (const auto& s : p.seqs) max_q = std::max(max_q, s.q_len);
  pp.max_seqlen_q = max_q;
  if (pp.paged) {
    point_pages(p, d, g.pages.get(), &pp.pages);
    pp.pages.block_table = g.block_table.as<int32_t>();
    pp.pages.seq_lens = g.seq_lens.as<int32_t>();
  } else {
    pp.k = g.k.get();
    pp.v = g.v.get();
    pp.cu_seqlens_k = g.cu_k.as<int32_t>();
  }
  pp.mask.alibi_slopes = d.alibi_slopes.empty() ? nullptr : g.alibi.as<float>();
  pp.o = g.o.get();
  pp.lse = g.lse.as<float>();
  return pp;
}

// Sets dp's split count and chunk (num_splits 0: the planner's choice for this GPU's launch
// shape, for dp's pages' type) and, with more than one split, a poisoned workspace in ws.
inline void configure_splits(DecodeParams& dp, const Problem& p, const ProblemData& d, int32_t num_splits,
                      int32_t pages_per_split, DeviceBuffer& ws) {
  if (num_splits == 0) {
    DecodePlanInput in;
    in.batch = dp.batch;
    in.seq_lens = d.seq_lens.data();
    in.q_len = dp.q_len;
    in.num_heads = dp.num_heads;
    in.num_kv_heads = dp.num_kv_heads;
    in.head_dim = dp.head_dim;
    in.block_size = p.block_size;
    EXPECT_TRUE(decode_launch_shape(Device::kCUDA, dp.head_dim, dp.dtype, dp.pages.dtype, &in.shape).ok());
    DecodePlan plan;
    EXPECT_TRUE(plan_decode(in, &plan).ok());
    num_splits = plan.num_splits;
    pages_per_split = plan.pages_per_split;
  }
  dp.num_splits = num_splits;
  dp.pages_per_split = pages_per_split;
  if (num_splits > 1) {
    dp.workspace_bytes = decode_workspace_bytes(num_splits, dp.batch, dp.q_len, dp.num_heads, dp.head_dim);
    ws.allocate(dp.workspace_bytes);
    dp.workspace = ws.get();
  }
}

// The GPU kernels' tolerance against the float64 reference: the tensor-core kernels round the
// softmax weights before P·V (to the storage type, or fp16 over FP8 pages: finer than bf16), as
// FlashAttention does: twice the error of the float64 reference doing the same; and __expf,
// another summation order.
inline Tolerance gpu_tolerance(const Problem& p, const Reference& ref) {
  Tolerance tol = tolerance_for(p, ref);
  tol.o_abs += 1e-5 + 2 * ref.p_rounding_err;
  tol.lse_abs += 1e-5;
  return tol;
}

inline Outputs download_outputs(const Problem& p, const DeviceProblem& g) {
  Outputs out = make_outputs(p);
  g.o.download(out.o.data(), p.total_q() * p.num_heads * p.head_dim * dtype_size(p.dtype));
  g.lse.download(out.lse.data(), p.total_q() * p.num_heads * 4);
  return out;
}

}  // namespace flashserve::test
