// The split-K planner: a pure host function, apart from the kernels (FlashInfer's plan/run).
//
// Every split is one work item (sequence, kv head, split); all query heads of a GQA group
// ride along, so each K/V byte is read once per group. The planner picks one chunk size
// (pages_per_split) for the whole batch; a sequence of P pages gets ceil(P / chunk) splits.
// Among the chunks that give each sequence at most max_splits splits and never split below
// min_pages_per_split, it takes the one whose schedule finishes first on the machine's
// workers, by simulating it: items are handed out in launch order (splits, then kv heads,
// then sequences) to whichever worker frees first, an item costing its pages plus a fixed
// overhead (start-up latency, the partial's write: overhead_keys worth of keys, measured,
// see bench/history/decode.md "decode v2.3"), every split plan paying one merge. An item
// whose query rows (q_len × GQA group) exceed the shape's rows_per_cta takes ceil(rows /
// rows_per_cta) workers at once (the CUDA kernel's row blocks), simulated as consecutive items
// (the kernel's clustered launch hands them out a pair of row blocks at a time: the same
// waves). When the items' workers (batch × kv_heads × that) already fill the machine nothing
// is split.
//
// The machine is a DecodeLaunchShape: workers = sm_count × ctas_per_sm, each taking rows_per_cta
// query rows of an item. The planner takes it as numbers; decode_launch_shape (decode/decode.h)
// asks the device for the CUDA kernel's (decode/cuda: the occupancy API on the instance that
// runs, cached per device) or gives the CPU's.
//
// Worked examples, 132 workers (an H200's SMs, one item each: shape {16, 1, 132}), block_size
// 16, min 16 pages, overhead 6 pages:
//   batch 1, 8 kv heads, 32k keys = 2048 pages: chunk 128 pages gives 16 splits, 128 items,
//     one wave of 134 page-times plus the merge (0.97 of the workers busy); chunk 64 would need
//     two waves (140), and chunk 120 gives 18 splits = 144 items, a second wave for 12 (254).
//   batch 4, 8 kv heads, 4k keys = 256 pages: chunk 64, 4 splits, 128 items, one wave (70).
//   batch 32, 8 kv heads, any length: 256 items already fill the machine: 1 split, no merge.
//   batch 1, 8 kv heads, 100 keys = 7 pages: below the 16-page minimum: 1 split.
//   264 workers (2 an SM: the H200's shape at head_dim 128, {16, 2, 132}), batch 8, 8 kv heads,
//     8k keys, q_len 8 × GQA 4 = 32 rows: 2 workers an item; chunk 256 pages, 2 splits, 128
//     items on 256 workers, one wave (265); 4 splits would need two waves (271). With q_len 1 the same batch takes 4 splits.
//   mixed lengths (one 32k among 1k-16k sequences): the long sequence is cut finer than one
//     wave would need, so it does not finish alone after the rest (several waves, balanced).
//
// CUDA-graph mode: the work must not depend on the lengths at replay time, so num_splits is
// fixed to max_splits and the chunk to ceil(pages of max_seq_len / max_splits); shorter
// sequences leave their last splits empty (lse = -inf, merged as nothing). The workspace is
// then sized once, for the batch and max_splits. With max_splits 0 the planner picks it: as
// many splits as one wave of the machine holds, ceil(workers / (batch × kv_heads × workers an
// item)), clamped to 1..32 (kGraphMaxSplits). E.g. {16, 2, 132} (264 workers), 8 kv heads,
// q_len 1: batch 1 takes 32 splits, batch 4 9, batch 16 3, batch 33 and more 1.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "decode/params.h"

namespace flashserve {

inline constexpr int32_t kMaxSplits = 64;       // the cap on splits a sequence, outside graph mode
inline constexpr int32_t kGraphMaxSplits = 32;  // graph mode's cap when the planner picks the splits

// The machine a plan is for, in the decode kernel's terms: sm_count × ctas_per_sm workers run
// at once, each taking rows_per_cta query rows of an item. The CUDA kernel's comes from the
// device (cuda::decode_launch_shape: the occupancy API on the instance that runs, cached per
// device and instance); the CPU's is {0, 1, the thread pool's threads}.
struct DecodeLaunchShape {
  int32_t rows_per_cta = 0;  // query rows one worker takes of an item (the CUDA kernel: one mma's
                             // M, kDecodeRowsPerCta); 0: a worker takes an item whole (the CPU)
  int32_t ctas_per_sm = 0;   // workers an SM holds at once; 1 on the CPU
  int32_t sm_count = 0;      // SMs; on the CPU, threads
};

struct DecodePlanInput {
  int32_t batch = 0;
  const int32_t* seq_lens = nullptr;  // [batch] host array; unused in graph mode
  int32_t q_len = 1;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 0;
  DecodeLaunchShape shape;         // the machine, from decode_launch_shape (or numbers of one:
                                   // sm_count > 0, ctas_per_sm > 0, rows_per_cta >= 0); required
  int32_t min_pages_per_split = 0; // 0: as many pages as hold 256 keys (at least 1)
  int32_t max_splits = 0;          // cap on splits per sequence; 0: the planner's, kMaxSplits, or
                                   // in graph mode one wave's (the header comment), <= 32
  int32_t overhead_keys = 96;      // fixed cost of one work item, in keys streamed
  bool graph_mode = false;
  int32_t max_seq_len = 0;         // graph mode: the longest sequence a replay may see
};

struct DecodePlan {
  int32_t num_splits = 1;        // splits of the longest sequence (workspace dimension)
  int32_t pages_per_split = 1;
  int64_t work_items = 0;        // items that hold keys: Σ over sequences of splits × kv heads
  double wave_fill = 0.0;        // work_items × workers an item / (waves × workers)
  double makespan = 0.0;         // simulated finish, in page-times (graph mode: 0)
  int64_t workspace_bytes = 0;   // decode_workspace_bytes(num_splits, ...)
};

Status plan_decode(const DecodePlanInput& in, DecodePlan* plan);

// The simulated finish time (in page-times) of a chunk for the planner's input; exposed for
// tests and the benchmark notes.
double decode_makespan(const DecodePlanInput& in, int64_t pages_per_split);

// Workers one item (sequence, kv head, split) takes at once: ceil(q_len × GQA group /
// rows_per_cta), at least 1 (1 when rows_per_cta is 0).
int64_t decode_workers_per_item(const DecodePlanInput& in);

}  // namespace flashserve
