// Merging partial attention results by logsumexp rescaling (see softmax_state.h for the
// math and the base-e convention). A "row" is one (token, head) pair: head_dim outputs and
// one lse. Used by split-K decode and by anything that attends to a sequence in pieces
// (cascade / shared-prefix attention, chunked prefill across calls).
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "common/status.h"

namespace flashserve {

// N states per row. State s of row r lives at o_in + s*o_in_state_stride + r*o_in_row_stride
// and lse_in + s*lse_in_state_stride + r*lse_in_row_stride.
struct MergeParams {
  Device device = Device::kCPU;
  int32_t num_states = 0;  // >= 1
  int64_t num_rows = 0;
  int32_t head_dim = 0;

  DType in_dtype = DType::kFloat32;
  const void* o_in = nullptr;       // [num_states, num_rows, head_dim] (strided)
  int64_t o_in_state_stride = 0, o_in_row_stride = 0;
  const float* lse_in = nullptr;    // [num_states, num_rows] natural log; -inf = empty state
  int64_t lse_in_state_stride = 0, lse_in_row_stride = 0;

  DType out_dtype = DType::kFloat32;
  void* o_out = nullptr;            // [num_rows, head_dim] (strided)
  int64_t o_out_row_stride = 0;
  float* lse_out = nullptr;         // [num_rows], row stride lse_out_row_stride; may be null
  int64_t lse_out_row_stride = 1;
};

// Merges num_states states of every row. o_out may alias state 0 (in-place merge) when it has
// state 0's element type and row stride (each row is then read before it is written).
Status merge_states(const MergeParams& params, void* stream = nullptr);

// Merges two states of contiguous [num_rows, head_dim] rows held in separate buffers:
// (o_a, lse_a) and (o_b, lse_b) -> (o_out, lse_out). o_out may be o_a (in place).
// lse_out may be null.
Status merge_state_pair(Device device, DType dtype, int64_t num_rows, int32_t head_dim,
                        const void* o_a, const float* lse_a, const void* o_b,
                        const float* lse_b, void* o_out, float* lse_out,
                        void* stream = nullptr);

}  // namespace flashserve
