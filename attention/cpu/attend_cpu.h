// The CPU kernel shared by prefill and decode: one work item attends a tile of query rows
// (num_tokens tokens × the group of query heads that share one kv head) to a range of that
// kv head's keys, FlashAttention-2 style: K/V tiles of kTileK keys are converted to fp32 in a
// small buffer, scores of one tile live in a kTileK-float row, running max and sum are
// rescaled by exp(m_old - m_new), and the output is normalised once at the end. No N×N
// matrix exists anywhere. FP8 pages (issue 25) are converted code by code (exact) and
// dequantized by folding: logits use softmax_scale·k_scale, and the normalised output is
// multiplied by v_scale, so K and V never exist dequantized.
#pragma once

#include <cstdint>

#include "attention/params.h"
#include "kvcache/page_view.h"
#include "common/dtype.h"

namespace flashserve::cpu {

inline constexpr int kTileK = 64;        // keys per K/V tile
inline constexpr int kTileQTokens = 32;  // query tokens per prefill work item

// Where key j of one kv head lives: packed rows, or pages through a block table row.
struct KVRows {
  DType dtype = DType::kFloat32;  // element type of k and v (FP8: codes)
  const char* k = nullptr;  // bytes: packed, kv head h of token 0; paged, the pool (pages.k_pages)
  const char* v = nullptr;
  bool paged = false;
  int64_t k_row_stride = 0, v_row_stride = 0;  // packed: elements between keys
  const int32_t* block_table = nullptr;        // paged: this sequence's row
  KVPageView pages;                            // paged: the layer's view (key addresses: offset())
  int32_t kv_head = 0;                         // paged
  float k_scale = 1.f, v_scale = 1.f;          // FP8 pages: this kv head's scales; else 1
};

// One work item. Pointers are at token 0 of the tile, query head first_head.
struct TileItem {
  DType q_dtype = DType::kFloat32;
  const void* q = nullptr;
  int64_t q_token_stride = 0, q_head_stride = 0;
  int32_t num_tokens = 0;
  int32_t group = 0;       // query heads per kv head; row r = token·group + g
  int32_t head_dim = 0;
  int32_t first_head = 0;  // query head of g = 0 (for ALiBi)
  int64_t q_pos0 = 0;      // key position of the tile's token 0
  int64_t k_begin = 0;     // this item's keys: [k_begin, k_end), before masking
  int64_t k_end = 0;

  DType o_dtype = DType::kFloat32;
  void* o = nullptr;       // normalised output
  int64_t o_token_stride = 0, o_head_stride = 0;
  float* lse = nullptr;    // may be null
  int64_t lse_token_stride = 0, lse_head_stride = 0;
};

// Paged rows of sequence `seq`'s kv head `kv_head` (pages.block_table row `seq`), of the
// pages' dtype, with the kv head's scales for FP8 pages (host memory).
KVRows paged_kv_rows(const KVPageView& pages, int32_t seq, int32_t kv_head);

// Points the item's output at o [tokens, heads, head_dim] (strided, type dtype) and lse
// [tokens, num_heads] (may be null), from token `row`, head `first_head`.
void set_output(TileItem& it, DType dtype, void* o, int64_t o_row_stride, int64_t o_head_stride, float* lse,
                int32_t num_heads, int64_t row, int32_t first_head);

// Runs one item: reads q (q_dtype) and keys (kv.dtype), writes o (o_dtype) and lse. Rows that
// see no key write o = 0 and lse = -inf. mask.alibi_slopes must be host memory.
void attend_tile(const TileItem& item, const KVRows& kv, const MaskParams& mask);

}  // namespace flashserve::cpu
