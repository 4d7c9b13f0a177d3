// The split planner is a pure host function: its worked examples, its invariants over random
// batches, graph mode and its split policy; the launch shape as input, against the planner as it
// was before it took one (a frozen copy); and the machine that num_workers = 0 asks for.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/cuda_device.h"
#include "common/thread_pool.h"
#include "decode/decode.h"
#include "decode/params.h"
#include "decode/planner.h"
#include "flashserve_c.h"

namespace flashserve {
namespace {

// workers CTAs of the CUDA kernel's rows, one an SM.
DecodeLaunchShape cuda_like(int32_t workers) { return DecodeLaunchShape{kDecodeRowsPerCta, 1, workers}; }

DecodePlanInput input(const std::vector<int32_t>& lens, int kv_heads = 8, int workers = 132) {
  DecodePlanInput in;
  in.batch = static_cast<int32_t>(lens.size());
  in.seq_lens = lens.data();
  in.num_heads = kv_heads * 4;
  in.num_kv_heads = kv_heads;
  in.head_dim = 128;
  in.block_size = 16;
  in.shape = cuda_like(workers);
  return in;
}

// ---- The planner as it was before the launch shape (commit e174c1a), frozen, with its inputs
// num_workers and rows_per_worker (gone from DecodePlanInput): the reference the shape-taking
// planner must equal for the shape {rows_per_worker, ctas, sms} with sms × ctas = num_workers. ----
struct OldInput {
  int32_t batch = 0;
  const int32_t* seq_lens = nullptr;
  int32_t q_len = 1, num_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 0;
  int32_t num_workers = 0, min_pages_per_split = 0, max_splits = 64, overhead_keys = 96;
  int32_t rows_per_worker = 16;
  bool graph_mode = false;
  int32_t max_seq_len = 0;
};

int64_t old_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t old_pages_of(const OldInput& in, int32_t b) { return old_ceil_div(in.seq_lens[b], in.block_size); }
int64_t old_splits_of(int64_t pages, int64_t chunk) { return std::max<int64_t>(1, old_ceil_div(pages, chunk)); }

int64_t old_workers_per_item(const OldInput& in) {
  if (in.rows_per_worker <= 0 || in.num_kv_heads <= 0) return 1;
  const int64_t rows = static_cast<int64_t>(in.q_len) * (in.num_heads / in.num_kv_heads);
  return std::max<int64_t>(1, old_ceil_div(rows, in.rows_per_worker));
}

double old_makespan(const OldInput& in, int64_t chunk) {
  const double overhead = static_cast<double>(in.overhead_keys) / in.block_size;
  int64_t num_splits = 1;
  for (int32_t b = 0; b < in.batch; ++b) num_splits = std::max(num_splits, old_splits_of(old_pages_of(in, b), chunk));
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (int32_t w = 0; w < in.num_workers; ++w) free_at.push(0.0);
  const int64_t per_item = old_workers_per_item(in);
  double makespan = 0.0;
  for (int32_t b = 0; b < in.batch; ++b) {
    const int64_t pages = old_pages_of(in, b);
    for (int32_t h = 0; h < in.num_kv_heads; ++h) {
      for (int64_t r = 0; r < per_item; ++r) {
        for (int64_t s = 0; s < num_splits; ++s) {
          const int64_t mine = std::clamp<int64_t>(pages - s * chunk, 0, chunk);
          const double t = free_at.top() + static_cast<double>(mine) + (mine > 0 ? overhead : overhead / 4);
          free_at.pop();
          free_at.push(t);
          makespan = std::max(makespan, t);
        }
      }
    }
  }
  if (num_splits > 1) makespan += overhead / 2;
  return makespan;
}

DecodePlan old_plan(const OldInput& in) {
  const int64_t per_item = old_workers_per_item(in);
  const int64_t min_pages =
      in.min_pages_per_split > 0 ? in.min_pages_per_split : std::max<int64_t>(1, 256 / in.block_size);
  DecodePlan out;
  if (in.graph_mode) {
    const int64_t max_pages = old_ceil_div(in.max_seq_len, in.block_size);
    out.num_splits = in.max_splits;
    out.pages_per_split = static_cast<int32_t>(std::max<int64_t>(1, old_ceil_div(max_pages, in.max_splits)));
    out.work_items = static_cast<int64_t>(in.batch) * in.num_kv_heads * out.num_splits;
  } else {
    int64_t max_pages = 0;
    for (int32_t b = 0; b < in.batch; ++b) max_pages = std::max(max_pages, old_pages_of(in, b));
    const int64_t units = static_cast<int64_t>(in.batch) * in.num_kv_heads * per_item;
    int64_t chunk = std::max<int64_t>(max_pages, 1);
    if (units < in.num_workers && max_pages > min_pages) {
      double best = old_makespan(in, chunk);
      for (int64_t s = 2; s <= in.max_splits; ++s) {
        const int64_t c = old_ceil_div(max_pages, s);
        if (c < min_pages) break;
        if (c == chunk) continue;
        const double t = old_makespan(in, c);
        if (t < best - 1e-9) {
          best = t;
          chunk = c;
        }
      }
    }
    out.pages_per_split = static_cast<int32_t>(chunk);
    out.num_splits = static_cast<int32_t>(std::max<int64_t>(1, old_ceil_div(max_pages, chunk)));
    for (int32_t b = 0; b < in.batch; ++b)
      out.work_items += old_splits_of(old_pages_of(in, b), chunk) * in.num_kv_heads;
    out.makespan = in.batch > 0 ? old_makespan(in, chunk) : 0.0;
  }
  const int64_t items = out.work_items * per_item;
  if (items > 0) {
    const int64_t waves = old_ceil_div(items, in.num_workers);
    out.wave_fill = static_cast<double>(items) / static_cast<double>(waves * in.num_workers);
  }
  out.workspace_bytes = decode_workspace_bytes(out.num_splits, in.batch, in.q_len, in.num_heads, in.head_dim);
  return out;
}

// The model's split policy for CUDA graphs before the planner had it (llama_cuda.cc, e174c1a):
// 2 CTAs an SM, clamp(ceil(workers / CTAs a split), 1, 32).
int32_t old_graph_max_splits(int32_t nd, int32_t kv_heads, int32_t heads, int32_t q_len, int32_t sm_count) {
  OldInput in;
  in.q_len = q_len;
  in.num_heads = heads;
  in.num_kv_heads = kv_heads;
  const int32_t num_workers = 2 * sm_count;
  const int64_t units = int64_t{nd} * kv_heads * old_workers_per_item(in);
  return static_cast<int32_t>(std::clamp<int64_t>((num_workers + units - 1) / units, 1, 32));
}

std::string describe(const DecodePlan& p) {
  std::ostringstream os;
  os << "splits " << p.num_splits << " chunk " << p.pages_per_split << " items " << p.work_items << " fill "
     << p.wave_fill << " makespan " << p.makespan << " ws " << p.workspace_bytes;
  return os.str();
}

// Bit-for-bit: the same simulation in the same order gives the same doubles.
bool same_plan(const DecodePlan& a, const DecodePlan& b) {
  return a.num_splits == b.num_splits && a.pages_per_split == b.pages_per_split && a.work_items == b.work_items &&
         a.wave_fill == b.wave_fill && a.makespan == b.makespan && a.workspace_bytes == b.workspace_bytes;
}

TEST(Planner, WorkedExamplesFromTheComment) {
  DecodePlan plan;
  std::vector<int32_t> one_32k = {32768};
  ASSERT_TRUE(plan_decode(input(one_32k), &plan).ok());
  EXPECT_EQ(plan.pages_per_split, 128);
  EXPECT_EQ(plan.num_splits, 16);
  EXPECT_EQ(plan.work_items, 128);
  EXPECT_NEAR(plan.wave_fill, 128.0 / 132.0, 1e-12);
  EXPECT_EQ(plan.workspace_bytes, decode_workspace_bytes(16, 1, 1, 32, 128));

  std::vector<int32_t> four_4k(4, 4096);
  ASSERT_TRUE(plan_decode(input(four_4k), &plan).ok());
  EXPECT_EQ(plan.pages_per_split, 64);
  EXPECT_EQ(plan.num_splits, 4);

  std::vector<int32_t> many(32, 1000);
  ASSERT_TRUE(plan_decode(input(many), &plan).ok());
  EXPECT_EQ(plan.num_splits, 1);
  EXPECT_EQ(plan.workspace_bytes, 0);

  std::vector<int32_t> short_one = {100};
  ASSERT_TRUE(plan_decode(input(short_one), &plan).ok());
  EXPECT_EQ(plan.num_splits, 1);
}

// Query rows beyond the shape's rows_per_cta (q_len 8 × GQA 4 = 32: two CUDA row blocks) take two workers
// an item, so the batch is split less (the comment's example; on the H200, 2 splits measured
// 3.58 TB/s against 3.41 with 4: bench/history/decode.md, "Planner: an item's row blocks count
// as workers").
TEST(Planner, RowBlocksTakeWorkers) {
  DecodePlan plan;
  std::vector<int32_t> eight_8k(8, 8192);
  DecodePlanInput in = input(eight_8k, 8, 264);
  in.q_len = 8;
  ASSERT_TRUE(plan_decode(in, &plan).ok());
  EXPECT_EQ(plan.num_splits, 2);
  EXPECT_EQ(plan.pages_per_split, 256);
  EXPECT_EQ(plan.work_items, 128);
  EXPECT_NEAR(plan.wave_fill, 256.0 / 264.0, 1e-12);
  EXPECT_NEAR(plan.makespan, 256 + 6 + 3, 1e-9);
  EXPECT_NEAR(decode_makespan(in, 128), 2 * (128 + 6) + 3, 1e-9);
  in.shape.rows_per_cta = 0;  // one worker an item (CPU): as q_len 1
  ASSERT_TRUE(plan_decode(in, &plan).ok());
  EXPECT_EQ(plan.num_splits, 4);
  in.shape.rows_per_cta = 16;
  in.q_len = 1;
  ASSERT_TRUE(plan_decode(in, &plan).ok());
  EXPECT_EQ(plan.num_splits, 4);
  // Items whose workers already fill the machine are not split: 32 × 8 × 2 = 512 ≥ 264.
  std::vector<int32_t> many(32, 4096);
  DecodePlanInput q8 = input(many, 8, 264);
  q8.q_len = 8;
  ASSERT_TRUE(plan_decode(q8, &plan).ok());
  EXPECT_EQ(plan.num_splits, 1);
  q8.shape.rows_per_cta = -1;
  EXPECT_EQ(plan_decode(q8, &plan).code(), StatusCode::kInvalidArgument);
  // The same 264 workers as 132 SMs of 2 CTAs: the same plan as 264 of one.
  DecodePlanInput two_an_sm = input(eight_8k, 8, 264);
  two_an_sm.q_len = 8;
  two_an_sm.shape = DecodeLaunchShape{16, 2, 132};
  ASSERT_TRUE(plan_decode(two_an_sm, &plan).ok());
  EXPECT_EQ(plan.num_splits, 2);
  EXPECT_EQ(plan.pages_per_split, 256);
}

// Random batches: the plan covers every sequence, never splits below the minimum unless
// there is one split, respects max_splits, and its simulated finish is no later than that of
// other candidate chunks (ceil(max_pages / s), the unsplit one included).
TEST(Planner, InvariantsOnRandomBatches) {
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 600; ++trial) {
    const int batch = std::uniform_int_distribution<int>(1, 40)(rng);
    const int kv = std::uniform_int_distribution<int>(1, 8)(rng);
    const int workers = std::uniform_int_distribution<int>(1, 264)(rng);
    std::vector<int32_t> lens(batch);
    for (auto& l : lens) l = std::uniform_int_distribution<int>(0, trial % 3 == 0 ? 200000 : 5000)(rng);
    DecodePlanInput in = input(lens, kv, workers);
    in.block_size = 1 << std::uniform_int_distribution<int>(0, 8)(rng);
    DecodePlan plan;
    ASSERT_TRUE(plan_decode(in, &plan).ok());
    const int64_t min_pages = std::max(1, 256 / in.block_size);
    int64_t items = 0, max_pages = 1;
    for (int32_t l : lens) {
      const int64_t pages = (l + in.block_size - 1) / in.block_size;
      max_pages = std::max(max_pages, pages);
      const int64_t splits = std::max<int64_t>(1, (pages + plan.pages_per_split - 1) / plan.pages_per_split);
      ASSERT_LE(splits, plan.num_splits);
      items += splits * kv;
    }
    ASSERT_EQ(items, plan.work_items);
    ASSERT_LE(plan.num_splits, kMaxSplits);  // max_splits 0: the planner's cap
    ASSERT_GE(static_cast<int64_t>(plan.num_splits) * plan.pages_per_split, max_pages);
    if (plan.num_splits > 1) {
      ASSERT_GE(plan.pages_per_split, min_pages);
      ASSERT_LT(static_cast<int64_t>(batch) * kv, workers) << "split although the batch fills the workers";
    }
    ASSERT_NEAR(plan.makespan, decode_makespan(in, plan.pages_per_split), 1e-9);
    if (static_cast<int64_t>(batch) * kv < workers) {
      // The candidates: chunks that give the longest sequence s splits.
      for (int64_t s : {1, 2, 7}) {
        const int64_t c = (max_pages + s - 1) / s;
        if (s == 1 || (max_pages > min_pages && c >= min_pages)) {
          ASSERT_LE(plan.makespan, decode_makespan(in, c) + 1e-9) << "chunk " << c;
        }
      }
    }
    ASSERT_GT(plan.wave_fill, 0.0);
    ASSERT_LE(plan.wave_fill, 1.0);
  }
}

// One long sequence among short ones: the planner cuts it finer than one wave needs, so it
// does not run alone after the others have finished.
TEST(Planner, MixedLengthsBalance) {
  std::vector<int32_t> lens(26, 2000);
  lens.push_back(32768);
  DecodePlan plan;
  DecodePlanInput in = input(lens, 8, 264);
  ASSERT_TRUE(plan_decode(in, &plan).ok());
  EXPECT_GT(plan.num_splits, 3);
  const int64_t max_pages = 2048;
  EXPECT_LT(plan.makespan, 0.6 * decode_makespan(in, max_pages));
}

TEST(Planner, GraphModeFixesSplitsAndWorkspace) {
  const std::vector<int32_t> none;
  DecodePlanInput in = input(none);
  in.batch = 64;
  in.seq_lens = nullptr;
  in.graph_mode = true;
  in.max_splits = 8;
  in.max_seq_len = 8192;
  DecodePlan plan;
  ASSERT_TRUE(plan_decode(in, &plan).ok());
  EXPECT_EQ(plan.num_splits, 8);
  EXPECT_EQ(plan.pages_per_split, 64);  // 512 pages / 8
  EXPECT_EQ(plan.workspace_bytes, decode_workspace_bytes(8, 64, 1, 32, 128));
}

TEST(Planner, RejectsBadInput) {
  DecodePlan plan;
  std::vector<int32_t> lens = {5, -1};
  EXPECT_EQ(plan_decode(input(lens), &plan).code(), StatusCode::kInvalidArgument);
  const std::vector<int32_t> ten = {10};
  DecodePlanInput in = input(ten);
  in.shape.sm_count = 0;  // no machine
  EXPECT_EQ(plan_decode(in, &plan).code(), StatusCode::kInvalidArgument);
  in = input(ten);
  in.block_size = 0;
  EXPECT_EQ(plan_decode(in, &plan).code(), StatusCode::kInvalidArgument);
  in = input(ten);
  in.graph_mode = true;
  EXPECT_EQ(plan_decode(in, &plan).code(), StatusCode::kInvalidArgument);  // no max_seq_len
  EXPECT_EQ(plan_decode(input(ten), nullptr).code(), StatusCode::kInvalidArgument);
  in = input(ten);
  in.shape.ctas_per_sm = 0;
  EXPECT_EQ(plan_decode(in, &plan).code(), StatusCode::kInvalidArgument);
  in = input(ten);
  in.shape.sm_count = -4;
  EXPECT_EQ(plan_decode(in, &plan).code(), StatusCode::kInvalidArgument);
  in = input(ten);
  in.max_splits = -1;
  EXPECT_EQ(plan_decode(in, &plan).code(), StatusCode::kInvalidArgument);
  in = input(ten);
  in.shape.rows_per_cta = -1;
  EXPECT_EQ(plan_decode(in, &plan).code(), StatusCode::kInvalidArgument);
  // No shape at all (the default, every field 0): refused, and the message says what is missing.
  in = input(ten);
  in.shape = DecodeLaunchShape{};
  const Status st = plan_decode(in, &plan);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("sm_count > 0"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("decode_launch_shape"), std::string::npos) << st.message();
}

// (a) The launch shape as input changes no plan: on a grid of odd inputs (lengths 0, 1, 15, 17,
// 1000, 32769 and random ones; GQA groups 1, 3, 4, 7; q_len 1..8; block sizes 1, 7, 16, 256;
// worker counts as SMs × CTAs an SM; rows a CTA 0, 5, 16; split caps and minimums; graph mode
// with its explicit max_splits), plan_decode with the shape {rows, ctas, sms} equals the frozen
// planner given num_workers = sms × ctas and rows_per_worker = rows, field for field (makespan
// and wave fill bit for bit). The machines {16, 1, n} are what the old num_workers = n meant
// (the C ABI's num_workers > 0 still does), {0, 1, n} the old CPU plan of n threads.
TEST(Planner, ShapePlansEqualThePlannerBeforeIt) {
  std::mt19937 rng(2626);
  const int32_t fixed_lens[] = {0, 1, 15, 17, 1000, 32769};
  const int32_t groups[] = {1, 3, 4, 7};
  const int32_t block_sizes[] = {1, 7, 16, 256};
  const DecodeLaunchShape machines[] = {{16, 1, 1}, {16, 2, 66}, {16, 2, 132}, {16, 4, 78}, {5, 3, 7},
                                        {0, 1, 13}, {0, 1, 64}, {16, 1, 264}, {16, 2, 114}};
  const int32_t caps[] = {0, 1, 5, 64};  // 0: the default (the old one was 64)
  int cases = 0, split_cases = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    const int32_t batch = std::uniform_int_distribution<int32_t>(1, trial % 5 == 0 ? 40 : 6)(rng);
    std::vector<int32_t> lens(static_cast<size_t>(batch));
    for (auto& l : lens) {
      const int pick = std::uniform_int_distribution<int>(0, 9)(rng);
      l = pick < 6 ? fixed_lens[pick] : std::uniform_int_distribution<int32_t>(0, pick == 9 ? 70000 : 5000)(rng);
    }
    const DecodeLaunchShape machine = machines[trial % 9];
    DecodePlanInput in;
    in.batch = batch;
    in.seq_lens = lens.data();
    in.q_len = 1 + trial % kMaxDecodeQLen;
    in.num_kv_heads = std::uniform_int_distribution<int32_t>(1, 8)(rng);
    in.num_heads = in.num_kv_heads * groups[(trial / 9) % 4];
    in.head_dim = trial % 2 ? 128 : 64;
    in.block_size = block_sizes[(trial / 3) % 4];
    in.min_pages_per_split = trial % 7 == 0 ? 3 : 0;
    in.max_splits = caps[(trial / 5) % 4];
    in.graph_mode = trial % 11 == 0;
    if (in.graph_mode) {
      in.max_splits = std::max<int32_t>(in.max_splits, 1 + trial % 37);  // the old graph mode needs it
      in.max_seq_len = std::uniform_int_distribution<int32_t>(1, 40000)(rng);
    }
    in.shape = machine;

    OldInput old;
    old.batch = in.batch;
    old.seq_lens = in.seq_lens;
    old.q_len = in.q_len;
    old.num_heads = in.num_heads;
    old.num_kv_heads = in.num_kv_heads;
    old.head_dim = in.head_dim;
    old.block_size = in.block_size;
    old.num_workers = machine.sm_count * machine.ctas_per_sm;
    old.rows_per_worker = machine.rows_per_cta;
    old.min_pages_per_split = in.min_pages_per_split;
    old.max_splits = in.max_splits > 0 ? in.max_splits : 64;
    old.graph_mode = in.graph_mode;
    old.max_seq_len = in.max_seq_len;
    const DecodePlan want = old_plan(old);

    DecodePlan got;
    ASSERT_TRUE(plan_decode(in, &got).ok());
    ASSERT_TRUE(same_plan(got, want)) << "trial " << trial << ": shape {" << machine.rows_per_cta << ", "
                                      << machine.ctas_per_sm << ", " << machine.sm_count << "}: got "
                                      << describe(got) << ", the old planner " << describe(want);
    if (!in.graph_mode) {
      ASSERT_EQ(got.makespan, decode_makespan(in, got.pages_per_split));
      ASSERT_EQ(decode_workers_per_item(in), old_workers_per_item(old));
    }
    ++cases;
    split_cases += want.num_splits > 1;
  }
  EXPECT_EQ(cases, 1500);
  EXPECT_GT(split_cases, 300) << "the grid hardly reaches the split search";
}

// (b) Graph mode with max_splits 0: the planner's policy gives the splits the model's formula
// gave (2 CTAs an SM), and then the same plan as the old planner given that max_splits.
TEST(Planner, GraphPolicyIsTheModelsFormula) {
  const int32_t sms[] = {1, 78, 108, 132};
  const int32_t kv_heads[] = {1, 2, 3, 8};
  const int32_t groups[] = {1, 4, 7, 8};
  int clamped_low = 0, clamped_high = 0;
  for (int32_t sm : sms)
    for (int32_t kv : kv_heads)
      for (int32_t group : groups)
        for (int32_t q_len : {1, 3, 8})
          for (int32_t nd = 1; nd <= 300; nd += (nd < 40 ? 1 : 13)) {
            DecodePlanInput in;
            in.batch = nd;
            in.q_len = q_len;
            in.num_heads = kv * group;
            in.num_kv_heads = kv;
            in.head_dim = 128;
            in.block_size = 16;
            in.shape = DecodeLaunchShape{16, 2, sm};
            in.graph_mode = true;
            in.max_seq_len = 1 + (nd * 7919) % 131072;
            DecodePlan plan;
            ASSERT_TRUE(plan_decode(in, &plan).ok());
            const int32_t want = old_graph_max_splits(nd, kv, kv * group, q_len, sm);
            ASSERT_EQ(plan.num_splits, want) << "sms " << sm << " kv " << kv << " group " << group << " q_len "
                                             << q_len << " batch " << nd;
            OldInput old;
            old.batch = nd;
            old.q_len = q_len;
            old.num_heads = kv * group;
            old.num_kv_heads = kv;
            old.head_dim = 128;
            old.block_size = 16;
            old.num_workers = 2 * sm;
            old.max_splits = want;
            old.graph_mode = true;
            old.max_seq_len = in.max_seq_len;
            ASSERT_TRUE(same_plan(plan, old_plan(old))) << describe(plan) << " vs " << describe(old_plan(old));
            clamped_low += want == 1;
            clamped_high += want == 32;
          }
  EXPECT_GT(clamped_low, 0);
  EXPECT_GT(clamped_high, 0);
  // The header comment's examples: {16, 2, 132}, 8 kv heads, q_len 1.
  const std::vector<int32_t> none;
  for (auto [batch, splits] : {std::pair{1, 32}, {4, 9}, {16, 3}, {32, 2}, {33, 1}, {200, 1}}) {
    DecodePlanInput in = input(none);
    in.batch = batch;
    in.seq_lens = nullptr;
    in.shape = DecodeLaunchShape{16, 2, 132};
    in.graph_mode = true;
    in.max_seq_len = 8192;
    DecodePlan plan;
    ASSERT_TRUE(plan_decode(in, &plan).ok());
    EXPECT_EQ(plan.num_splits, splits) << "batch " << batch;
    EXPECT_EQ(plan.pages_per_split, (512 + splits - 1) / splits);
  }
}

// (c) The machine nobody names (num_workers = 0 in the C ABI). Without a usable GPU (a CPU-only
// build, or none present: this machine), and for a head_dim the CUDA kernels lack even with
// one, it is the CPU's: the thread pool's threads, each taking an item whole, and the plan is
// the one decode() makes for the CPU. With a GPU it is the device's kernel shape.
TEST(Planner, AskingTheMachineFallsBackToTheCpu) {
  const int32_t threads = ThreadPool::global().num_threads();
  auto is_cpu = [&](const DecodeLaunchShape& s) {
    return s.rows_per_cta == 0 && s.ctas_per_sm == 1 && s.sm_count == threads;
  };
  DecodeLaunchShape shape;
  ASSERT_TRUE(decode_launch_shape(Device::kCPU, 128, DType::kBFloat16, &shape).ok());
  EXPECT_TRUE(is_cpu(shape));
  ASSERT_TRUE(decode_local_launch_shape(96, DType::kBFloat16, &shape).ok());  // no CUDA kernel: the CPU's
  EXPECT_TRUE(is_cpu(shape));
  ASSERT_TRUE(decode_local_launch_shape(128, DType::kFloat32, &shape).ok());
  EXPECT_TRUE(is_cpu(shape));
  DecodeLaunchShape local;
  ASSERT_TRUE(decode_local_launch_shape(128, DType::kBFloat16, &local).ok());
  if (!cuda_available()) {
    EXPECT_TRUE(is_cpu(local)) << "{" << local.rows_per_cta << ", " << local.ctas_per_sm << ", " << local.sm_count
                               << "}, " << threads << " threads";
    EXPECT_FALSE(decode_launch_shape(Device::kCUDA, 128, DType::kBFloat16, &shape).ok());
  } else {
    CudaDeviceInfo info;
    ASSERT_TRUE(cuda_device_info(0, &info).ok());
    EXPECT_EQ(local.rows_per_cta, kDecodeRowsPerCta);
    EXPECT_GE(local.ctas_per_sm, 1);
    EXPECT_EQ(local.sm_count, info.sm_count);
  }

  // The C ABI: num_workers 0 plans for that machine, graph mode's policy included (max_splits 0).
  struct Case {
    std::vector<int32_t> lens;
    int32_t q_len, heads, kv_heads, head_dim, block_size, max_splits, graph;
  };
  const std::vector<Case> cases = {
      {{32768}, 1, 32, 8, 128, 16, 64, 0},         {{1000, 17, 32769, 0}, 8, 28, 4, 128, 16, 64, 0},
      {{5000, 5000, 3}, 3, 12, 3, 64, 7, 0, 0},    {{70000}, 8, 64, 8, 128, 1, 5, 0},
      {{}, 1, 32, 8, 128, 16, 0, 1},               {{}, 8, 32, 8, 64, 16, 0, 1},
      {{2000, 40000}, 2, 14, 2, 96, 16, 64, 0},
  };
  for (const Case& c : cases) {
    const int32_t batch = c.graph ? 5 : static_cast<int32_t>(c.lens.size());
    fs_decode_plan got{};
    ASSERT_EQ(fs_decode_plan_create(batch, c.graph ? nullptr : c.lens.data(), c.q_len, c.heads, c.kv_heads, c.head_dim,
                                    c.block_size, 0, 0, c.max_splits, c.graph, c.graph ? 20000 : 0, &got),
              FS_OK)
        << fs_last_error();
    DecodePlanInput in;
    in.batch = batch;
    in.seq_lens = c.graph ? nullptr : c.lens.data();
    in.q_len = c.q_len;
    in.num_heads = c.heads;
    in.num_kv_heads = c.kv_heads;
    in.head_dim = c.head_dim;
    in.block_size = c.block_size;
    in.max_splits = c.max_splits;
    in.graph_mode = c.graph != 0;
    in.max_seq_len = c.graph ? 20000 : 0;
    ASSERT_TRUE(decode_local_launch_shape(c.head_dim, DType::kBFloat16, &in.shape).ok());
    if (!cuda_available() || c.head_dim == 96) {
      ASSERT_TRUE(is_cpu(in.shape));
    }
    DecodePlan want;
    ASSERT_TRUE(plan_decode(in, &want).ok());
    EXPECT_EQ(got.num_splits, want.num_splits);
    EXPECT_EQ(got.pages_per_split, want.pages_per_split);
    EXPECT_EQ(got.work_items, want.work_items);
    EXPECT_EQ(got.wave_fill, want.wave_fill);
    EXPECT_EQ(got.workspace_bytes, want.workspace_bytes);
  }

  // Without a GPU the fallback's threads take an item whole, unlike num_workers = threads (CTAs of
  // 16 rows): with threads - 1 kv heads of 32 rows each (q_len 8 × GQA 4) the CPU plan splits,
  // the CUDA-style one sees the machine full.
  if (!cuda_available() && threads >= 2) {
    const int32_t kv = threads - 1;
    const int32_t len = 32768;
    fs_decode_plan cpu{}, cuda_rows{};
    ASSERT_EQ(fs_decode_plan_create(1, &len, 8, 4 * kv, kv, 128, 16, 0, 0, 64, 0, 0, &cpu), FS_OK) << fs_last_error();
    ASSERT_EQ(fs_decode_plan_create(1, &len, 8, 4 * kv, kv, 128, 16, threads, 0, 64, 0, 0, &cuda_rows), FS_OK);
    EXPECT_GT(cpu.num_splits, 1);
    EXPECT_EQ(cuda_rows.num_splits, 1);
  }
  // num_workers > 0: that many workers of the kernel's rows ({16, 1, num_workers}), the plans the
  // frozen planner made for num_workers with its default of 16 rows.
  for (int32_t workers : {1, 7, 132, 264}) {
    for (const Case& c : cases) {
      if (c.graph) continue;  // the frozen planner has no graph policy
      fs_decode_plan got{};
      ASSERT_EQ(fs_decode_plan_create(static_cast<int32_t>(c.lens.size()), c.lens.data(), c.q_len, c.heads,
                                      c.kv_heads, c.head_dim, c.block_size, workers, 0, c.max_splits, 0, 0, &got),
                FS_OK)
          << fs_last_error();
      OldInput old;
      old.batch = static_cast<int32_t>(c.lens.size());
      old.seq_lens = c.lens.data();
      old.q_len = c.q_len;
      old.num_heads = c.heads;
      old.num_kv_heads = c.kv_heads;
      old.head_dim = c.head_dim;
      old.block_size = c.block_size;
      old.num_workers = workers;
      old.max_splits = c.max_splits > 0 ? c.max_splits : 64;  // 0: the default, 64 then and now
      const DecodePlan want = old_plan(old);
      EXPECT_EQ(got.num_splits, want.num_splits) << workers << " workers";
      EXPECT_EQ(got.pages_per_split, want.pages_per_split) << workers << " workers";
      EXPECT_EQ(got.work_items, want.work_items) << workers << " workers";
      EXPECT_EQ(got.wave_fill, want.wave_fill) << workers << " workers";
      EXPECT_EQ(got.workspace_bytes, want.workspace_bytes) << workers << " workers";
    }
  }
  fs_decode_plan bad{};
  const int32_t one = 100;
  EXPECT_EQ(fs_decode_plan_create(1, &one, 1, 32, 8, 128, 16, -1, 0, 64, 0, 0, &bad), FS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fs_last_error()).find("num_workers"), std::string::npos) << fs_last_error();
}

}  // namespace
}  // namespace flashserve
