// CPU varlen prefill against the float64 reference over a grid of odd shapes, plus
// cross-checks between layouts and options.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "attention/prefill.h"
#include "tests/support.h"

namespace flashserve::test {
namespace {

const int kLens[] = {1, 7, 77, 257, 1025};
struct Heads {
  int h, kv;
};
const Heads kHeads[] = {{1, 1}, {8, 2}, {32, 8}, {21, 3}};
const int kHeadDims[] = {64, 128, 80};
const DType kDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
const int kBlockSizes[] = {0, 1, 16, 64, 256};  // 0: packed

Outputs run_prefill(const Problem& p, ProblemData& d) {
  Outputs out = make_outputs(p);
  PrefillParams pp = prefill_params(p, d, out);
  const Status st = prefill(pp);
  EXPECT_TRUE(st.ok()) << st.to_string() << "\n  case: " << p.describe();
  return out;
}

void check_against_reference(const Problem& p) {
  ProblemData d = make_data(p);
  Outputs out = run_prefill(p, d);
  const Reference ref = reference(p, d);
  const std::string err = compare(p, out, ref, tolerance_for(p, ref));
  EXPECT_EQ(err, "");
}

// The grid: heads × head_dim × dtype × causal; each case packs a batch of four
// (q_len, k_len) pairs from {1, 7, 77, 257, 1025}², rotating so every pair appears, and a
// layout rotating through packed and pages of 1, 16, 64, 256.
class PrefillGrid : public ::testing::TestWithParam<std::tuple<int, int, int, bool>> {};

TEST_P(PrefillGrid, MatchesFloat64Reference) {
  const auto [hi, di, ti, causal] = GetParam();
  const int index = ((hi * 3 + di) * 3 + ti) * 2 + (causal ? 1 : 0);
  Problem p;
  p.num_heads = kHeads[hi].h;
  p.num_kv_heads = kHeads[hi].kv;
  p.head_dim = kHeadDims[di];
  p.dtype = kDTypes[ti];
  p.causal = causal;
  p.block_size = kBlockSizes[index % 5];
  p.seed = 1000 + index;
  for (int j = 0; j < 4; ++j) {
    const int pair = (index * 4 + j * 7) % 25;
    int q = kLens[pair / 5], k = kLens[pair % 5];
    if (p.block_size > 0 && q > k) std::swap(q, k);  // paged: queries are the sequence's tail
    p.seqs.push_back({q, k});
  }
  check_against_reference(p);
}

INSTANTIATE_TEST_SUITE_P(Grid, PrefillGrid,
                         ::testing::Combine(::testing::Range(0, 4), ::testing::Range(0, 3), ::testing::Range(0, 3),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<int, int, int, bool>>& info) {
                           const Heads heads = kHeads[std::get<0>(info.param)];
                           return "h" + std::to_string(heads.h) + "_kv" + std::to_string(heads.kv) + "_d" +
                                  std::to_string(kHeadDims[std::get<1>(info.param)]) + "_" +
                                  dtype_name(kDTypes[std::get<2>(info.param)]) +
                                  (std::get<3>(info.param) ? "_causal" : "_full");
                         });

// Every (q_len, k_len) pair once, GQA 8/2, bf16, causal: includes q_len > k_len, where the
// first rows of a causal (bottom-right) mask see no key.
TEST(PrefillCpu, AllLengthPairsCausal) {
  for (int q : kLens)
    for (int k : kLens) {
      Problem p;
      p.num_heads = 8;
      p.num_kv_heads = 2;
      p.head_dim = 64;
      p.dtype = DType::kBFloat16;
      p.causal = true;
      p.seed = 7 + q * 31 + k;
      p.seqs = {{q, k}};
      check_against_reference(p);
    }
}

struct OptionCase {
  const char* name;
  bool causal;
  int window_left, window_right;
  bool alibi;
  float softcap;
};

class PrefillOptions : public ::testing::TestWithParam<OptionCase> {};

TEST_P(PrefillOptions, MatchReferencePackedAndPaged) {
  const OptionCase& c = GetParam();
  int seed = 77;
  for (DType t : kDTypes) {
    for (int bs : {0, 16}) {
      Problem p;
      p.num_heads = 21;
      p.num_kv_heads = 3;
      p.head_dim = 80;
      p.dtype = t;
      p.causal = c.causal;
      p.window_left = c.window_left;
      p.window_right = c.window_right;
      p.alibi = c.alibi;
      p.softcap = c.softcap;
      p.block_size = bs;
      p.seed = seed++;
      p.seqs = {{77, 257}, {1, 7}, {7, 7}, {130, 300}, {64, 64}};
      check_against_reference(p);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Options, PrefillOptions,
    ::testing::Values(OptionCase{"window_left", false, 32, -1, false, 0}, OptionCase{"window_both", false, 17, 9, false, 0},
                      OptionCase{"causal_window", true, 40, -1, false, 0}, OptionCase{"causal_window0", true, 0, -1, false, 0},
                      OptionCase{"alibi", false, -1, -1, true, 0}, OptionCase{"causal_alibi", true, -1, -1, true, 0},
                      OptionCase{"softcap", false, -1, -1, false, 5.f}, OptionCase{"causal_softcap", true, -1, -1, false, 30.f},
                      OptionCase{"everything", true, 50, -1, true, 20.f}),
    [](const ::testing::TestParamInfo<OptionCase>& info) { return std::string(info.param.name); });

// Paged at any block size computes exactly what packed computes: same keys, same order.
TEST(PrefillCpu, PagedEqualsPackedBitwise) {
  for (int bs : {1, 16, 64, 256}) {
    Problem p;
    p.num_heads = 8;
    p.num_kv_heads = 2;
    p.head_dim = 128;
    p.dtype = DType::kFloat16;
    p.causal = true;
    p.seed = 4242;  // same data for both layouts
    p.seqs = {{77, 1025}, {1, 257}, {257, 257}, {7, 16}};
    ProblemData dp = make_data(p);
    Outputs packed = run_prefill(p, dp);
    p.block_size = bs;
    ProblemData dq = make_data(p);
    Outputs paged = run_prefill(p, dq);
    EXPECT_EQ(compare_outputs(p, packed, paged, 0.0), "") << "block_size " << bs;
  }
}

// Fully masked rows are defined: o = 0 and lse = -inf (window that excludes every key).
TEST(PrefillCpu, FullyMaskedRowsAreZeroWithMinusInfLse) {
  Problem p;
  p.num_heads = 4;
  p.num_kv_heads = 4;
  p.head_dim = 64;
  p.causal = true;
  p.seqs = {{9, 3}, {5, 0}};  // causal with q > k: six rows see nothing; k_len 0: all five
  ProblemData d = make_data(p);
  Outputs out = run_prefill(p, d);
  const Reference ref = reference(p, d);
  EXPECT_EQ(compare(p, out, ref, tolerance_for(p, ref)), "");
  for (int h = 0; h < 4; ++h) {
    EXPECT_EQ(out.lse[0 * 4 + h], -INFINITY);
    EXPECT_EQ(out.lse[10 * 4 + h], -INFINITY);
  }
}

// Very large logits (q scaled 40×: |q·k|/sqrt(d) in the hundreds) and very small ones (1e-4:
// nearly uniform weights) stay finite and accurate.
TEST(PrefillCpu, LargeAndSmallLogits) {
  for (float scale : {40.f, 1e-4f}) {
    for (DType t : kDTypes) {
      Problem p;
      p.num_heads = 8;
      p.num_kv_heads = 2;
      p.head_dim = 128;
      p.dtype = t;
      p.causal = true;
      p.logit_scale = scale;
      p.seed = 99;
      p.seqs = {{77, 257}, {1, 1025}};
      check_against_reference(p);
    }
  }
}

// A larger GQA group than any grid case (MQA: 32 query heads on one kv head).
TEST(PrefillCpu, MultiQueryAttention) {
  Problem p;
  p.num_heads = 32;
  p.num_kv_heads = 1;
  p.head_dim = 64;
  p.dtype = DType::kBFloat16;
  p.causal = true;
  p.block_size = 16;
  p.seqs = {{33, 100}, {7, 7}};
  check_against_reference(p);
}

// Odd head dims beyond the usual ones run on the CPU path.
TEST(PrefillCpu, UnusualHeadDims) {
  for (int dim : {1, 3, 96, 256}) {
    Problem p;
    p.num_heads = 4;
    p.num_kv_heads = 2;
    p.head_dim = dim;
    p.dtype = DType::kFloat32;
    p.seed = 5 + dim;
    p.seqs = {{7, 77}, {77, 77}};
    check_against_reference(p);
  }
}

}  // namespace
}  // namespace flashserve::test
