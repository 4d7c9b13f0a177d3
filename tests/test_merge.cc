// merge_states and merge_state_pair: attention over two halves of the keys merged equals
// attention over all of them; an N-way merge equals chained pair merges; empty states.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "attention/merge.h"
#include "attention/prefill.h"
#include "tests/support.h"

namespace flashserve::test {
namespace {

// Runs packed prefill of one sequence's queries over keys [k_lo, k_hi) of problem `whole`.
Outputs attend_part(const Problem& whole, const ProblemData& d, int k_lo, int k_hi, Problem* part_out) {
  Problem part = whole;
  part.seqs = {{whole.seqs[0].q_len, k_hi - k_lo}};
  ProblemData pd = d;
  const int64_t row = int64_t{whole.num_kv_heads} * whole.head_dim;
  pd.k.assign(d.k.begin() + k_lo * row, d.k.begin() + k_hi * row);
  pd.v.assign(d.v.begin() + k_lo * row, d.v.begin() + k_hi * row);
  pd.k_buf.resize(std::max<int64_t>(1, pd.k.size()) * dtype_size(whole.dtype));
  pd.v_buf.resize(std::max<int64_t>(1, pd.v.size()) * dtype_size(whole.dtype));
  for (size_t i = 0; i < pd.k.size(); ++i) {
    store_from_float(pd.k_buf.data(), whole.dtype, i, pd.k[i]);
    store_from_float(pd.v_buf.data(), whole.dtype, i, pd.v[i]);
  }
  pd.cu_seqlens_k = {0, k_hi - k_lo};
  Outputs out = make_outputs(part);
  PrefillParams pp = prefill_params(part, pd, out);
  const Status st = prefill(pp);
  EXPECT_TRUE(st.ok()) << st.to_string();
  *part_out = part;
  return out;
}

Problem whole_problem(DType t) {
  Problem p;
  p.num_heads = 8;
  p.num_kv_heads = 2;
  p.head_dim = 64;
  p.dtype = t;
  p.seed = 123;
  p.seqs = {{13, 300}};
  return p;
}

TEST(Merge, TwoHalvesEqualWhole) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    Problem p = whole_problem(t);
    ProblemData d = make_data(p);
    Problem pa, pb;
    Outputs a = attend_part(p, d, 0, 111, &pa);
    Outputs b = attend_part(p, d, 111, 300, &pb);
    Outputs merged = make_outputs(p);
    const int64_t rows = p.total_q() * p.num_heads;
    ASSERT_TRUE(merge_state_pair(Device::kCPU, t, rows, p.head_dim, a.o.data(), a.lse.data(), b.o.data(),
                                 b.lse.data(), merged.o.data(), merged.lse.data())
                    .ok());
    const Reference ref = reference(p, d);
    // The halves were rounded to the storage type before the merge, each to its own magnitude,
    // which can exceed the merged value's (cancellation): add one ulp of the largest half.
    Tolerance tol = tolerance_for(p, ref);
    double max_half = 0;
    for (int64_t i = 0; i < rows * p.head_dim; ++i)
      max_half = std::max({max_half, std::fabs(double(load_as_float(a.o.data(), t, i))),
                           std::fabs(double(load_as_float(b.o.data(), t, i)))});
    if (t != DType::kFloat32) tol.o_abs += max_half * (t == DType::kFloat16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7));
    EXPECT_EQ(compare(p, merged, ref, tol), "");
  }
}

TEST(Merge, NWayEqualsChainedPairsAndInPlace) {
  Problem p = whole_problem(DType::kFloat32);
  ProblemData d = make_data(p);
  const int cuts[] = {0, 50, 51, 200, 300};  // a one-key part too
  std::vector<Outputs> parts;
  Problem part;
  for (int i = 0; i < 4; ++i) parts.push_back(attend_part(p, d, cuts[i], cuts[i + 1], &part));
  const int64_t rows = p.total_q() * p.num_heads, D = p.head_dim;

  // Stack the parts: [4, rows, D] and [4, rows].
  std::vector<float> o_in(4 * rows * D), lse_in(4 * rows);
  for (int s = 0; s < 4; ++s) {
    std::copy_n(static_cast<const float*>(parts[s].o.data()), rows * D, &o_in[s * rows * D]);
    std::copy_n(parts[s].lse.data(), rows, &lse_in[s * rows]);
  }
  Outputs nway = make_outputs(p);
  MergeParams m;
  m.num_states = 4;
  m.num_rows = rows;
  m.head_dim = static_cast<int32_t>(D);
  m.o_in = o_in.data();
  m.o_in_state_stride = rows * D;
  m.o_in_row_stride = D;
  m.lse_in = lse_in.data();
  m.lse_in_state_stride = rows;
  m.lse_in_row_stride = 1;
  m.o_out = nway.o.data();
  m.o_out_row_stride = D;
  m.lse_out = nway.lse.data();
  ASSERT_TRUE(merge_states(m).ok());

  // Chained, in place into part 0.
  for (int s = 1; s < 4; ++s)
    ASSERT_TRUE(merge_state_pair(Device::kCPU, DType::kFloat32, rows, D, parts[0].o.data(), parts[0].lse.data(),
                                 parts[s].o.data(), parts[s].lse.data(), parts[0].o.data(), parts[0].lse.data())
                    .ok());
  EXPECT_EQ(compare_outputs(p, nway, parts[0], 64.0), "");
  const Reference ref = reference(p, d);
  EXPECT_EQ(compare(p, nway, ref, tolerance_for(p, ref)), "");
}

// Empty states (lse = -inf, o garbage) contribute nothing; all-empty rows give o = 0,
// lse = -inf; one real state passes through unchanged.
TEST(Merge, EmptyStates) {
  const int D = 16;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> o_a(D), o_b(D, nan), out(D, nan);
  std::mt19937 rng(5);
  for (auto& x : o_a) x = std::uniform_real_distribution<float>(-1, 1)(rng);
  float lse_a = 3.25f, lse_b = -INFINITY, lse_out = nan;
  ASSERT_TRUE(merge_state_pair(Device::kCPU, DType::kFloat32, 1, D, o_a.data(), &lse_a, o_b.data(), &lse_b,
                               out.data(), &lse_out).ok());
  EXPECT_EQ(lse_out, 3.25f);
  for (int i = 0; i < D; ++i) EXPECT_EQ(out[i], o_a[i]);

  float lse_c = -INFINITY;
  std::vector<float> o_c(D, nan);
  ASSERT_TRUE(merge_state_pair(Device::kCPU, DType::kFloat32, 1, D, o_c.data(), &lse_c, o_b.data(), &lse_b,
                               out.data(), &lse_out).ok());
  EXPECT_EQ(lse_out, -INFINITY);
  for (int i = 0; i < D; ++i) EXPECT_EQ(out[i], 0.f);
}

// Very different magnitudes: lse 1000 apart must not overflow; the small state vanishes.
TEST(Merge, ExtremeLse) {
  const int D = 8;
  std::vector<float> o_a(D, 1.f), o_b(D, -1.f), out(D);
  float lse_a = 1000.f, lse_b = 0.f, lse_out;
  ASSERT_TRUE(merge_state_pair(Device::kCPU, DType::kFloat32, 1, D, o_a.data(), &lse_a, o_b.data(), &lse_b,
                               out.data(), &lse_out).ok());
  EXPECT_FLOAT_EQ(lse_out, 1000.f);
  for (float x : out) EXPECT_FLOAT_EQ(x, 1.f);
  lse_a = 2.f;
  lse_b = 2.f;  // equal weights: the mean, lse + ln 2
  ASSERT_TRUE(merge_state_pair(Device::kCPU, DType::kFloat32, 1, D, o_a.data(), &lse_a, o_b.data(), &lse_b,
                               out.data(), &lse_out).ok());
  EXPECT_NEAR(lse_out, 2.f + std::log(2.f), 1e-6);
  for (float x : out) EXPECT_NEAR(x, 0.f, 1e-7);
}

}  // namespace
}  // namespace flashserve::test
