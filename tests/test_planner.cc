// The split planner is a pure host function: its worked examples, its invariants over random
// batches, and graph mode.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "decode/params.h"
#include "decode/planner.h"

namespace flashserve {
namespace {

DecodePlanInput input(const std::vector<int32_t>& lens, int kv_heads = 8, int workers = 132) {
  DecodePlanInput in;
  in.batch = static_cast<int32_t>(lens.size());
  in.seq_lens = lens.data();
  in.num_heads = kv_heads * 4;
  in.num_kv_heads = kv_heads;
  in.head_dim = 128;
  in.block_size = 16;
  in.num_workers = workers;
  return in;
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

// Query rows beyond rows_per_worker (q_len 8 × GQA 4 = 32: two CUDA row blocks) take two workers
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
  in.rows_per_worker = 0;  // one worker an item (CPU): as q_len 1
  ASSERT_TRUE(plan_decode(in, &plan).ok());
  EXPECT_EQ(plan.num_splits, 4);
  in.rows_per_worker = 16;
  in.q_len = 1;
  ASSERT_TRUE(plan_decode(in, &plan).ok());
  EXPECT_EQ(plan.num_splits, 4);
  // Items whose workers already fill the machine are not split: 32 × 8 × 2 = 512 ≥ 264.
  std::vector<int32_t> many(32, 4096);
  DecodePlanInput q8 = input(many, 8, 264);
  q8.q_len = 8;
  ASSERT_TRUE(plan_decode(q8, &plan).ok());
  EXPECT_EQ(plan.num_splits, 1);
  q8.rows_per_worker = -1;
  EXPECT_EQ(plan_decode(q8, &plan).code(), StatusCode::kInvalidArgument);
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
    ASSERT_LE(plan.num_splits, in.max_splits);
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
  in.num_workers = 0;
  EXPECT_EQ(plan_decode(in, &plan).code(), StatusCode::kInvalidArgument);
  in = input(ten);
  in.block_size = 0;
  EXPECT_EQ(plan_decode(in, &plan).code(), StatusCode::kInvalidArgument);
  in = input(ten);
  in.graph_mode = true;
  EXPECT_EQ(plan_decode(in, &plan).code(), StatusCode::kInvalidArgument);  // no max_seq_len
  EXPECT_EQ(plan_decode(input(ten), nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flashserve
