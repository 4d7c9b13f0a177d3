// CPU varlen prefill: work items are (sequence, kv head, tile of kTileQTokens queries),
// longest first, spread over the thread pool.
#include <algorithm>
#include <vector>

#include "attention/cpu/attend_cpu.h"
#include "attention/cpu/backends.h"
#include "common/thread_pool.h"

namespace flashserve::cpu {

namespace {

struct PrefillItem {
  int32_t seq, kv_head, tile;
  int64_t cost;  // visible (query, key) pairs, for longest-first ordering
};

}  // namespace

Status prefill_cpu(const PrefillParams& p) {
  const int32_t group = p.num_heads / p.num_kv_heads;
  const int64_t elem = dtype_size(p.dtype);
  auto q_len_of = [&](int32_t b) { return static_cast<int64_t>(p.cu_seqlens_q[b + 1]) - p.cu_seqlens_q[b]; };
  auto k_len_of = [&](int32_t b) -> int64_t {
    return p.paged ? p.pages.seq_lens[b] : static_cast<int64_t>(p.cu_seqlens_k[b + 1]) - p.cu_seqlens_k[b];
  };

  std::vector<PrefillItem> items;
  for (int32_t b = 0; b < p.batch; ++b) {
    const int64_t q_len = q_len_of(b), k_len = k_len_of(b);
    const int32_t tiles = static_cast<int32_t>((q_len + kTileQTokens - 1) / kTileQTokens);
    for (int32_t t = 0; t < tiles; ++t) {
      // Keys the tile's last token sees bound its work.
      const int64_t last = std::min<int64_t>(q_len, (t + 1) * int64_t{kTileQTokens}) - 1;
      int64_t lo, hi;
      visible_keys(p.mask, k_len - q_len + last, 0, k_len, &lo, &hi);
      const int64_t cost = (hi - lo + 1) * std::min<int64_t>(kTileQTokens, q_len - t * int64_t{kTileQTokens});
      for (int32_t h = 0; h < p.num_kv_heads; ++h) items.push_back({b, h, t, cost});
    }
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const PrefillItem& a, const PrefillItem& b) { return a.cost > b.cost; });

  ThreadPool::global().parallel_for(static_cast<int64_t>(items.size()), [&](int64_t i) {
    const PrefillItem& w = items[static_cast<size_t>(i)];
    const int64_t q_len = q_len_of(w.seq), k_len = k_len_of(w.seq);
    const int64_t q_row = p.cu_seqlens_q[w.seq] + int64_t{w.tile} * kTileQTokens;
    const int32_t first_head = w.kv_head * group;

    KVRows kv;
    kv.dtype = p.dtype;
    if (p.paged) {
      kv = paged_kv_rows(p.pages, w.seq, w.kv_head);  // the pages' dtype (FP8: with scales)
    } else {
      const int64_t k0 = p.cu_seqlens_k[w.seq];
      kv.k = static_cast<const char*>(p.k) + (k0 * p.k_row_stride + w.kv_head * p.k_head_stride) * elem;
      kv.v = static_cast<const char*>(p.v) + (k0 * p.v_row_stride + w.kv_head * p.v_head_stride) * elem;
      kv.k_row_stride = p.k_row_stride;
      kv.v_row_stride = p.v_row_stride;
    }

    TileItem it;
    it.q_dtype = p.dtype;
    it.q = static_cast<const char*>(p.q) + (q_row * p.q_row_stride + first_head * p.q_head_stride) * elem;
    it.q_token_stride = p.q_row_stride;
    it.q_head_stride = p.q_head_stride;
    it.num_tokens = static_cast<int32_t>(std::min<int64_t>(kTileQTokens, q_len - int64_t{w.tile} * kTileQTokens));
    it.group = group;
    it.head_dim = p.head_dim;
    it.first_head = first_head;
    it.q_pos0 = k_len - q_len + int64_t{w.tile} * kTileQTokens;
    it.k_begin = 0;
    it.k_end = k_len;
    set_output(it, p.dtype, p.o, p.o_row_stride, p.o_head_stride, p.lse, p.num_heads, q_row, first_head);
    attend_tile(it, kv, p.mask);
  });
  return Status::Ok();
}

}  // namespace flashserve::cpu
