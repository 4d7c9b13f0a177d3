#include "decode/planner.h"

#include <algorithm>
#include <string>

#include "decode/params.h"

namespace flashserve {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

double wave_fill(int64_t items, int64_t workers) {
  if (items <= 0) return 0.0;
  const int64_t waves = ceil_div(items, workers);
  return static_cast<double>(items) / static_cast<double>(waves * workers);
}

}  // namespace

Status plan_decode(const DecodePlanInput& in, DecodePlan* plan) {
  if (plan == nullptr) return invalid_argument("plan_decode: plan is null");
  if (in.batch < 0) return invalid_argument("plan_decode: batch " + std::to_string(in.batch) + " < 0");
  if (in.num_kv_heads <= 0 || in.num_heads <= 0 || in.head_dim <= 0 || in.q_len <= 0)
    return invalid_argument("plan_decode: num_heads, num_kv_heads, head_dim and q_len must be > 0");
  if (in.block_size <= 0) return invalid_argument("plan_decode: block_size must be > 0");
  if (in.num_workers <= 0) return invalid_argument("plan_decode: num_workers must be > 0");
  if (in.max_splits <= 0) return invalid_argument("plan_decode: max_splits must be > 0");
  if (in.min_pages_per_split < 0) return invalid_argument("plan_decode: min_pages_per_split < 0");

  const int64_t min_pages =
      in.min_pages_per_split > 0 ? in.min_pages_per_split : std::max<int64_t>(1, 256 / in.block_size);
  DecodePlan out;

  if (in.graph_mode) {
    if (in.max_seq_len <= 0) return invalid_argument("plan_decode: graph mode needs max_seq_len > 0");
    const int64_t max_pages = ceil_div(in.max_seq_len, in.block_size);
    out.num_splits = in.max_splits;
    out.pages_per_split = static_cast<int32_t>(std::max<int64_t>(1, ceil_div(max_pages, in.max_splits)));
    out.work_items = static_cast<int64_t>(in.batch) * in.num_kv_heads * out.num_splits;
  } else {
    if (in.batch > 0 && in.seq_lens == nullptr) return invalid_argument("plan_decode: seq_lens is null");
    int64_t max_pages = 0;
    for (int32_t b = 0; b < in.batch; ++b) {
      if (in.seq_lens[b] < 0)
        return invalid_argument("plan_decode: seq_lens[" + std::to_string(b) + "] = " +
                                std::to_string(in.seq_lens[b]) + " < 0");
      max_pages = std::max(max_pages, ceil_div(in.seq_lens[b], in.block_size));
    }
    const int64_t units = static_cast<int64_t>(in.batch) * in.num_kv_heads;
    auto items_for = [&](int64_t chunk) {
      int64_t n = 0;
      for (int32_t b = 0; b < in.batch; ++b)
        n += std::max<int64_t>(1, ceil_div(ceil_div(in.seq_lens[b], in.block_size), chunk));
      return n * in.num_kv_heads;
    };
    int64_t chunk = std::max<int64_t>(max_pages, 1);  // one split each
    if (units < in.num_workers && max_pages > min_pages) {
      // Smallest chunk in [lo, max_pages] whose items fit one wave; items_for falls as the
      // chunk grows, so binary search.
      int64_t lo = std::max(min_pages, ceil_div(max_pages, in.max_splits));
      int64_t hi = max_pages;
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (items_for(mid) <= in.num_workers) hi = mid; else lo = mid + 1;
      }
      chunk = lo;
    }
    out.pages_per_split = static_cast<int32_t>(chunk);
    out.num_splits = static_cast<int32_t>(std::max<int64_t>(1, ceil_div(max_pages, chunk)));
    out.work_items = items_for(chunk);
  }
  out.wave_fill = wave_fill(out.work_items, in.num_workers);
  out.workspace_bytes = decode_workspace_bytes(out.num_splits, in.batch, in.q_len, in.num_heads, in.head_dim);
  *plan = out;
  return Status::Ok();
}

}  // namespace flashserve
