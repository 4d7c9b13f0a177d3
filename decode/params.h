// Parameters of split-K Flash-Decoding over the paged KV cache: q_len (1..8) new query
// tokens per sequence, each attending to its sequence's keys in pages. The keys of sequence b
// are split into chunks of pages_per_split pages; each split writes a partial output and its
// lse into the workspace and a merge rescales them (merge.h). Plain data, usable on host and
// device; strides count elements, 64-bit; head_dim contiguous.
#pragma once

#include <cstdint>

#include "attention/params.h"
#include "common/dtype.h"
#include "kvcache/page_view.h"

namespace flashserve {

inline constexpr int kMaxDecodeQLen = 8;
// Query rows one CTA of the CUDA decode kernel takes (the M of one m16n8k16 mma); an item of
// more rows (q_len × GQA group) takes ceil(rows / 16) CTAs (decode_kernel.cuh's row blocks).
inline constexpr int kDecodeRowsPerCta = 16;

struct DecodeParams {
  Device device = Device::kCPU;
  DType dtype = DType::kBFloat16;  // storage type of q, pages, o (accumulation is fp32)

  int32_t batch = 0;
  int32_t q_len = 1;         // new tokens per sequence, 1..kMaxDecodeQLen (speculative: > 1)
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;  // num_heads % num_kv_heads == 0
  int32_t head_dim = 0;

  const void* q = nullptr;   // [batch, q_len, num_heads, head_dim]
  int64_t q_row_stride = 0;  // elements between token rows (batch and q_len flattened)
  int64_t q_head_stride = 0;

  // The cache; seq_lens[b] counts the q_len new tokens, already appended, so the queries are
  // the last q_len keys (seq_lens[b] >= q_len) and mask.causal masks inside them.
  KVPageView pages;
  MaskParams mask;

  void* o = nullptr;         // [batch, q_len, num_heads, head_dim]
  int64_t o_row_stride = 0, o_head_stride = 0;
  float* lse = nullptr;      // [batch, q_len, num_heads] fp32, natural log; may be null

  // Split-K, from plan_decode (planner.h). num_splits == 1 writes o directly, no workspace.
  // On the CPU, num_splits == 0 asks decode() to plan and allocate the workspace itself.
  int32_t num_splits = 0;        // splits per sequence (the most any sequence uses)
  int32_t pages_per_split = 0;   // pages of keys per split; split s covers pages
                                 // [s·pages_per_split, (s+1)·pages_per_split) ∩ the sequence's
  // fp32 workspace: partial o [num_splits, batch·q_len·num_heads, head_dim], then partial
  // lse [num_splits, batch·q_len·num_heads]. decode_workspace_bytes() gives its size.
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
};

// Fills the strides of contiguous q and o.
void set_contiguous_strides(DecodeParams& p);

// Bytes of workspace that decode needs for the given split count (0 when num_splits <= 1).
int64_t decode_workspace_bytes(int32_t num_splits, int32_t batch, int32_t q_len,
                               int32_t num_heads, int32_t head_dim);

}  // namespace flashserve
