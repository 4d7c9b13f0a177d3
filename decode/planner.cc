#include "decode/planner.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <string>
#include <vector>

#include "decode/params.h"

namespace flashserve {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

double wave_fill(int64_t items, int64_t workers) {
  if (items <= 0) return 0.0;
  const int64_t waves = ceil_div(items, workers);
  return static_cast<double>(items) / static_cast<double>(waves * workers);
}

int64_t pages_of(const DecodePlanInput& in, int32_t b) { return ceil_div(in.seq_lens[b], in.block_size); }

int64_t splits_of(int64_t pages, int64_t chunk) { return std::max<int64_t>(1, ceil_div(pages, chunk)); }

}  // namespace

int64_t decode_workers_per_item(const DecodePlanInput& in) {
  const int32_t rows_per_cta = in.shape.rows_per_cta;
  if (rows_per_cta <= 0 || in.num_kv_heads <= 0) return 1;
  const int64_t rows = static_cast<int64_t>(in.q_len) * (in.num_heads / in.num_kv_heads);
  return std::max<int64_t>(1, ceil_div(rows, rows_per_cta));
}

// Lower bounds on decode_makespan(in, chunk), without simulating (O(batch)): the items' total
// cost spread over every worker (`work`, which never falls as the chunk shrinks: more items, more
// overhead), and the longest item (`item`); each with the merge where the plan splits.
struct MakespanBounds {
  double work, item;
};
MakespanBounds makespan_bounds(const DecodePlanInput& in, int64_t chunk) {
  const double overhead = static_cast<double>(in.overhead_keys) / in.block_size;
  int64_t num_splits = 1, longest = 0;
  for (int32_t b = 0; b < in.batch; ++b) {
    num_splits = std::max(num_splits, splits_of(pages_of(in, b), chunk));
    longest = std::max(longest, std::min(pages_of(in, b), chunk));
  }
  double total = 0.0;  // as decode_makespan charges them: pages + overhead, empty splits a quarter
  for (int32_t b = 0; b < in.batch; ++b) {
    const int64_t pages = pages_of(in, b), filled = std::min(num_splits, ceil_div(pages, chunk));
    total += static_cast<double>(pages) + static_cast<double>(filled) * overhead +
             static_cast<double>(num_splits - filled) * overhead / 4;
  }
  const int64_t workers = static_cast<int64_t>(in.shape.sm_count) * in.shape.ctas_per_sm;
  total *= static_cast<double>(in.num_kv_heads) * static_cast<double>(decode_workers_per_item(in));
  const double merge = num_splits > 1 ? overhead / 2 : 0.0;
  return {total / static_cast<double>(workers) + merge,
          static_cast<double>(longest) + (longest > 0 ? overhead : overhead / 4) + merge};
}

double decode_makespan(const DecodePlanInput& in, int64_t chunk) {
  const double overhead = static_cast<double>(in.overhead_keys) / in.block_size;
  int64_t num_splits = 1;
  for (int32_t b = 0; b < in.batch; ++b) num_splits = std::max(num_splits, splits_of(pages_of(in, b), chunk));
  // Workers' finish times; items in launch order: split fastest, then kv head (its workers
  // together), then sequence.
  const int64_t workers = static_cast<int64_t>(in.shape.sm_count) * in.shape.ctas_per_sm;
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (int64_t w = 0; w < workers; ++w) free_at.push(0.0);
  const int64_t per_item = decode_workers_per_item(in);
  double makespan = 0.0;
  for (int32_t b = 0; b < in.batch; ++b) {
    const int64_t pages = pages_of(in, b);
    for (int32_t h = 0; h < in.num_kv_heads; ++h) {
      for (int64_t r = 0; r < per_item; ++r) {
        for (int64_t s = 0; s < num_splits; ++s) {
          const int64_t mine = std::clamp<int64_t>(pages - s * chunk, 0, chunk);  // 0: an empty split
          const double t = free_at.top() + static_cast<double>(mine) + (mine > 0 ? overhead : overhead / 4);
          free_at.pop();
          free_at.push(t);
          makespan = std::max(makespan, t);
        }
      }
    }
  }
  if (num_splits > 1) makespan += overhead / 2;  // the merge
  return makespan;
}

Status plan_decode(const DecodePlanInput& in, DecodePlan* plan) {
  if (plan == nullptr) return invalid_argument("plan_decode: plan is null");
  if (in.batch < 0) return invalid_argument("plan_decode: batch " + std::to_string(in.batch) + " < 0");
  if (in.num_kv_heads <= 0 || in.num_heads <= 0 || in.head_dim <= 0 || in.q_len <= 0)
    return invalid_argument("plan_decode: num_heads, num_kv_heads, head_dim and q_len must be > 0");
  if (in.block_size <= 0) return invalid_argument("plan_decode: block_size must be > 0");
  const DecodeLaunchShape& machine = in.shape;
  if (machine.sm_count <= 0 || machine.ctas_per_sm <= 0 || machine.rows_per_cta < 0)
    return invalid_argument("plan_decode: no usable machine: shape {rows_per_cta " +
                            std::to_string(machine.rows_per_cta) + ", ctas_per_sm " +
                            std::to_string(machine.ctas_per_sm) + ", sm_count " + std::to_string(machine.sm_count) +
                            "} needs sm_count > 0, ctas_per_sm > 0 and rows_per_cta >= 0 (give the machine "
                            "from decode_launch_shape)");
  if (in.max_splits < 0) return invalid_argument("plan_decode: max_splits < 0");
  if (in.min_pages_per_split < 0) return invalid_argument("plan_decode: min_pages_per_split < 0");
  if (in.overhead_keys < 0) return invalid_argument("plan_decode: overhead_keys < 0");

  const int64_t workers = static_cast<int64_t>(machine.sm_count) * machine.ctas_per_sm;
  const int64_t per_item = decode_workers_per_item(in);  // workers an item takes at once
  const int64_t min_pages =
      in.min_pages_per_split > 0 ? in.min_pages_per_split : std::max<int64_t>(1, 256 / in.block_size);
  DecodePlan out;

  if (in.graph_mode) {
    if (in.max_seq_len <= 0) return invalid_argument("plan_decode: graph mode needs max_seq_len > 0");
    const int64_t max_pages = ceil_div(in.max_seq_len, in.block_size);
    int64_t splits = in.max_splits;
    if (splits == 0) {
      // One wave of the machine: the items of a split (every sequence and kv head, their row
      // blocks) as many times as the workers hold, at most kGraphMaxSplits.
      const int64_t units = std::max<int64_t>(1, static_cast<int64_t>(in.batch) * in.num_kv_heads * per_item);
      splits = std::clamp<int64_t>(ceil_div(workers, units), 1, kGraphMaxSplits);
    }
    out.num_splits = static_cast<int32_t>(splits);
    out.pages_per_split = static_cast<int32_t>(std::max<int64_t>(1, ceil_div(max_pages, splits)));
    out.work_items = static_cast<int64_t>(in.batch) * in.num_kv_heads * out.num_splits;
  } else {
    if (in.batch > 0 && in.seq_lens == nullptr) return invalid_argument("plan_decode: seq_lens is null");
    int64_t max_pages = 0;
    for (int32_t b = 0; b < in.batch; ++b) {
      if (in.seq_lens[b] < 0)
        return invalid_argument("plan_decode: seq_lens[" + std::to_string(b) + "] = " +
                                std::to_string(in.seq_lens[b]) + " < 0");
      max_pages = std::max(max_pages, pages_of(in, b));
    }
    const int64_t max_splits = in.max_splits > 0 ? in.max_splits : kMaxSplits;
    const int64_t units = static_cast<int64_t>(in.batch) * in.num_kv_heads * per_item;
    int64_t chunk = std::max<int64_t>(max_pages, 1);  // one split each
    if (units < workers && max_pages > min_pages) {
      // Candidates: the chunks that give the longest sequence s splits, s = 1..max_splits, no
      // smaller than min_pages. Ties go to the larger chunk (fewer splits, less merging).
      double best = decode_makespan(in, chunk);
      // Candidates whose lower bounds already reach the best are not simulated (they could not
      // win: t >= bound > best): the simulation is O(items · log workers), and at 32 sequences
      // of 32k keys the 63 candidates took ~8 ms of host time a step on a 2-core VM; the work
      // bound only grows with s, so past it nothing can win.
      for (int64_t s = 2; s <= max_splits; ++s) {
        const int64_t c = ceil_div(max_pages, s);
        if (c < min_pages) break;
        if (c == chunk) continue;
        const MakespanBounds lb = makespan_bounds(in, c);
        const double margin = 1e-7 * std::max(1.0, best);  // the bounds' own rounding
        if (lb.work > best + margin) break;
        if (lb.item > best + margin) continue;
        const double t = decode_makespan(in, c);
        if (t < best - 1e-9) {
          best = t;
          chunk = c;
        }
      }
    }
    out.pages_per_split = static_cast<int32_t>(chunk);
    out.num_splits = static_cast<int32_t>(std::max<int64_t>(1, ceil_div(max_pages, chunk)));
    for (int32_t b = 0; b < in.batch; ++b) out.work_items += splits_of(pages_of(in, b), chunk) * in.num_kv_heads;
    out.makespan = in.batch > 0 ? decode_makespan(in, chunk) : 0.0;
  }
  out.wave_fill = wave_fill(out.work_items * per_item, workers);
  out.workspace_bytes = decode_workspace_bytes(out.num_splits, in.batch, in.q_len, in.num_heads, in.head_dim);
  *plan = out;
  return Status::Ok();
}

}  // namespace flashserve
