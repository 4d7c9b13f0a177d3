#include "attention/merge.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attention/cpu/backends.h"
#include "attention/softmax_state.h"
#include "common/check.h"
#include "common/thread_pool.h"
#if FLASHSERVE_WITH_CUDA
#include "attention/cuda/merge_cuda.h"
#endif

namespace flashserve {

namespace {

constexpr const char* kWhere = "merge_states";

Status validate_merge(const MergeParams& p) {
  if (!is_valid(p.device)) return invalid_argument("merge_states: invalid device");
  if (!is_valid(p.in_dtype) || !is_valid(p.out_dtype)) return invalid_argument("merge_states: invalid dtype");
  if (!is_activation_dtype(p.in_dtype) || !is_activation_dtype(p.out_dtype))
    return invalid_argument("merge_states: states are fp32, fp16 or bf16 (FP8 is a KV-page type only)");
  FS_RETURN_IF_ERROR(check_positive(kWhere, "num_states", p.num_states));
  FS_RETURN_IF_ERROR(check_positive(kWhere, "head_dim", p.head_dim));
  if (p.num_rows < 0) return invalid_argument("merge_states: num_rows is negative");
  if (p.num_rows == 0) return Status::Ok();
  FS_RETURN_IF_ERROR(check_pointer(kWhere, "o_in", p.o_in, dtype_size(p.in_dtype)));
  FS_RETURN_IF_ERROR(check_pointer(kWhere, "lse_in", p.lse_in, 4));
  FS_RETURN_IF_ERROR(check_pointer(kWhere, "o_out", p.o_out, dtype_size(p.out_dtype)));
  if (p.lse_out != nullptr) FS_RETURN_IF_ERROR(check_pointer(kWhere, "lse_out", p.lse_out, 4));
  FS_RETURN_IF_ERROR(check_positive(kWhere, "o_in_row_stride", p.o_in_row_stride));
  FS_RETURN_IF_ERROR(check_positive(kWhere, "o_out_row_stride", p.o_out_row_stride));
  return Status::Ok();
}

}  // namespace

namespace cpu {

namespace {

// Merges the states of rows [0, num_rows): state(s, r, &o, &lse) names state s of row r,
// out(r) where row r goes. lse = ln Σ exp(lse_s), computed around the max; weights
// exp(lse_s - lse). Every state is read before the row is written, so out may alias state 0.
template <typename StateFn, typename OutFn>
void merge_rows(int64_t num_rows, int32_t num_states, int32_t head_dim, DType in_dtype, DType out_dtype,
                const StateFn& state, const OutFn& out) {
  constexpr int64_t kRowsPerItem = 64;  // rows per parallel item: enough work to pay for it
  const int64_t items = (num_rows + kRowsPerItem - 1) / kRowsPerItem;
  ThreadPool::global().parallel_for(items, [&](int64_t item) {
    thread_local std::vector<float> acc, part;
    acc.resize(static_cast<size_t>(head_dim));
    part.resize(static_cast<size_t>(head_dim));
    const int64_t r1 = std::min(num_rows, (item + 1) * kRowsPerItem);
    for (int64_t r = item * kRowsPerItem; r < r1; ++r) {
      const void* o;
      float l;
      float total = -INFINITY;
      for (int32_t s = 0; s < num_states; ++s) {
        state(s, r, &o, &l);
        total = log_add_exp(total, l);
      }
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int32_t s = 0; s < num_states; ++s) {
        state(s, r, &o, &l);
        const float w = merge_weight(l, total);
        if (w == 0.f) continue;
        convert_to_float(o, in_dtype, head_dim, part.data());
        for (int32_t d = 0; d < head_dim; ++d) acc[d] += w * part[d];
      }
      float* lse_out;
      void* o_out = out(r, &lse_out);
      convert_from_float(acc.data(), out_dtype, head_dim, o_out);
      if (lse_out) *lse_out = total;
    }
  });
}

}  // namespace

Status merge_cpu(const MergeParams& p) {
  const int64_t in_elem = dtype_size(p.in_dtype), out_elem = dtype_size(p.out_dtype);
  merge_rows(
      p.num_rows, p.num_states, p.head_dim, p.in_dtype, p.out_dtype,
      [&](int32_t s, int64_t r, const void** o, float* l) {
        *o = static_cast<const char*>(p.o_in) + (s * p.o_in_state_stride + r * p.o_in_row_stride) * in_elem;
        *l = p.lse_in[s * p.lse_in_state_stride + r * p.lse_in_row_stride];
      },
      [&](int64_t r, float** lse_out) -> void* {
        *lse_out = p.lse_out ? p.lse_out + r * p.lse_out_row_stride : nullptr;
        return static_cast<char*>(p.o_out) + r * p.o_out_row_stride * out_elem;
      });
  return Status::Ok();
}

}  // namespace cpu

Status merge_states(const MergeParams& p, void* stream) {
  FS_RETURN_IF_ERROR(validate_merge(p));
  if (p.num_rows == 0) return Status::Ok();
  if (p.device == Device::kCUDA) {
#if FLASHSERVE_WITH_CUDA
    return cuda::merge_cuda(p, stream);
#else
    return unsupported("merge_states: flashserve was built without CUDA");
#endif
  }
  if (stream != nullptr) return invalid_argument("merge_states: a CPU call takes no stream");
  return cpu::merge_cpu(p);
}

Status merge_state_pair(Device device, DType dtype, int64_t num_rows, int32_t head_dim, const void* o_a,
                        const float* lse_a, const void* o_b, const float* lse_b, void* o_out,
                        float* lse_out, void* stream) {
  constexpr const char* where = "merge_state_pair";
  if (!is_valid(device)) return invalid_argument("merge_state_pair: invalid device");
  if (!is_valid(dtype)) return invalid_argument("merge_state_pair: invalid dtype");
  if (!is_activation_dtype(dtype))
    return invalid_argument("merge_state_pair: states are fp32, fp16 or bf16 (FP8 is a KV-page type only)");
  FS_RETURN_IF_ERROR(check_positive(where, "head_dim", head_dim));
  if (num_rows < 0) return invalid_argument("merge_state_pair: num_rows is negative");
  if (num_rows == 0) return Status::Ok();
  const int64_t elem = dtype_size(dtype);
  FS_RETURN_IF_ERROR(check_pointer(where, "o_a", o_a, elem));
  FS_RETURN_IF_ERROR(check_pointer(where, "o_b", o_b, elem));
  FS_RETURN_IF_ERROR(check_pointer(where, "lse_a", lse_a, 4));
  FS_RETURN_IF_ERROR(check_pointer(where, "lse_b", lse_b, 4));
  FS_RETURN_IF_ERROR(check_pointer(where, "o_out", o_out, elem));
  if (lse_out) FS_RETURN_IF_ERROR(check_pointer(where, "lse_out", lse_out, 4));
  if (device == Device::kCUDA) {
    // Two device buffers as two states of one strided view: in the GPU's flat address space
    // the distance between them is a fixed number of elements (both are element-aligned).
    MergeParams p;
    p.device = device;
    p.num_states = 2;
    p.num_rows = num_rows;
    p.head_dim = head_dim;
    p.in_dtype = p.out_dtype = dtype;
    p.o_in = o_a;
    p.o_in_state_stride = (reinterpret_cast<intptr_t>(o_b) - reinterpret_cast<intptr_t>(o_a)) / elem;
    p.o_in_row_stride = head_dim;
    p.lse_in = lse_a;
    p.lse_in_state_stride = (reinterpret_cast<intptr_t>(lse_b) - reinterpret_cast<intptr_t>(lse_a)) / 4;
    p.lse_in_row_stride = 1;
    p.o_out = o_out;
    p.o_out_row_stride = head_dim;
    p.lse_out = lse_out;
    return merge_states(p, stream);
  }
  if (stream != nullptr) return invalid_argument("merge_state_pair: a CPU call takes no stream");
  const int64_t row = head_dim * elem;
  cpu::merge_rows(
      num_rows, 2, head_dim, dtype, dtype,
      [&](int32_t s, int64_t r, const void** o, float* l) {
        *o = static_cast<const char*>(s == 0 ? o_a : o_b) + r * row;
        *l = (s == 0 ? lse_a : lse_b)[r];
      },
      [&](int64_t r, float** lo) -> void* {
        *lo = lse_out ? lse_out + r : nullptr;
        return static_cast<char*>(o_out) + r * row;
      });
  return Status::Ok();
}

}  // namespace flashserve
