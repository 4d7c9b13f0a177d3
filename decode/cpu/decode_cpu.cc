// CPU split-K decode: work items are (sequence, kv head, split); each attends all query
// heads of the GQA group and all q_len new tokens to its split's keys (the same tile
// routine as prefill), writing fp32 partial o and lse into the workspace; merge_states then
// rescales the splits of every row by logsumexp. With one split the item writes o directly.
#include "decode/cpu/decode_cpu.h"

#include <algorithm>

#include "attention/cpu/attend_cpu.h"
#include "attention/merge.h"
#include "common/thread_pool.h"

namespace flashserve::cpu {

Status decode_cpu(const DecodeParams& p) {
  const int32_t group = p.num_heads / p.num_kv_heads;
  const int64_t elem = dtype_size(p.dtype);
  const int64_t rows = static_cast<int64_t>(p.batch) * p.q_len * p.num_heads;  // rows of o
  const int64_t split_keys = static_cast<int64_t>(p.pages_per_split) * p.pages.block_size;
  const bool direct = p.num_splits == 1;
  float* ws_o = static_cast<float*>(p.workspace);
  float* ws_lse = direct ? nullptr : ws_o + p.num_splits * rows * p.head_dim;

  const int64_t items = static_cast<int64_t>(p.batch) * p.num_kv_heads * p.num_splits;
  ThreadPool::global().parallel_for(items, [&](int64_t i) {
    const int32_t split = static_cast<int32_t>(i % p.num_splits);
    const int32_t kv_head = static_cast<int32_t>((i / p.num_splits) % p.num_kv_heads);
    const int32_t b = static_cast<int32_t>(i / (int64_t{p.num_splits} * p.num_kv_heads));
    const int64_t seq_len = p.pages.seq_lens[b];
    const int32_t first_head = kv_head * group;
    const int64_t row0 = int64_t{b} * p.q_len;  // token row of the sequence's first query

    const KVRows kv = paged_kv_rows(p.pages, b, kv_head);  // the pages' dtype (FP8: with scales)

    TileItem it;
    it.q_dtype = p.dtype;
    it.q = static_cast<const char*>(p.q) + (row0 * p.q_row_stride + first_head * p.q_head_stride) * elem;
    it.q_token_stride = p.q_row_stride;
    it.q_head_stride = p.q_head_stride;
    it.num_tokens = p.q_len;
    it.group = group;
    it.head_dim = p.head_dim;
    it.first_head = first_head;
    it.q_pos0 = seq_len - p.q_len;
    it.k_begin = std::min(seq_len, split * split_keys);  // empty splits: k_begin == k_end
    it.k_end = std::min(seq_len, (split + 1) * split_keys);
    if (direct) {
      set_output(it, p.dtype, p.o, p.o_row_stride, p.o_head_stride, p.lse, p.num_heads, row0, first_head);
    } else {  // this split's fp32 slice of the workspace: [rows, head_dim] and [rows]
      set_output(it, DType::kFloat32, ws_o + split * rows * p.head_dim, int64_t{p.num_heads} * p.head_dim,
                 p.head_dim, ws_lse + split * rows, p.num_heads, row0, first_head);
    }
    attend_tile(it, kv, p.mask);
  });
  if (direct) return Status::Ok();

  // Merge: rows are (b, t, h); the output row of (b, t, h) is at (b·q_len + t)·o_row_stride
  // + h·o_head_stride, a single row stride only when o_row_stride = num_heads·o_head_stride.
  MergeParams m;
  m.num_states = p.num_splits;
  m.head_dim = p.head_dim;
  m.in_dtype = DType::kFloat32;
  m.o_in_state_stride = rows * p.head_dim;
  m.o_in_row_stride = p.head_dim;
  m.lse_in_state_stride = rows;
  m.lse_in_row_stride = 1;
  m.out_dtype = p.dtype;
  m.o_out_row_stride = p.o_head_stride;
  m.lse_out_row_stride = 1;
  // One merge per token row keeps any o_row_stride legal.
  const int64_t token_rows = int64_t{p.batch} * p.q_len;
  if (p.o_row_stride == int64_t{p.num_heads} * p.o_head_stride) {
    m.num_rows = rows;
    m.o_in = ws_o;
    m.lse_in = ws_lse;
    m.o_out = p.o;
    m.lse_out = p.lse;
    return merge_states(m);
  }
  for (int64_t t = 0; t < token_rows; ++t) {
    m.num_rows = p.num_heads;
    m.o_in = ws_o + t * p.num_heads * p.head_dim;
    m.lse_in = ws_lse + t * p.num_heads;
    m.o_out = static_cast<char*>(p.o) + t * p.o_row_stride * elem;
    m.lse_out = p.lse ? p.lse + t * p.num_heads : nullptr;
    FS_RETURN_IF_ERROR(merge_states(m));
  }
  return Status::Ok();
}

}  // namespace flashserve::cpu
