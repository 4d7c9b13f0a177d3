// CPU split-K decode against the float64 reference, and cross-checks: N splits = 1 split =
// prefill with the same queries; empty splits; plans from the planner.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attention/prefill.h"
#include "decode/decode.h"
#include "decode/planner.h"
#include "tests/support.h"

namespace flashserve::test {
namespace {

// Runs decode with a given split count and chunk (0, 0: let decode plan).
Outputs run_decode(const Problem& p, ProblemData& d, int32_t num_splits, int32_t pages_per_split) {
  Outputs out = make_outputs(p);
  DecodeParams dp = decode_params(p, d, out);
  std::vector<float> workspace;
  dp.num_splits = num_splits;
  dp.pages_per_split = pages_per_split;
  if (num_splits > 1) {
    dp.workspace_bytes = decode_workspace_bytes(num_splits, dp.batch, dp.q_len, dp.num_heads, dp.head_dim);
    workspace.assign(static_cast<size_t>(dp.workspace_bytes / 4), std::numeric_limits<float>::quiet_NaN());
    dp.workspace = workspace.data();
  }
  const Status st = decode(dp);
  EXPECT_TRUE(st.ok()) << st.to_string() << "\n  case: " << p.describe();
  return out;
}



struct DecodeCase {
  int h, kv, dim, q_len, bs;
  DType dtype;
};

class DecodeGrid : public ::testing::TestWithParam<DecodeCase> {};

// Mixed lengths in one batch (page boundaries 15, 16, 17 included) with forced splits of 1, 3
// and the planner's choice, each against the reference.
TEST_P(DecodeGrid, MatchesReferenceForAnySplit) {
  const DecodeCase& c = GetParam();
  Problem p = decode_problem({8, 15, 16, 17, 77, 257, 1025}, c.q_len, c.h, c.kv, c.dim, c.dtype, c.bs,
                             c.h * 1000 + c.q_len * 10 + c.bs);
  ProblemData d = make_data(p);
  const Reference ref = reference(p, d);
  const Tolerance tol = tolerance_for(p, ref);
  const int32_t pages = max_pages(p);
  for (int32_t splits : {1, 3, 0}) {
    const int32_t chunk = splits == 0 ? 0 : (pages + splits - 1) / splits;
    Outputs out = run_decode(p, d, splits, chunk);
    EXPECT_EQ(compare(p, out, ref, tol), "") << "num_splits " << splits;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Grid, DecodeGrid,
    ::testing::Values(DecodeCase{32, 8, 128, 1, 16, DType::kBFloat16}, DecodeCase{32, 8, 128, 4, 16, DType::kFloat16},
                      DecodeCase{28, 4, 128, 1, 8, DType::kBFloat16}, DecodeCase{8, 8, 64, 8, 64, DType::kFloat32},
                      DecodeCase{64, 8, 64, 2, 256, DType::kBFloat16}, DecodeCase{21, 3, 80, 3, 1, DType::kFloat32},
                      DecodeCase{1, 1, 64, 1, 32, DType::kFloat16}, DecodeCase{16, 1, 128, 5, 128, DType::kBFloat16}),
    [](const ::testing::TestParamInfo<DecodeCase>& info) {
      const DecodeCase& c = info.param;
      return "h" + std::to_string(c.h) + "_kv" + std::to_string(c.kv) + "_d" + std::to_string(c.dim) + "_q" +
             std::to_string(c.q_len) + "_page" + std::to_string(c.bs) + "_" + dtype_name(c.dtype);
    });

// Sliding window, ALiBi and softcap in decode, against the reference.
TEST(DecodeCpu, MaskOptions) {
  for (int variant = 0; variant < 3; ++variant) {
    Problem p = decode_problem({3, 77, 300, 1025}, 3, 16, 4, 64, DType::kBFloat16, 16, 500 + variant);
    if (variant == 0) p.window_left = 100;
    if (variant == 1) p.alibi = true;
    if (variant == 2) p.softcap = 10.f;
    ProblemData d = make_data(p);
    const Reference ref = reference(p, d);
    Outputs out = run_decode(p, d, 4, (max_pages(p) + 3) / 4);
    EXPECT_EQ(compare(p, out, ref, tolerance_for(p, ref)), "");
  }
}

// N splits equal one split (up to the rounding of the merge) for every N, empty splits
// included (more splits than pages).
TEST(DecodeCpu, SplitsAgreeWithOneSplit) {
  Problem p = decode_problem({3, 40, 100}, 1, 8, 2, 128, DType::kFloat32, 8, 31);
  ProblemData d = make_data(p);
  Outputs one = run_decode(p, d, 1, max_pages(p));
  for (int32_t splits : {2, 5, 13, 40}) {
    const int32_t chunk = std::max(1, (max_pages(p) + splits - 1) / splits);
    Outputs many = run_decode(p, d, splits, chunk);
    EXPECT_EQ(compare_outputs(p, one, many, 8.0), "") << splits << " splits";
  }
  // 40 splits of one page over sequences of at most 13 pages: most splits are empty.
}

// Decode equals paged prefill over the same queries and cache.
TEST(DecodeCpu, EqualsPrefillWithSameQueries) {
  for (int q_len : {1, 4, 8}) {
    Problem p = decode_problem({9, 64, 513}, q_len, 32, 8, 128, DType::kBFloat16, 16, 77 + q_len);
    ProblemData d = make_data(p);
    Outputs dec = run_decode(p, d, 3, (max_pages(p) + 2) / 3);
    Outputs pre = make_outputs(p);
    PrefillParams pp = prefill_params(p, d, pre);
    ASSERT_TRUE(prefill(pp).ok());
    EXPECT_EQ(compare_outputs(p, pre, dec, 1.0), "") << "q_len " << q_len;
  }
}

// The project's one pool [blocks, 2, Hkv, bs, D] and K and V pools apart hold the same keys at
// different addresses: the same outputs, bit for bit, and both match the reference.
TEST(DecodeCpu, OnePoolEqualsSeparatePools) {
  const Problem p = decode_problem({5, 16, 33, 700}, 2, 28, 4, 128, DType::kBFloat16, 16, 515);
  Problem q = p;
  q.separate_pools = true;
  ProblemData d = make_data(p), apart = make_data(q);
  ASSERT_NE(d.v_offset, apart.v_offset);
  const Reference ref = reference(p, d);
  for (int32_t splits : {1, 4}) {
    const int32_t chunk = (max_pages(p) + splits - 1) / splits;
    Outputs one = run_decode(p, d, splits, chunk), two = run_decode(q, apart, splits, chunk);
    EXPECT_EQ(compare(p, one, ref, tolerance_for(p, ref)), "") << splits << " splits";
    EXPECT_EQ(compare_outputs(p, one, two, 0.0), "") << splits << " splits";
  }
}

// A sequence at the maximum context the tests afford, split by the planner.
TEST(DecodeCpu, LongContext) {
  Problem p = decode_problem({32769}, 1, 32, 8, 128, DType::kBFloat16, 16, 32769);
  ProblemData d = make_data(p);
  const Reference ref = reference(p, d);
  Outputs out = run_decode(p, d, 0, 0);
  EXPECT_EQ(compare(p, out, ref, tolerance_for(p, ref)), "");
}

}  // namespace
}  // namespace flashserve::test
