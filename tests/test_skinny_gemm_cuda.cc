// Skinny GEMMs on CUDA (issue 27; label gpu): c = a · wᵀ for 1..32 rows of a against a float64
// reference over the same bf16 inputs (random N(0,1) a, N(0, 1/k) w, fixed seeds), for every
// epilogue: bf16 outputs in three pieces (a fused QKV), fp32 (logits), the residual add with and
// without the RMSNorm after it (launched: in two launches and in one), SwiGLU, and rotary + the
// K/V append (bit for bit against kStore then rope_append, bf16 and FP8 pools); rows 1, 3, 8, 9,
// 16, 17, 31, 32 (the three instances and their edges), n and k from one sub-slice to the 8B
// model's, splits even and uneven. Outputs and workspace poisoned (NaN) first; NaN never passes.
// Bad shapes and a short workspace: a clear status, nothing written. The split rules (host
// only) run without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kvcache/page_view.h"
#include "server/model/cuda/model_kernels.h"
#include "server/model/cuda/skinny_gemm.h"
#include "tests/cuda_support.h"

namespace flashserve::test {
namespace {

using model::cuda::SkinnyEpilogue;
using model::cuda::SkinnyOutput;

// bf16 values as the device holds them, and their float64 values.
struct Bf16 {
  std::vector<uint16_t> bits;
  std::vector<double> value;
};
Bf16 random_bf16(int64_t count, double stddev, std::mt19937& rng) {
  std::normal_distribution<double> normal(0.0, stddev);
  Bf16 b;
  b.bits.resize(static_cast<size_t>(count));
  b.value.resize(b.bits.size());
  for (size_t i = 0; i < b.bits.size(); ++i) {
    b.bits[i] = float_to_bf16(static_cast<float>(normal(rng)));
    b.value[i] = bf16_to_float(b.bits[i]);
  }
  return b;
}

int device_sms() {
  int device = 0, sms = 0;
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  return sms;
}

// One problem on the device: a [m, lda] (k used), w [n, k], the float64 c = a · wᵀ.
struct Problem {
  int64_t m = 0, n = 0, k = 0, lda = 0;
  Bf16 a, w;
  std::vector<double> c;  // [m, n]
  DeviceBuffer da, dw, ws, counters;
  int64_t ws_bytes = 0;
  // The call's workspace: partials poisoned, counters zeroed once (each call leaves them at zero).
  model::cuda::SkinnyWorkspace workspace() const {
    model::cuda::SkinnyWorkspace w;
    w.partials = ws.get();
    w.bytes = ws_bytes;
    w.counters = counters.as<unsigned>();
    w.counter_count = model::cuda::skinny_gemm_counters(n);
    return w;
  }
};
Problem make_problem(int64_t m, int64_t n, int64_t k, uint64_t seed, int sms) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  Problem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.lda = k + 8 * static_cast<int64_t>(seed % 2);  // odd seeds: a's rows padded (lda > k)
  p.a = random_bf16(m * p.lda, 1.0, rng);
  p.w = random_bf16(n * k, 1.0 / std::sqrt(static_cast<double>(k)), rng);
  p.c.assign(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t x = 0; x < k; ++x) s += p.a.value[i * p.lda + x] * p.w.value[j * k + x];
      p.c[i * n + j] = s;
    }
  p.da = to_device(p.a.bits);
  p.dw = to_device(p.w.bits);
  p.ws_bytes = model::cuda::skinny_gemm_workspace_bytes(m, n, k, sms);
  p.ws.allocate(p.ws_bytes);  // poisoned
  p.counters.allocate(model::cuda::skinny_gemm_counters(n) * 4);
  EXPECT_EQ(cudaMemset(p.counters.get(), 0, model::cuda::skinny_gemm_counters(n) * 4), cudaSuccess);
  return p;
}

// |got - want| within a few units of the output's rounding plus fp32 summation error.
std::string check(const char* what, const std::vector<float>& got, const std::vector<double>& want, double ulp,
                  double scale) {
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double tol = 2 * ulp * std::fabs(want[i]) + 1e-5 * scale;
    if (!(err <= tol)) {  // NaN fails
      if (bad++ == 0) first = static_cast<int64_t>(i);
      worst = std::max(worst, std::isnan(err) ? INFINITY : err);
    }
  }
  if (bad == 0) return "";
  return std::string(what) + ": " + std::to_string(bad) + " of " + std::to_string(got.size()) + " off, first at " +
         std::to_string(first) + " (" + std::to_string(got[first]) + " vs " + std::to_string(want[first]) +
         "), worst " + std::to_string(worst);
}

std::vector<float> download_bf16(const DeviceBuffer& b, int64_t count) {
  std::vector<uint16_t> bits(static_cast<size_t>(count));
  b.download(bits.data(), count * 2);
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = bf16_to_float(bits[i]);
  return out;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

TEST(SkinnyGemmCuda, EveryEpilogueMatchesFloat64) {
  FS_SKIP_WITHOUT_CUDA();
  const int sms = device_sms();
  const double bf16_ulp = std::ldexp(1.0, -8), fp32_ulp = std::ldexp(1.0, -23);
  struct Shape {
    int64_t n, k;
  };
  // One sub-slice; three 64-row blocks less one warp (7 splits of one sub-slice); 17 sub-slices
  // over 16 splits (uneven); 11 splits of 3 sub-slices (an odd count of steps above one); one
  // split over 4 sub-slices (528 blocks fill the wave); the 8B model's QKV (6144 x 4096, 8 splits)
  // and down projection (4096 x 14336, 14 splits). (Splits as on 132 SMs; the device's own count
  // may pick others: the test prints them.)
  // k an odd multiple of 64 (the last sub-slice half): 5 splits of one sub-slice (SmolLM2's 576),
  // and one split of 2.5 sub-slices.
  const Shape shapes[] = {{16, 128},    {176, 896},   {1040, 256},   {1024, 2176}, {4096, 4224},
                          {33792, 512}, {192, 576},   {33792, 320},  {6144, 4096}, {4096, 14336}};
  uint64_t seed = 2700;
  for (const Shape& s : shapes) {
    for (int64_t m : {1, 3, 8, 9, 16, 17, 31, 32}) {
      if (s.n * s.k > (8 << 20) && m != 32 && m != 17 && m != 1) continue;  // the long references: fewer rows
      Problem p = make_problem(m, s.n, s.k, seed++, sms);
      const std::string what = "m " + std::to_string(m) + " n " + std::to_string(s.n) + " k " + std::to_string(s.k) +
                               " splits " + std::to_string(model::cuda::skinny_gemm_splits(s.n, s.k, sms));
      if (m == 1) std::printf("[  NOTE    ] n %lld k %lld: %s\n", static_cast<long long>(s.n), static_cast<long long>(s.k), what.c_str());
      const double scale = max_abs(p.c);
      // Each epilogue fused into the GEMM's launch where it can be (a norm over at most 8 rows,
      // SwiGLU halves of whole 64-column groups), and in launches of its own.
      for (bool launch : {false, true}) {
        const std::string how = what + (launch ? ", launched epilogue" : ", fused epilogue");
        // kFp32.
        {
          DeviceBuffer out(m * s.n * 4);
          SkinnyOutput o;
        o.launch_epilogue = launch;
          o.kind = SkinnyEpilogue::kFp32;
          o.out_fp32 = out.as<float>();
          const Status st = model::cuda::skinny_gemm(p.da.as<__nv_bfloat16>(), p.lda, p.dw.as<__nv_bfloat16>(), m, s.n,
                                                     s.k, o, p.workspace(), sms, nullptr);
          ASSERT_TRUE(st.ok()) << st.to_string() << ", " << how;
          std::vector<float> got(static_cast<size_t>(m * s.n));
          out.download(got.data(), m * s.n * 4);
          EXPECT_EQ(check("fp32", got, p.c, 16 * fp32_ulp, scale), "") << how;
        }
        // kStore in three pieces (q, k, v of a fused projection: n/2, n/4, n/4, rounded to 16).
        {
          const int64_t c0 = s.n / 2 / 16 * 16, c1 = (s.n - c0) / 2 / 16 * 16, c2 = s.n - c0 - c1;
          DeviceBuffer o0(m * c0 * 2), o1(m * c1 * 2), o2(m * c2 * 2);
          SkinnyOutput o;
        o.launch_epilogue = launch;
          o.out[0] = o0.as<__nv_bfloat16>();
          o.out[1] = o1.as<__nv_bfloat16>();
          o.out[2] = o2.as<__nv_bfloat16>();
          o.cols[0] = c0;
          o.cols[1] = c1;
          o.cols[2] = c2;
          ASSERT_TRUE(model::cuda::skinny_gemm(p.da.as<__nv_bfloat16>(), p.lda, p.dw.as<__nv_bfloat16>(), m, s.n, s.k, o,
                                               p.workspace(), sms, nullptr)
                          .ok());
          int64_t base = 0;
          for (auto [buf, cols] : {std::pair{&o0, c0}, std::pair{&o1, c1}, std::pair{&o2, c2}}) {
            if (cols == 0) continue;
            const std::vector<float> got = download_bf16(*buf, m * cols);
            std::vector<double> want(got.size());
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < cols; ++j) want[i * cols + j] = p.c[i * s.n + base + j];
            EXPECT_EQ(check("bf16 piece", got, want, bf16_ulp, scale), "") << how << ", piece at column " << base;
            base += cols;
          }
        }
        // kResidual, with the norm and without it: x0 random, x = x0 + c, h = bf16(w · x · rsqrt(mean x² + eps)).
        // (With the launched epilogue the norm also in one launch, a cluster of 8 blocks a row:
        // norm_one_launch, which sm_90+ must take.)
        for (int variant : {0, 1, 2}) {
          const bool norm = variant < 2, one_launch = variant == 1;
          if (one_launch && !launch) continue;
          if (one_launch) {
            int device = 0, major = 0;
            FS_ASSERT_CUDA(cudaGetDevice(&device));
            FS_ASSERT_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
            EXPECT_EQ(model::cuda::skinny_norm_one_launch_available(), major >= 9) << "compute capability " << major;
          }
          std::mt19937 rng(static_cast<uint32_t>(seed * 7));
          std::normal_distribution<float> normal(0.f, 2.f);
          std::vector<float> x0(static_cast<size_t>(m * s.n));
          for (float& v : x0) v = normal(rng);
          const Bf16 nw = random_bf16(s.n, 1.0, rng);
          DeviceBuffer dx = to_device(x0), dnw = to_device(nw.bits), dh(m * s.n * 2);
          SkinnyOutput o;
        o.launch_epilogue = launch;
          o.kind = SkinnyEpilogue::kResidual;
          o.residual = dx.as<float>();
          o.norm_weight = norm ? dnw.as<__nv_bfloat16>() : nullptr;
          o.normed = norm ? dh.as<__nv_bfloat16>() : nullptr;
          o.eps = 1e-5f;
          o.norm_one_launch = one_launch;
          ASSERT_TRUE(model::cuda::skinny_gemm(p.da.as<__nv_bfloat16>(), p.lda, p.dw.as<__nv_bfloat16>(), m, s.n, s.k, o,
                                               p.workspace(), sms, nullptr)
                          .ok());
          std::vector<float> x(x0.size());
          dx.download(x.data(), m * s.n * 4);
          std::vector<double> want_x(x.size()), want_h(x.size());
          for (int64_t i = 0; i < m; ++i) {
            double ss = 0;
            for (int64_t j = 0; j < s.n; ++j) {
              want_x[i * s.n + j] = x0[i * s.n + j] + p.c[i * s.n + j];
              ss += want_x[i * s.n + j] * want_x[i * s.n + j];
            }
            const double inv = 1.0 / std::sqrt(ss / static_cast<double>(s.n) + 1e-5);
            for (int64_t j = 0; j < s.n; ++j) want_h[i * s.n + j] = nw.value[j] * want_x[i * s.n + j] * inv;
          }
          const std::string variant_how = how + (one_launch ? ", norm in one launch" : "");
          EXPECT_EQ(check("residual", x, want_x, 16 * fp32_ulp, scale + 8), "") << variant_how;
          if (norm) {
            EXPECT_EQ(check("rms norm", download_bf16(dh, m * s.n), want_h, bf16_ulp, 4), "") << variant_how;
          }
        }
        // kSwiGLU: columns [0, n/2) gate, [n/2, n) up.
        {
          const int64_t half = s.n / 2;
          DeviceBuffer act(m * half * 2);
          SkinnyOutput o;
        o.launch_epilogue = launch;
          o.kind = SkinnyEpilogue::kSwiGLU;
          o.act = act.as<__nv_bfloat16>();
          ASSERT_TRUE(model::cuda::skinny_gemm(p.da.as<__nv_bfloat16>(), p.lda, p.dw.as<__nv_bfloat16>(), m, s.n, s.k, o,
                                               p.workspace(), sms, nullptr)
                          .ok());
          std::vector<double> want(static_cast<size_t>(m * half));
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < half; ++j) {
              const double g = p.c[i * s.n + j], u = p.c[i * s.n + half + j];
              want[i * half + j] = g / (1 + std::exp(-g)) * u;
            }
          EXPECT_EQ(check("swiglu", download_bf16(act, m * half), want, bf16_ulp, scale * scale), "") << how;
        }
      }
      std::vector<unsigned> counters(static_cast<size_t>(model::cuda::skinny_gemm_counters(s.n)));
      p.counters.download(counters.data(), static_cast<int64_t>(counters.size() * 4));
      for (unsigned c : counters) ASSERT_EQ(c, 0u) << "a fused epilogue left a counter set, " << what;
    }
  }
}

// Shapes it does not take, and a short workspace: INVALID_ARGUMENT naming the shapes, the
// output untouched (poisoned NaN stays).
TEST(SkinnyGemmCuda, RefusesWhatItDoesNotTake) {
  FS_SKIP_WITHOUT_CUDA();
  const int sms = device_sms();
  Problem p = make_problem(32, 64, 256, 3000, sms);
  DeviceBuffer out(33 * 64 * 4);
  SkinnyOutput o;
  o.kind = SkinnyEpilogue::kFp32;
  o.out_fp32 = out.as<float>();
  const auto* a = p.da.as<__nv_bfloat16>();
  const auto* w = p.dw.as<__nv_bfloat16>();
  struct Bad {
    int64_t m, n, k, lda;
    const __nv_bfloat16* a;
    int64_t ws;
  };
  const Bad bad[] = {
      {33, 64, 256, 256, a, p.ws_bytes},      // too many rows
      {0, 64, 256, 256, a, p.ws_bytes},       // none
      {32, 40, 256, 256, a, p.ws_bytes},      // n not a multiple of 16
      {32, 64, 200, 200, a, p.ws_bytes},      // k not a multiple of 64
      {32, 64, 256, 248, a, p.ws_bytes},      // lda < k
      {32, 64, 128, 256, a + 1, p.ws_bytes},  // a misaligned
      {32, 64, 256, 256, a, p.ws_bytes - 4},  // a short workspace
  };
  for (const Bad& b : bad) {
    model::cuda::SkinnyWorkspace ws = p.workspace();
    ws.bytes = b.ws;
    const Status st = model::cuda::skinny_gemm(b.a, b.lda, w, b.m, b.n, b.k, o, ws, sms, nullptr);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << b.m << " " << b.n << " " << b.k << " " << b.lda;
    EXPECT_NE(st.message().find("skinny_gemm"), std::string::npos) << st.to_string();
  }
  // w misaligned; each epilogue without what it writes.
  EXPECT_EQ(model::cuda::skinny_gemm(a, 256, w + 4, 32, 64, 256, o, p.workspace(), sms, nullptr).code(),
            StatusCode::kInvalidArgument);
  for (SkinnyEpilogue kind : {SkinnyEpilogue::kFp32, SkinnyEpilogue::kResidual, SkinnyEpilogue::kSwiGLU}) {
    SkinnyOutput missing;
    missing.kind = kind;
    missing.residual = kind == SkinnyEpilogue::kResidual ? out.as<float>() : nullptr;
    missing.norm_weight = w;  // kResidual: a norm without its output
    EXPECT_EQ(model::cuda::skinny_gemm(a, 256, w, 32, 64, 256, missing, p.workspace(), sms, nullptr).code(),
              StatusCode::kInvalidArgument)
        << static_cast<int>(kind);
  }
  SkinnyOutput pieces;  // columns that do not add up to n
  pieces.out[0] = reinterpret_cast<__nv_bfloat16*>(out.get());
  pieces.cols[0] = 48;
  EXPECT_EQ(model::cuda::skinny_gemm(a, 256, w, 32, 64, 256, pieces, p.workspace(), sms, nullptr).code(),
            StatusCode::kInvalidArgument);
  FS_ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<float> got(33 * 64);
  out.download(got.data(), 33 * 64 * 4);
  for (float v : got) ASSERT_TRUE(std::isnan(v)) << "a refused call wrote its output";
}

// The fused epilogue inside a CUDA graph replayed three times (its counters must come back to
// zero after each launch): x = x0 + 3·c, h the norm of that x; QKV-like pieces equal each time.
TEST(SkinnyGemmCuda, FusedEpilogueReplaysInAGraph) {
  FS_SKIP_WITHOUT_CUDA();
  const int sms = device_sms();
  Problem p = make_problem(1, 4096, 4096, 3100, sms);  // wo's shape at batch 1: 16 splits
  std::mt19937 rng(3101);
  const Bf16 nw = random_bf16(p.n, 1.0, rng);
  std::vector<float> x0(static_cast<size_t>(p.n), 0.25f);
  DeviceBuffer dx = to_device(x0), dnw = to_device(nw.bits), dh(p.n * 2);
  SkinnyOutput o;
  o.kind = SkinnyEpilogue::kResidual;
  o.residual = dx.as<float>();
  o.norm_weight = dnw.as<__nv_bfloat16>();
  o.normed = dh.as<__nv_bfloat16>();
  ASSERT_TRUE(model::cuda::skinny_gemm_fuses(1, p.n, o, p.workspace()));
  cudaStream_t stream;
  FS_ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  FS_ASSERT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const Status st = model::cuda::skinny_gemm(p.da.as<__nv_bfloat16>(), p.lda, p.dw.as<__nv_bfloat16>(), 1, p.n, p.k, o,
                                             p.workspace(), sms, stream);
  FS_ASSERT_CUDA(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(st.ok()) << st.to_string();
  cudaGraphExec_t exec;
  FS_ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int r = 0; r < 3; ++r) FS_ASSERT_CUDA(cudaGraphLaunch(exec, stream));
  FS_ASSERT_CUDA(cudaStreamSynchronize(stream));
  std::vector<float> x(static_cast<size_t>(p.n));
  dx.download(x.data(), p.n * 4);
  std::vector<double> want_x(x.size()), want_h(x.size());
  double ss = 0;
  for (int64_t j = 0; j < p.n; ++j) {
    want_x[j] = 0.25 + 3 * p.c[j];
    ss += want_x[j] * want_x[j];
  }
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(p.n) + 1e-5);
  for (int64_t j = 0; j < p.n; ++j) want_h[j] = nw.value[j] * want_x[j] * inv;
  EXPECT_EQ(check("x after 3 replays", x, want_x, 64 * std::ldexp(1.0, -23), max_abs(p.c) + 1), "");
  EXPECT_EQ(check("h after 3 replays", download_bf16(dh, p.n), want_h, std::ldexp(1.0, -8), 4), "");
  std::vector<unsigned> counters(static_cast<size_t>(model::cuda::skinny_gemm_counters(p.n)));
  p.counters.download(counters.data(), static_cast<int64_t>(counters.size() * 4));
  for (unsigned c : counters) EXPECT_EQ(c, 0u);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// kRopeAppend (the fused QKV's epilogue with rotary and the K/V append): bit for bit what kStore
// followed by rope_append writes (q, k, v and the pool's bytes, bf16 and FP8 pools, from the
// same random pool bytes), and q, k, v within bf16 of float64 rotary over the float64 c. Slots
// outside the pool (-1, the pool's size) are skipped; without append the pool is untouched.
// Shapes: whole heads of d 128 (the 8B model's 32/8 heads and a small 4/2) and d 64 (6/2 heads,
// k an odd multiple of 64); rows 1, 3, 16, 17.
TEST(SkinnyGemmCuda, RopeAppendEpilogueMatchesStoreThenRopeAppend) {
  FS_SKIP_WITHOUT_CUDA();
  const int sms = device_sms();
  struct Shape {
    int heads, kv_heads, d;
    int64_t k;
  };
  const Shape shapes[] = {{4, 2, 128, 4224}, {32, 8, 128, 4096}, {6, 2, 64, 576}};
  const int32_t num_blocks = 7, block_size = 5;  // 35 slots: a token's slot mid-page too
  uint64_t seed = 2750;
  for (const Shape& sh : shapes) {
    const int64_t qc = int64_t{sh.heads} * sh.d, kc = int64_t{sh.kv_heads} * sh.d, n = qc + 2 * kc;
    std::vector<float> inv_freq(static_cast<size_t>(sh.d / 2));
    for (size_t i = 0; i < inv_freq.size(); ++i)
      inv_freq[i] = static_cast<float>(std::pow(500000.0, -2.0 * static_cast<double>(i) / sh.d));
    DeviceBuffer d_inv = to_device(inv_freq);
    for (int64_t m : {1, 3, 16, 17}) {
      if (n * sh.k > (8 << 20) && m != 1 && m != 17) continue;  // the long references: fewer rows
      Problem p = make_problem(m, n, sh.k, seed++, sms);
      std::mt19937 rng(static_cast<uint32_t>(seed * 13));
      // Distinct slots in the pool; with 3 rows or more, row 1 at -1 and row 2 at the pool's size.
      std::vector<int64_t> slots(static_cast<size_t>(num_blocks * block_size));
      for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int64_t>(i);
      std::shuffle(slots.begin(), slots.end(), rng);
      slots.resize(static_cast<size_t>(m));
      if (m >= 3) {
        slots[1] = -1;
        slots[2] = int64_t{num_blocks} * block_size;
      }
      std::vector<int32_t> positions(static_cast<size_t>(m));
      for (int32_t& pos : positions) pos = static_cast<int32_t>(rng() % 8192);
      DeviceBuffer d_slots = to_device(slots), d_pos = to_device(positions);
      const std::string what = "heads " + std::to_string(sh.heads) + "/" + std::to_string(sh.kv_heads) + " d " +
                               std::to_string(sh.d) + " k " + std::to_string(sh.k) + " m " + std::to_string(m);
      for (DType dtype : {DType::kBFloat16, DType::kFp8E4M3, DType::kFp8E5M2}) {
        for (bool append : {true, false}) {
          if (!append && dtype != DType::kBFloat16) continue;
          const std::string how = what + " " + dtype_name(dtype) + (append ? "" : ", no append");
          const int64_t pool_bytes = int64_t{num_blocks} * 2 * kc * block_size * dtype_size(dtype);
          std::vector<uint8_t> pool0(static_cast<size_t>(pool_bytes));
          for (uint8_t& b : pool0) b = static_cast<uint8_t>(rng() % 0x7b);  // finite codes, never all zero
          std::vector<float> k_scales(static_cast<size_t>(sh.kv_heads)), v_scales(k_scales.size());
          for (size_t h = 0; h < k_scales.size(); ++h) {
            k_scales[h] = 0.01f + 0.003f * static_cast<float>(h);
            v_scales[h] = 0.02f + 0.005f * static_cast<float>(h);
          }
          DeviceBuffer d_ks = to_device(k_scales), d_vs = to_device(v_scales);
          // Run A: kStore, then rope_append; run B: kRopeAppend. Outputs poisoned, pools alike.
          struct Run {
            DeviceBuffer q, k, v, pool;
            KVPageView pages;
          } runs[2];
          for (Run& r : runs) {
            r.q.allocate(m * qc * 2);
            r.k.allocate(m * kc * 2);
            r.v.allocate(m * kc * 2);
            r.pool = to_device(pool0);
            r.pages = make_page_view(r.pool.get(), dtype, num_blocks, sh.kv_heads, block_size, sh.d, nullptr, 0, nullptr);
            if (is_fp8(dtype)) {
              r.pages.k_scales = d_ks.as<float>();
              r.pages.v_scales = d_vs.as<float>();
            }
          }
          SkinnyOutput o;
          o.launch_epilogue = true;
          o.cols[0] = qc;
          o.cols[1] = o.cols[2] = kc;
          for (int i = 0; i < 2; ++i) {
            o.out[0] = runs[i].q.as<__nv_bfloat16>();
            o.out[1] = runs[i].k.as<__nv_bfloat16>();
            o.out[2] = runs[i].v.as<__nv_bfloat16>();
            if (i == 1) {
              o.kind = SkinnyEpilogue::kRopeAppend;
              o.positions = d_pos.as<int32_t>();
              o.inv_freq = d_inv.as<float>();
              o.slots = d_slots.as<int64_t>();
              o.head_dim = sh.d;
              o.pages = runs[i].pages;
              o.append = append;
            }
            const Status st = model::cuda::skinny_gemm(p.da.as<__nv_bfloat16>(), p.lda, p.dw.as<__nv_bfloat16>(), m, n,
                                                       sh.k, o, p.workspace(), sms, nullptr);
            ASSERT_TRUE(st.ok()) << st.to_string() << ", " << how;
            if (i == 0)
              FS_ASSERT_CUDA(model::cuda::rope_append(runs[0].q.as<__nv_bfloat16>(), runs[0].k.as<__nv_bfloat16>(),
                                                      runs[0].v.as<__nv_bfloat16>(), d_pos.as<int32_t>(),
                                                      d_inv.as<float>(), d_slots.as<int64_t>(), m, sh.heads,
                                                      sh.kv_heads, sh.d, runs[0].pages, append, nullptr));
          }
          FS_ASSERT_CUDA(cudaDeviceSynchronize());
          auto bytes = [](const DeviceBuffer& b, int64_t count) {
            std::vector<uint8_t> h(static_cast<size_t>(count));
            b.download(h.data(), count);
            return h;
          };
          EXPECT_EQ(bytes(runs[0].q, m * qc * 2), bytes(runs[1].q, m * qc * 2)) << "q, " << how;
          EXPECT_EQ(bytes(runs[0].k, m * kc * 2), bytes(runs[1].k, m * kc * 2)) << "k, " << how;
          EXPECT_EQ(bytes(runs[0].v, m * kc * 2), bytes(runs[1].v, m * kc * 2)) << "v, " << how;
          const std::vector<uint8_t> pool_a = bytes(runs[0].pool, pool_bytes), pool_b = bytes(runs[1].pool, pool_bytes);
          EXPECT_EQ(pool_a, pool_b) << "pool, " << how;
          // What changed in the pool: a written slot's K and V for every kv head, nothing else.
          int64_t changed = 0, outside = 0;
          const int64_t elem = dtype_size(dtype);
          for (int64_t at = 0; at < pool_bytes; ++at) {
            if (pool_b[static_cast<size_t>(at)] == pool0[static_cast<size_t>(at)]) continue;
            ++changed;
            const int64_t e = at / elem, slot_in_block = e / sh.d % block_size, block = e / (2 * kc * block_size);
            const int64_t slot = block * block_size + slot_in_block;
            bool written = false;
            for (int64_t t = 0; t < m; ++t) written = written || (append && slots[static_cast<size_t>(t)] == slot);
            if (!written) ++outside;
          }
          EXPECT_EQ(outside, 0) << "pool bytes changed outside the written slots, " << how;
          if (append) {
            EXPECT_GT(changed, 0) << how;
          } else {
            EXPECT_EQ(changed, 0) << how;
          }
          // Against float64 rotary over the float64 c (bf16 rounding of c and of the result).
          if (dtype != DType::kBFloat16) continue;
          const std::vector<float> q = download_bf16(runs[1].q, m * qc), k = download_bf16(runs[1].k, m * kc),
                                   v = download_bf16(runs[1].v, m * kc);
          int64_t bad = 0;
          std::string first;
          const double ulp = std::ldexp(1.0, -8), scale = max_abs(p.c);
          for (int64_t t = 0; t < m; ++t) {
            for (int h = 0; h < sh.heads + sh.kv_heads; ++h)
              for (int i = 0; i < sh.d / 2; ++i) {
                const int64_t col = int64_t{h} * sh.d + i;
                const double x = p.c[t * n + col], y = p.c[t * n + col + sh.d / 2];
                const double ang = positions[t] * static_cast<double>(inv_freq[i]);
                const double ra = x * std::cos(ang) - y * std::sin(ang), rb = y * std::cos(ang) + x * std::sin(ang);
                const bool is_q = h < sh.heads;
                const float* row = is_q ? &q[(t * sh.heads + h) * sh.d] : &k[(t * sh.kv_heads + h - sh.heads) * sh.d];
                const double tol = 3 * ulp * (std::fabs(x) + std::fabs(y)) + 1e-5 * scale;
                for (auto [got, want] : {std::pair{row[i], ra}, std::pair{row[i + sh.d / 2], rb}})
                  if (!(std::fabs(got - want) <= tol) && bad++ == 0)
                    first = "row " + std::to_string(t) + " head " + std::to_string(h) + " dim " + std::to_string(i) +
                            ": " + std::to_string(got) + " vs " + std::to_string(want);
              }
            for (int64_t e = 0; e < kc; ++e) {
              const double want = p.c[t * n + qc + kc + e];
              if (!(std::fabs(v[t * kc + e] - want) <= 2 * ulp * std::fabs(want) + 1e-5 * scale) && bad++ == 0)
                first = "v row " + std::to_string(t) + " at " + std::to_string(e);
            }
          }
          EXPECT_EQ(bad, 0) << "against float64, first: " << first << ", " << how;
        }
      }
    }
  }
}

// kRopeAppend's refusals: pieces that are not whole heads, a missing positions / inv_freq, an
// append without slots or with FP8 pages lacking scales: INVALID_ARGUMENT, nothing written.
TEST(SkinnyGemmCuda, RopeAppendRefusesWhatItCannotDo) {
  FS_SKIP_WITHOUT_CUDA();
  const int sms = device_sms();
  Problem p = make_problem(2, 512, 256, 3200, sms);  // heads 2 of d 128, kv heads 1
  DeviceBuffer q(2 * 256 * 2), k(2 * 128 * 2), v(2 * 128 * 2), pos(2 * 4), inv(64 * 4), slots(2 * 8), pool(4 * 2 * 128 * 4);
  auto good = [&] {
    SkinnyOutput o;
    o.kind = SkinnyEpilogue::kRopeAppend;
    o.out[0] = q.as<__nv_bfloat16>();
    o.out[1] = k.as<__nv_bfloat16>();
    o.out[2] = v.as<__nv_bfloat16>();
    o.cols[0] = 256;
    o.cols[1] = o.cols[2] = 128;
    o.positions = pos.as<int32_t>();
    o.inv_freq = inv.as<float>();
    o.slots = slots.as<int64_t>();
    o.head_dim = 128;
    o.pages = make_page_view(pool.get(), DType::kBFloat16, 4, 1, 2, 128, nullptr, 0, nullptr);
    o.append = true;
    return o;
  };
  std::vector<SkinnyOutput> bad;
  for (int i = 0; i < 7; ++i) bad.push_back(good());
  bad[0].head_dim = 96;             // pieces not whole heads
  bad[1].positions = nullptr;
  bad[2].inv_freq = nullptr;
  bad[3].slots = nullptr;           // an append without slots
  bad[4].pages.dtype = DType::kFp8E4M3;  // FP8 pages without scales
  bad[5].cols[1] = 256;             // no q piece (and the sum not n)
  bad[5].cols[0] = 0;
  bad[6].out[2] = nullptr;
  bad.push_back(good());            // k wider than v, all else right: heads of 64, cols 256 / 192 / 64
  bad.back().head_dim = 64;
  bad.back().cols[1] = 192;
  bad.back().cols[2] = 64;
  for (size_t i = 0; i < bad.size(); ++i) {
    const Status st = model::cuda::skinny_gemm(p.da.as<__nv_bfloat16>(), p.lda, p.dw.as<__nv_bfloat16>(), 2, 512, 256,
                                               bad[i], p.workspace(), sms, nullptr);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "case " << i;
    EXPECT_NE(st.message().find("kRopeAppend"), std::string::npos) << st.to_string();
  }
  FS_ASSERT_CUDA(cudaDeviceSynchronize());
  for (const DeviceBuffer* b : {&q, &k, &v}) {
    std::vector<uint16_t> bits(static_cast<size_t>(b == &q ? 512 : 256));
    b->download(bits.data(), static_cast<int64_t>(bits.size() * 2));
    for (uint16_t x : bits) ASSERT_EQ(x, 0xffff) << "a refused call wrote its output";
  }
  std::vector<uint8_t> pb(4 * 2 * 128 * 4);
  pool.download(pb.data(), static_cast<int64_t>(pb.size()));
  for (uint8_t x : pb) ASSERT_EQ(x, 0xff) << "a refused call wrote the pool";
  // The good call goes through (and fuses nothing: a launch of its own), positions and slots set.
  EXPECT_FALSE(model::cuda::skinny_gemm_fuses(2, 512, good(), p.workspace()));
  const std::vector<int32_t> positions = {3, 900};
  const std::vector<int64_t> slot_ids = {5, 2};
  std::vector<float> inv_freq(64);
  for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = std::pow(10000.f, -static_cast<float>(i) / 64.f);
  pos.upload(positions.data(), 8);
  slots.upload(slot_ids.data(), 16);
  inv.upload(inv_freq.data(), 256);
  const Status st = model::cuda::skinny_gemm(p.da.as<__nv_bfloat16>(), p.lda, p.dw.as<__nv_bfloat16>(), 2, 512, 256,
                                             good(), p.workspace(), sms, nullptr);
  EXPECT_TRUE(st.ok()) << st.to_string();
  FS_ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<float> qv = download_bf16(q, 512);
  for (float x : qv) ASSERT_TRUE(std::isfinite(x)) << "the good call left q unwritten";
}

// The split rule (host only): enough CTAs for a wave of 4 an SM, at most 16 and ceil(k / 128)
// splits, a divisor of the sub-slices where one is in range; the workspace follows.
TEST(SkinnyGemmSplits, FillsTheGpuWithinItsBounds) {
  EXPECT_EQ(model::cuda::skinny_gemm_splits(128256, 4096, 132), 1);  // lm_head: 2004 blocks
  EXPECT_EQ(model::cuda::skinny_gemm_splits(28672, 4096, 132), 2);   // gate|up: 448 blocks
  EXPECT_EQ(model::cuda::skinny_gemm_splits(6144, 4096, 132), 8);    // fused QKV: 96 blocks, 32 sub-slices
  EXPECT_EQ(model::cuda::skinny_gemm_splits(4096, 4096, 132), 16);   // wo: 64 blocks
  EXPECT_EQ(model::cuda::skinny_gemm_splits(4096, 14336, 132), 14);  // down: 112 sub-slices, 14 divides it
  EXPECT_EQ(model::cuda::skinny_gemm_splits(1024, 128, 132), 1);     // one sub-slice
  EXPECT_EQ(model::cuda::skinny_gemm_splits(16, 896, 132), 7);       // capped by k / 128
  EXPECT_EQ(model::cuda::skinny_gemm_splits(1024, 2176, 132), 16);    // 17 sub-slices: uneven
  EXPECT_EQ(model::cuda::skinny_gemm_splits(4096, 4224, 132), 11);    // 33 sub-slices: 11 of 3
  EXPECT_EQ(model::cuda::skinny_gemm_splits(33792, 512, 132), 1);     // 528 blocks
  EXPECT_EQ(model::cuda::skinny_gemm_splits(192, 576, 132), 5);       // 4.5 sub-slices: 5, the last half
  EXPECT_EQ(model::cuda::skinny_gemm_splits(33792, 320, 132), 1);
  for (int64_t n : {16, 176, 1040, 6144}) {
    for (int64_t k : {128, 384, 896, 4096, 14336}) {
      const int s = model::cuda::skinny_gemm_splits(n, k, 132);
      EXPECT_GE(s, 1);
      EXPECT_LE(s, 16);
      EXPECT_LE(s, k / 128);
      EXPECT_EQ(model::cuda::skinny_gemm_workspace_bytes(7, n, k, 132), (int64_t{s} * 7 * n + 7 * ((n + 63) / 64)) * 4);
      EXPECT_EQ(model::cuda::skinny_gemm_counters(n), (n + 63) / 64 + 1);
    }
  }
}

// FLASHSERVE_SKINNY_SPLITS=N (A/B benchmarks) forces min(N, the cap) splits; 0 or junk: the rule.
// FLASHSERVE_SKINNY_SPLIT_RULE=wave: one wave's worth instead; other values: the rule.
TEST(SkinnyGemmSplits, ForcedByTheEnvironmentWithinTheCap) {
  {
    const ScopedEnv force("FLASHSERVE_SKINNY_SPLITS", "4");
    EXPECT_EQ(model::cuda::skinny_gemm_splits(128256, 4096, 132), 4);
    EXPECT_EQ(model::cuda::skinny_gemm_splits(4096, 4096, 132), 4);
    EXPECT_EQ(model::cuda::skinny_gemm_splits(1024, 128, 132), 1);  // one sub-slice: the cap
    EXPECT_EQ(model::cuda::skinny_gemm_workspace_bytes(3, 4096, 4096, 132), (int64_t{4} * 3 * 4096 + 3 * 64) * 4);
  }
  {
    const ScopedEnv force("FLASHSERVE_SKINNY_SPLITS", "40");
    EXPECT_EQ(model::cuda::skinny_gemm_splits(6144, 4096, 132), 16);
    EXPECT_EQ(model::cuda::skinny_gemm_splits(16, 896, 132), 7);
  }
  for (const char* junk : {"0", "x"}) {
    const ScopedEnv force("FLASHSERVE_SKINNY_SPLITS", junk);
    EXPECT_EQ(model::cuda::skinny_gemm_splits(6144, 4096, 132), 8);
  }
  EXPECT_EQ(model::cuda::skinny_gemm_splits(6144, 4096, 132), 8);  // the variable gone again
  {
    // FLASHSERVE_SKINNY_SPLIT_RULE=wave: the most splits within one wave of 4 CTAs an SM.
    const ScopedEnv rule("FLASHSERVE_SKINNY_SPLIT_RULE", "wave");
    EXPECT_EQ(model::cuda::skinny_gemm_splits(6144, 4096, 132), 5);     // qkv: 480 CTAs
    EXPECT_EQ(model::cuda::skinny_gemm_splits(4096, 4096, 132), 8);     // o: 512
    EXPECT_EQ(model::cuda::skinny_gemm_splits(28672, 4096, 132), 1);    // gate|up: 448
    EXPECT_EQ(model::cuda::skinny_gemm_splits(4096, 14336, 132), 8);    // down: 512
    EXPECT_EQ(model::cuda::skinny_gemm_splits(128256, 4096, 132), 1);   // lm_head: many waves anyway
    EXPECT_EQ(model::cuda::skinny_gemm_splits(16, 896, 132), 7);        // the cap
    EXPECT_EQ(model::cuda::skinny_gemm_workspace_bytes(2, 6144, 4096, 132), (int64_t{5} * 2 * 6144 + 2 * 96) * 4);
    const ScopedEnv force("FLASHSERVE_SKINNY_SPLITS", "3");  // a forced count still wins
    EXPECT_EQ(model::cuda::skinny_gemm_splits(6144, 4096, 132), 3);
  }
  for (const char* other : {"", "divisor"}) {
    const ScopedEnv rule("FLASHSERVE_SKINNY_SPLIT_RULE", other);
    EXPECT_EQ(model::cuda::skinny_gemm_splits(6144, 4096, 132), 8);
  }
}

}  // namespace
}  // namespace flashserve::test
