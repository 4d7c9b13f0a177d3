// CPU decode and paged prefill over FP8 pages (issue 25):
//   (a) the kernel's exactness: against float64 attention over the dequantized values
//       (scale·fp8(code)), with the bf16 tolerance of tests/support.h;
//   (b) what quantization costs: against float64 over the original (bf16) values, the error
//       printed per format and bounded;
//   (c) scale folding (K's scale in the softmax scale, V's on the output) against the same
//       kernel over explicitly dequantized fp32 pages;
//   (d) bad input: a clear status and nothing written.
// The pages are written by KVStorage::append (the engine's path: bf16 K/V quantized with
// per-kv-head scales) over a pool whose free slots hold the format's NaN code. Fixed seeds,
// odd shapes (block sizes 1..64, 1, 3, 5 kv heads, head_dim 40..128), N(0,1) data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attention/merge.h"
#include "attention/prefill.h"
#include "decode/decode.h"
#include "kvcache/kv_storage.h"
#include "tests/fp8_support.h"
#include "tests/support.h"

namespace flashserve::test {
namespace {

enum class Kind { kDecode, kPrefill };

// Runs the kernel with the given pages (decode with num_splits, 0 = planned by decode itself).
Status run(Kind kind, const Problem& p, ProblemData& d, const KVPageView& pages, Outputs& out, int32_t num_splits = 0) {
  if (kind == Kind::kPrefill) {
    PrefillParams pp = prefill_params(p, d, out);
    pp.pages = pages;
    return prefill(pp);
  }
  DecodeParams dp = decode_params(p, d, out);
  dp.pages = pages;
  std::vector<float> workspace;
  if (num_splits > 0) {
    dp.num_splits = num_splits;
    dp.pages_per_split = (max_pages(p) + num_splits - 1) / num_splits;
    dp.workspace_bytes = decode_workspace_bytes(num_splits, dp.batch, dp.q_len, dp.num_heads, dp.head_dim);
    workspace.assign(static_cast<size_t>(dp.workspace_bytes / 4) + 1, std::numeric_limits<float>::quiet_NaN());
    dp.workspace = workspace.data();
  }
  return decode(dp);
}

struct Case {
  Kind kind;
  Problem p;
};

std::vector<Case> cases(DType q_dtype) {
  std::vector<Case> v;
  uint64_t seed = 250;
  auto dec = [&](std::vector<int> lens, int q_len, int H, int Hk, int D, int bs) {
    v.push_back({Kind::kDecode, decode_problem(lens, q_len, H, Hk, D, q_dtype, bs, seed++)});
  };
  dec({1, 7, 77, 257}, 1, 12, 3, 64, 16);  // GQA 4, three kv heads
  dec({5, 33, 100}, 3, 8, 8, 40, 1);       // block size 1, speculative q_len 3
  dec({300, 2}, 1, 8, 1, 128, 7);          // MQA, block size 7
  dec({129}, 2, 5, 5, 96, 64);             // five heads
  auto pre = [&](std::vector<SeqSpec> seqs, int H, int Hk, int D, int bs, bool causal) {
    Problem p;
    p.seqs = std::move(seqs);
    p.num_heads = H;
    p.num_kv_heads = Hk;
    p.head_dim = D;
    p.dtype = q_dtype;
    p.block_size = bs;
    p.causal = causal;
    p.seed = seed++;
    v.push_back({Kind::kPrefill, p});
    return &v.back().p;
  };
  pre({{7, 77}, {1, 1}, {33, 40}}, 12, 3, 64, 16, true);  // chunks over a cached prefix
  pre({{77, 257}}, 6, 3, 40, 5, false);
  Problem* masked = pre({{20, 50}, {3, 9}}, 4, 1, 128, 1, true);
  masked->window_left = 17;
  masked->alibi = true;
  masked->softcap = 30.f;
  return v;
}

std::string name(const Case& c, DType t) {
  return std::string(c.kind == Kind::kDecode ? "decode" : "prefill") + " " + dtype_name(t) + " pages, " + c.p.describe();
}

// (a) Exactness of the kernel itself: float64 over what the pages hold, the bf16 tolerance.
// Scales vary per head (factors 0.5..3.5: one head's tail saturates).
TEST(Fp8Attention, MatchesFloat64OverTheDequantizedValues) {
  for (DType t : {DType::kFp8E4M3, DType::kFp8E5M2}) {
    for (const Case& c : cases(DType::kBFloat16)) {
      SCOPED_TRACE(name(c, t));
      ProblemData d = make_data(c.p);
      Fp8Cache cache = make_fp8_cache(c.p, d, t, [](int h) { return 0.5f + (h % 4); });
      const Reference ref = reference(c.p, cache.dequantized);
      const Tolerance tol = tolerance_for(c.p, ref);
      for (int32_t splits : c.kind == Kind::kDecode ? std::vector<int32_t>{0, 1, 3} : std::vector<int32_t>{0}) {
        Outputs out = make_outputs(c.p);
        const Status st = run(c.kind, c.p, d, view_of(cache.storage, d), out, splits);
        ASSERT_TRUE(st.ok()) << st.to_string();
        const std::string err = compare(c.p, out, ref, tol);
        EXPECT_EQ(err, "") << "splits " << splits;
      }
    }
  }
}

// (b) What quantization costs: the same kernel against float64 over the original values, with
// calibrated scales (amax / max). Worst |o - o_ref| and its RMS over |o_ref|'s RMS, per format.
// Bounds: each K/V element moves by at most half an FP8 step, 2^-4 (e4m3) or 2^-3 (e5m2)
// relative. A row dominated by one key outputs that key's V, off by up to 2^-4·max|v| (about
// 4.5 here: 0.28) in e4m3, twice that in e5m2; averaging over keys shrinks the RMS. K's error
// moves the logits, hence lse, by about the same relative amount. Measured (the print, seeds
// 250..256): e4m3 worst 0.156, RMS ratio 0.033, lse 0.060; e5m2 0.343, 0.067, 0.114. Bounds:
// the worst-case estimate for o (0.3, 0.6), about 1.5× the measured RMS and lse.
TEST(Fp8Attention, QuantizationErrorPerFormat) {
  for (DType t : {DType::kFp8E4M3, DType::kFp8E5M2}) {
    double worst = 0, worst_lse = 0, err2 = 0, ref2 = 0;
    for (const Case& c : cases(DType::kBFloat16)) {
      ProblemData d = make_data(c.p);
      Fp8Cache cache = make_fp8_cache(c.p, d, t, [](int) { return 1.f; });
      const Reference ref = reference(c.p, d);  // the original values
      Outputs out = make_outputs(c.p);
      ASSERT_TRUE(run(c.kind, c.p, d, view_of(cache.storage, d), out).ok()) << name(c, t);
      const int64_t rows = c.p.total_q() * c.p.num_heads, D = c.p.head_dim;
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_FALSE(std::isnan(out.lse[r])) << name(c, t);
        worst_lse = std::max(worst_lse, std::fabs(out.lse[r] - ref.lse[r]));
        for (int64_t x = 0; x < D; ++x) {
          const double o = load_as_float(out.o.data(), c.p.dtype, r * D + x), e = o - ref.o[r * D + x];
          ASSERT_FALSE(std::isnan(o)) << name(c, t);
          worst = std::max(worst, std::fabs(e));
          err2 += e * e;
          ref2 += ref.o[r * D + x] * ref.o[r * D + x];
        }
      }
    }
    const double rms_ratio = std::sqrt(err2 / ref2);
    std::printf("[ fp8 cost ] %s: max |o - o_ref| %.4f, rms(o - o_ref) / rms(o_ref) %.4f, max |lse - lse_ref| %.4f "
                "(calibrated scales, bf16 q/o, %zu problems)\n",
                dtype_name(t), worst, rms_ratio, worst_lse, cases(DType::kBFloat16).size());
    const double k = t == DType::kFp8E4M3 ? 1.0 : 2.0;  // e5m2 has one mantissa bit less
    EXPECT_LT(worst, 0.3 * k) << dtype_name(t);
    EXPECT_LT(rms_ratio, 0.05 * k) << dtype_name(t);
    EXPECT_LT(worst_lse, 0.09 * k) << dtype_name(t);
    EXPECT_GT(worst, 0.0) << "the FP8 pages must differ from the bf16 values";
  }
}

// (c) Folding the scales into the softmax scale and the output equals attention over pages
// that hold the dequantized values in fp32 (same kernel, fp32 q/o): only fp32 rounding apart.
TEST(Fp8Attention, ScaleFoldingEqualsExplicitDequantization) {
  for (DType t : {DType::kFp8E4M3, DType::kFp8E5M2}) {
    for (const Case& c : cases(DType::kFloat32)) {
      SCOPED_TRACE(name(c, t));
      ProblemData d = make_data(c.p);
      Fp8Cache cache = make_fp8_cache(c.p, d, t, [](int h) { return 0.75f + 1.5f * (h % 3); });
      // fp32 pages holding scale·fp8(code), written at the same slots.
      KVStorageShape sh = cache.storage.shape();
      sh.dtype = DType::kFloat32;
      KVStorage explicit_pages;
      ASSERT_TRUE(KVStorage::create(Device::kCPU, sh, &explicit_pages).ok());
      std::vector<int64_t> slots;
      for (size_t b = 0; b < c.p.seqs.size(); ++b)
        for (int64_t j = 0; j < c.p.seqs[b].k_len; ++j)
          slots.push_back(int64_t{d.block_table[b * d.table_stride + j / c.p.block_size]} * c.p.block_size +
                          j % c.p.block_size);
      ASSERT_TRUE(explicit_pages
                      .append(0, 1, cache.dequantized.k.data(), cache.dequantized.v.data(), slots.data(),
                              static_cast<int64_t>(slots.size()))
                      .ok());
      Outputs folded = make_outputs(c.p), dequantized = make_outputs(c.p);
      ASSERT_TRUE(run(c.kind, c.p, d, view_of(cache.storage, d), folded).ok());
      ASSERT_TRUE(run(c.kind, c.p, d, view_of(explicit_pages, d), dequantized).ok());
      EXPECT_EQ(compare_outputs(c.p, folded, dequantized, 64), "");
    }
  }
}

// ---- (d) bad input ---------------------------------------------------------------------------

struct BadInputFixture {
  Case c;
  ProblemData d;
  Fp8Cache cache;
  Outputs out;
  std::vector<char> o_before;
  std::vector<float> lse_before;

  BadInputFixture(Kind kind, DType t) : c(cases(DType::kBFloat16)[kind == Kind::kDecode ? 0 : 4]) {
    d = make_data(c.p);
    cache = make_fp8_cache(c.p, d, t, [](int) { return 1.f; });
    out = make_outputs(c.p);
    const auto* o = static_cast<const char*>(out.o.data());
    o_before.assign(o, o + out.o.storage.size() * sizeof(double));
    lse_before = out.lse;
  }
  bool untouched() const {
    return std::memcmp(out.o.data(), o_before.data(), o_before.size()) == 0 &&
           std::memcmp(out.lse.data(), lse_before.data(), lse_before.size() * 4) == 0;
  }
  Status run_with(const KVPageView& pages, DType call_dtype = DType::kBFloat16, Device device = Device::kCPU) {
    if (c.kind == Kind::kPrefill) {
      PrefillParams pp = prefill_params(c.p, d, out);
      pp.pages = pages;
      pp.dtype = call_dtype;
      pp.device = device;
      return prefill(pp);
    }
    DecodeParams dp = decode_params(c.p, d, out);
    dp.pages = pages;
    dp.dtype = call_dtype;
    dp.device = device;
    if (device == Device::kCUDA) {
      dp.num_splits = 1;
      dp.pages_per_split = max_pages(c.p);
    }
    return decode(dp);
  }
};

TEST(Fp8AttentionBadInput, BadScalesAreRefusedAndNothingIsWritten) {
  for (Kind kind : {Kind::kDecode, Kind::kPrefill}) {
    for (DType t : {DType::kFp8E4M3, DType::kFp8E5M2}) {
      BadInputFixture f(kind, t);
      const KVPageView good = view_of(f.cache.storage, f.d);
      const int32_t Hk = f.c.p.num_kv_heads;
      for (float bad : {0.f, -1.f, std::numeric_limits<float>::quiet_NaN(), INFINITY, -0.f}) {
        for (int which = 0; which < 2; ++which) {
          std::vector<float> scales(good.k_scales, good.k_scales + Hk);
          scales[Hk - 1] = bad;
          KVPageView pages = good;
          (which == 0 ? pages.k_scales : pages.v_scales) = scales.data();
          const Status st = f.run_with(pages);
          EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
          EXPECT_NE(st.message().find(which == 0 ? "k_scales[" : "v_scales["), std::string::npos) << st.message();
          EXPECT_TRUE(f.untouched()) << st.message();
        }
      }
      KVPageView no_scales = good;
      no_scales.v_scales = nullptr;
      const Status st = f.run_with(no_scales);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(st.message().find("need k_scales and v_scales"), std::string::npos) << st.message();
      EXPECT_TRUE(f.untouched());
      ASSERT_TRUE(f.run_with(good).ok());  // and the good view runs
      EXPECT_FALSE(f.untouched());
    }
  }
}

TEST(Fp8AttentionBadInput, DtypeMismatchesAreRefusedAndNothingIsWritten) {
  for (Kind kind : {Kind::kDecode, Kind::kPrefill}) {
    BadInputFixture f(kind, DType::kFp8E4M3);
    const KVPageView fp8 = view_of(f.cache.storage, f.d);
    // FP8 is not a type for q and o.
    for (DType t : {DType::kFp8E4M3, DType::kFp8E5M2}) {
      const Status st = f.run_with(fp8, t);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(st.message().find("is a KV-page type"), std::string::npos) << st.message();
      EXPECT_TRUE(f.untouched());
    }
    // bf16 pages under an fp16 call, or under an fp32 call on CUDA: the pool and the call
    // disagree (the CPU widens 16-bit pages under an fp32 call: the CPU model's bf16 cache).
    KVPageView bf16 = fp8;
    bf16.dtype = DType::kBFloat16;
    bf16.k_scales = bf16.v_scales = nullptr;
    for (auto [call, device] : {std::pair{DType::kFloat32, Device::kCUDA}, std::pair{DType::kFloat16, Device::kCPU}}) {
      const Status st = f.run_with(bf16, call, device);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(st.message().find(std::string("the pages hold bf16 but the call's dtype is ") + dtype_name(call)),
                std::string::npos)
          << st.message();
      EXPECT_TRUE(f.untouched());
    }
    KVPageView invalid = fp8;
    invalid.dtype = static_cast<DType>(9);
    EXPECT_EQ(f.run_with(invalid).code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(f.untouched());
  }
}

TEST(Fp8AttentionBadInput, MergeRefusesFp8States) {
  std::vector<float> o(2 * 3 * 8, 1.f), lse(2 * 3, 0.f), o_out(3 * 8, -7.f);
  MergeParams m;
  m.num_states = 2;
  m.num_rows = 3;
  m.head_dim = 8;
  m.o_in = o.data();
  m.lse_in = lse.data();
  m.o_in_state_stride = 3 * 8;
  m.o_in_row_stride = 8;
  m.lse_in_state_stride = 3;
  m.lse_in_row_stride = 1;
  m.o_out = o_out.data();
  m.o_out_row_stride = 8;
  m.lse_out_row_stride = 1;
  m.in_dtype = DType::kFp8E4M3;
  EXPECT_EQ(merge_states(m).code(), StatusCode::kInvalidArgument);
  m.in_dtype = DType::kFloat32;
  m.out_dtype = DType::kFp8E5M2;
  EXPECT_EQ(merge_states(m).code(), StatusCode::kInvalidArgument);
  for (float x : o_out) EXPECT_EQ(x, -7.f);
  EXPECT_EQ(merge_state_pair(Device::kCPU, DType::kFp8E4M3, 3, 8, o.data(), lse.data(), o.data(), lse.data(),
                             o_out.data(), nullptr)
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flashserve::test
