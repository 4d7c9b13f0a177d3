// FP8 on CUDA (issue 25; label gpu): KVStorage's CUDA FP8 pools (append quantizing bf16, fp16
// and fp32 bit for bit as the CPU does, copy_blocks, the device scales), decode over FP8 pages
// and paged prefill over them. For decode and prefill the pages are written by KVStorage::append on
// the CPU (tests/fp8_support.h: bf16/fp16 K/V quantized with per-kv-head scales, free slots the
// format's NaN code) and copied to the device with their scales; each decode case runs
//   (a) against float64 attention over the dequantized values (scale·fp8(code)), with the
//       tolerance of the call's 16-bit type, and
//   (b) against the CPU decode over the same pages (itself checked in test_fp8_attention.cc),
// both formats, bf16 and fp16 q/o, head dims 64 and 128, GQA groups 1 to 8 and q_len 1 to 3
// (row blocks of one and of two), block sizes 1 to 256, planned, one and three splits, outputs
// and workspace poisoned; large q (the kernel's fp16 q takes a power-of-two scale).
// Prefill (the mma.sync kernel's FP8 instances, and at d 128 on sm_90a the warp-specialized
// kernel's) runs the same two checks over chunks on a cached prefix, whole prompts, causal and
// not, GQA, window + ALiBi + softcap, block sizes 1 to 256, each kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <initializer_list>
#include <random>

#include "attention/prefill.h"
#include "decode/cuda/decode_cuda.h"
#include "tests/cuda_support.h"
#include "tests/fp8_support.h"

namespace flashserve::test {
namespace {

// A case's data, its FP8 cache (scales 0.5 + h % 4) and float64 reference over the dequantized
// values, the GPU's tolerance, and outputs for the CPU's run.
struct Fp8Fixture {
  ProblemData d;
  Fp8Cache cache;
  std::string what;
  Reference ref;
  Tolerance tol;
  Outputs cpu;
};
Fp8Fixture make_fp8_fixture(const Problem& p, DType t) {
  Fp8Fixture f;
  f.d = make_data(p);
  f.cache = make_fp8_cache(p, f.d, t, [](int h) { return 0.5f + (h % 4); });
  f.what = std::string(dtype_name(t)) + " pages, " + p.describe();
  f.ref = reference(p, f.cache.dequantized);
  f.tol = gpu_tolerance(p, f.ref);
  f.cpu = make_outputs(p);
  return f;
}

struct Fp8Case {
  std::vector<int> lens;
  int q_len, heads, kv_heads, head_dim, block_size;
  float logit_scale = 1.f;  // multiplies q (Problem::logit_scale): 2e4 takes q past fp16's range (bf16 only)
};

// A device copy of cache's pool and scales.
struct DevicePool {
  DeviceBuffer pool, k_scales, v_scales;
  // The view over this copy, with the table and lengths of `like` (device pointers).
  KVPageView view(const Fp8Cache& cache, const KVPageView& like, bool no_v_scales = false) const {
    const KVStorageShape& sh = cache.storage.shape();
    KVPageView v = make_page_view(pool.get(), sh.dtype, sh.num_blocks, sh.num_kv_heads, sh.block_size, sh.head_dim,
                                  like.block_table, like.block_table_stride, like.seq_lens);
    v.k_scales = k_scales.as<float>();
    v.v_scales = no_v_scales ? nullptr : v_scales.as<float>();
    return v;
  }
};
DevicePool upload_pool(const Fp8Cache& cache) {
  const KVStorageShape& sh = cache.storage.shape();
  DevicePool g;
  g.pool.allocate(sh.bytes());
  g.pool.upload(cache.storage.k_pages(0), sh.bytes());
  for (auto [buf, host] : {std::pair{&g.k_scales, cache.storage.k_scales(0)}, std::pair{&g.v_scales, cache.storage.v_scales(0)}}) {
    buf->allocate(4 * sh.num_kv_heads);
    buf->upload(host, 4 * sh.num_kv_heads);
  }
  return g;
}

// The GPU's decode over the device copy of cache's pool, with num_splits (0: the planner's);
// no_v_scales: the view without its V scales (bad input).
Outputs run_gpu(const Problem& p, ProblemData& d, const Fp8Cache& cache, int32_t num_splits, Status* st,
                bool no_v_scales = false) {
  DeviceProblem g = upload(p, d);
  Outputs host = make_outputs(p);
  DecodeParams dp = device_decode_params(p, d, host, g);
  const DevicePool pool = upload_pool(cache);
  DeviceBuffer ws;
  dp.pages = pool.view(cache, dp.pages, no_v_scales);
  const int32_t chunk = num_splits == 0 ? 0 : (max_pages(p) + num_splits - 1) / num_splits;
  configure_splits(dp, p, d, num_splits, chunk, ws);  // a poisoned workspace
  *st = decode(dp, nullptr);
  const cudaError_t err = cudaDeviceSynchronize();
  EXPECT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
  return download_outputs(p, g);
}

// One decode case over FP8 pages of format t with q (and o) of q_dtype, at each split count in
// `splits` (0: the planner's): against float64 over the dequantized values and against the CPU.
void check_fp8_decode(const Fp8Case& k, DType t, DType q_dtype, uint64_t seed, std::initializer_list<int32_t> splits) {
  Problem p = decode_problem(k.lens, k.q_len, k.heads, k.kv_heads, k.head_dim, q_dtype, k.block_size, seed);
  p.logit_scale = k.logit_scale;
  Fp8Fixture f = make_fp8_fixture(p, t);
  auto& [d, cache, what, ref, tol, cpu] = f;
  DecodeParams cp = decode_params(p, d, cpu);
  cp.pages = view_of(cache.storage, d);
  ASSERT_TRUE(decode(cp).ok()) << what;
  for (int32_t n : splits) {
    Status st;
    Outputs gpu = run_gpu(p, d, cache, n, &st);
    ASSERT_TRUE(st.ok()) << st.to_string() << "\n  " << what;
    EXPECT_EQ(compare(p, gpu, ref, tol), "") << what << ", splits " << n;
    EXPECT_EQ(compare_outputs(p, gpu, cpu, 2.0, 2 * ref.p_rounding_err), "") << "vs CPU, " << what << ", splits " << n;
  }
}

TEST(Fp8DecodeCuda, MatchesFloat64OverTheDequantizedValuesAndTheCpu) {
  FS_SKIP_WITHOUT_CUDA();
  const Fp8Case cases[] = {
      {{1, 7, 77, 257}, 1, 12, 3, 64, 16},         // GQA 4, three kv heads
      {{5, 33, 100, 1000}, 3, 8, 8, 128, 1},       // block size 1, q_len 3
      {{300, 2}, 1, 8, 1, 128, 8},                 // MQA: a group of 8
      {{129, 4097}, 2, 16, 2, 128, 64},            // groups of 8 × q_len 2: two row blocks
      {{17, 1025}, 1, 32, 8, 128, 256},            // GQA 32/8, pages of 256
      {{64, 65, 700}, 1, 4, 4, 64, 32, 2e4f},      // |q| up to ~1e5: the kernel's fp16 q takes 2^-2
  };
  uint64_t seed = 2500;
  for (DType t : {DType::kFp8E4M3, DType::kFp8E5M2}) {
    for (const Fp8Case& k : cases) {
      for (DType q_dtype : {DType::kBFloat16, DType::kFloat16}) {
        if (k.logit_scale > 1e4f && q_dtype == DType::kFloat16) continue;  // fp16 q cannot hold it
        check_fp8_decode(k, t, q_dtype, seed++, {0, 1, 3});
      }
    }
  }
}

// More items (sequence, kv head, split, row block) than the device holds CTAs at once, of
// uneven lengths, some splits empty (written for session 37's persistent kernel, removed in
// session 38: more than a wave of items, several splits, row blocks of 16 and 24 rows).
TEST(Fp8DecodeCuda, MoreItemsThanResidentCtas) {
  FS_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(37);
  auto lens = [&](int n, int max_len) {
    std::vector<int> v(n);
    for (int& x : v) x = 1 + static_cast<int>(rng() % static_cast<uint32_t>(max_len));
    return v;
  };
  const Fp8Case cases[] = {
      {lens(400, 700), 1, 8, 2, 128, 16},  // 800 items at one split; GQA 4
      {lens(300, 300), 2, 16, 2, 128, 16},  // groups of 8 × q_len 2: 16 rows a block
      {lens(200, 200), 3, 16, 2, 64, 32},   // 24 rows: row blocks of 16 and 8
  };
  uint64_t seed = 3700;
  for (DType t : {DType::kFp8E4M3, DType::kFp8E5M2}) {
    for (const Fp8Case& k : cases) check_fp8_decode(k, t, DType::kBFloat16, seed++, {0, 3});
  }
}

// With a scale pointer missing: a clear status, nothing written.
TEST(Fp8DecodeCuda, RefusedWithoutScales) {
  FS_SKIP_WITHOUT_CUDA();
  Problem p = decode_problem({33, 70}, 1, 8, 2, 128, DType::kBFloat16, 16, 2600);
  ProblemData d = make_data(p);
  Fp8Cache cache = make_fp8_cache(p, d, DType::kFp8E4M3, [](int) { return 1.f; });
  Status st;
  const Outputs out = run_gpu(p, d, cache, 1, &st, /*no_v_scales=*/true);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("need k_scales and v_scales"), std::string::npos) << st.to_string();
  for (float x : out.lse) EXPECT_TRUE(std::isnan(x));  // as poisoned
}

// The GPU's paged prefill over the device copy of cache's pool (no_v_scales: without its V scales).
Outputs run_gpu_prefill(const Problem& p, ProblemData& d, const Fp8Cache& cache, Status* st, bool no_v_scales = false) {
  DeviceProblem g = upload(p, d);
  Outputs host = make_outputs(p);
  PrefillParams pp = device_prefill_params(p, d, host, g);
  const DevicePool pool = upload_pool(cache);
  pp.pages = pool.view(cache, pp.pages, no_v_scales);
  *st = prefill(pp, nullptr);
  const cudaError_t err = cudaDeviceSynchronize();
  EXPECT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
  return download_outputs(p, g);
}

struct Fp8PrefillCase {
  std::vector<SeqSpec> seqs;  // {q_len, k_len}: k_len - q_len keys already cached
  int heads, kv_heads, head_dim, block_size;
  bool causal;
  bool masks = false;         // window 17 + ALiBi + softcap 30
  float logit_scale = 1.f;    // 2e4: |q| past fp16's range (bf16 only)
};

// One FP8 prefill case against float64 over the dequantized values and against the CPU: by the
// default kernel (at d 128 on sm_90a the warp-specialized one's FP8 instance: e4m3 by the copy
// path, e5m2 by the register path), the mma.sync kernel's FP8 instance (forced: the cross-check),
// the warp-specialized one on a persistent grid of 3 CTAs (several items a CTA: its rings and FP8
// slots carried from item to item), and by the other path of the two (FLASHSERVE_PREFILL_WS_FP8_PATH).
void check_fp8_prefill(const Fp8PrefillCase& k, DType t, DType q_dtype, uint64_t seed) {
  Problem p;
  p.seqs = k.seqs;
  p.num_heads = k.heads;
  p.num_kv_heads = k.kv_heads;
  p.head_dim = k.head_dim;
  p.dtype = q_dtype;
  p.block_size = k.block_size;
  p.causal = k.causal;
  p.logit_scale = k.logit_scale;
  if (k.masks) {
    p.window_left = 17;
    p.alibi = true;
    p.softcap = 30.f;
  }
  p.seed = seed;
  Fp8Fixture f = make_fp8_fixture(p, t);
  auto& [d, cache, what, ref, tol, cpu] = f;
  PrefillParams cp = prefill_params(p, d, cpu);
  cp.pages = view_of(cache.storage, d);
  ASSERT_TRUE(prefill(cp).ok()) << what;
  const char* other = t == DType::kFp8E5M2 ? "copy" : "reg";
  // (kernel, grid, FP8 path, walk): the default; mma.sync; a grid of 3 SMs' CTAs by the dynamic
  // walk and by the static one on a persistent grid (a launch's without counters: WsVarlenOrder
  // where q lengths differ, else the grid order; causal rows by zigzag units, prefill v4.40); the
  // other FP8 path.
  const char* configs[][4] = {{nullptr, nullptr, nullptr, nullptr}, {"mma", nullptr, nullptr, nullptr},
                              {nullptr, "3", nullptr, nullptr},     {nullptr, "3", nullptr, "static"},
                              {nullptr, nullptr, other, nullptr}};
  for (const auto& config : configs) {
    const ScopedEnv kernel("FLASHSERVE_PREFILL_KERNEL", config[0]), grid("FLASHSERVE_PREFILL_WS_GRID", config[1]),
        path("FLASHSERVE_PREFILL_WS_FP8_PATH", config[2]), walk("FLASHSERVE_PREFILL_WS_SCHED", config[3]),
        persistent("FLASHSERVE_PREFILL_WS_PERSISTENT", config[3] != nullptr ? "1" : nullptr);
    const std::string how = what + (config[0] != nullptr   ? ", mma.sync"
                                    : config[3] != nullptr ? ", grid 3, the static walk"
                                    : config[1] != nullptr ? ", grid 3"
                                    : config[2] != nullptr ? std::string(", the ") + config[2] + " path"
                                                           : "");
    Status st;
    const Outputs gpu = run_gpu_prefill(p, d, cache, &st);
    ASSERT_TRUE(st.ok()) << st.to_string() << "\n  " << how;
    EXPECT_EQ(compare(p, gpu, ref, tol), "") << how;
    EXPECT_EQ(compare_outputs(p, gpu, cpu, 2.0, 2 * ref.p_rounding_err), "") << "vs CPU, " << how;
  }
}

TEST(Fp8PrefillCuda, MatchesFloat64OverTheDequantizedValuesAndTheCpu) {
  FS_SKIP_WITHOUT_CUDA();
  const Fp8PrefillCase cases[] = {
      {{{7, 77}, {1, 1}, {33, 40}, {257, 1025}}, 12, 3, 64, 16, true},  // chunks over cached prefixes
      {{{77, 257}, {129, 129}}, 8, 8, 128, 1, false},                   // block size 1, a whole prompt
      {{{20, 50}, {3, 9}}, 4, 1, 128, 64, true, true},                  // MQA, window + ALiBi + softcap
      {{{300, 2000}}, 32, 8, 128, 256, true},                           // GQA 32/8, pages of 256
      {{{65, 130}, {1, 700}}, 4, 4, 64, 32, false, false, 2e4f},        // |q| to ~1e5: fp16 q takes 2^-2
      {{{40, 300}, {90, 90}}, 6, 2, 64, 16, true, true},                // d 64: window + ALiBi + softcap
      {{{33, 97}}, 4, 2, 128, 8, false, false, 4e3f},                   // |q| to ~2e4 (bf16 q), a peaked softmax
  };
  uint64_t seed = 2900;
  for (DType t : {DType::kFp8E4M3, DType::kFp8E5M2}) {
    for (const Fp8PrefillCase& k : cases) {
      for (DType q_dtype : {DType::kBFloat16, DType::kFloat16}) {
        // fp16 q cannot hold |q| past 6.5e4; and at logits of thousands the fp16 call's tolerance
        // (fp16's ulp) is below ex2.approx's error (the bf16 call's is not): H200, session 24,
        // 0.036316 against 0.036133 with a bound of 0.00017 at logit_scale 4000.
        if (k.logit_scale > 1e3f && q_dtype == DType::kFloat16) continue;
        check_fp8_prefill(k, t, q_dtype, seed++);
      }
    }
  }
}

// The warp-specialized FP8 producer's pipeline over many tiles (a slot's next codes copied while
// the tile before is converted and multiplied), at a size compute-sanitizer's racecheck and
// memcheck take in seconds: 6 and 2 key tiles an item, pages of 16 rows, 2 and 4 items a CTA.
TEST(Fp8PrefillCuda, WsPipelineOverManyTiles) {
  FS_SKIP_WITHOUT_CUDA();
  check_fp8_prefill({{{40, 700}, {130, 130}}, 4, 2, 128, 16, true}, DType::kFp8E4M3, DType::kBFloat16, 2950);
  check_fp8_prefill({{{40, 700}, {130, 130}}, 4, 2, 128, 16, false}, DType::kFp8E5M2, DType::kFloat16, 2951);
}

// A batch past the FP8 instance's sequence cache (72 entries: 71 sequences; more read their
// offsets from global memory and walk without the varlen order): 80 skewed chunks over cached
// prefixes (seed 2960), causal, in pages of 16 and of 128 (the key tile's size), by each of
// check_fp8_prefill's kernels and grids (a review's gap, session 28: no FP8 case had more than 4).
TEST(Fp8PrefillCuda, ManySequencesPastTheSequenceCache) {
  FS_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(2960);
  std::vector<SeqSpec> seqs;
  for (int i = 0; i < 80; ++i) {
    const int q = i % 9 == 0 ? std::uniform_int_distribution<int>(100, 300)(rng)
                             : std::uniform_int_distribution<int>(1, 40)(rng);
    seqs.push_back({q, q + std::uniform_int_distribution<int>(0, 200)(rng)});
  }
  check_fp8_prefill({seqs, 4, 2, 128, 16, true}, DType::kFp8E4M3, DType::kBFloat16, 2961);
  check_fp8_prefill({seqs, 4, 2, 128, 128, true}, DType::kFp8E5M2, DType::kBFloat16, 2962);
}

// At head_dim 256 (no FP8 instance), and with a scale pointer missing: a clear status, nothing
// written.
TEST(Fp8PrefillCuda, RefusedWithoutScalesOrAnFp8Instance) {
  FS_SKIP_WITHOUT_CUDA();
  for (int dim : {128, 256}) {
    Problem p;
    p.seqs = {{5, 40}, {16, 16}};
    p.num_heads = 4;
    p.num_kv_heads = 2;
    p.head_dim = dim;
    p.dtype = DType::kBFloat16;
    p.block_size = 16;
    p.causal = true;
    p.seed = 3000 + dim;
    ProblemData d = make_data(p);
    Fp8Cache cache = make_fp8_cache(p, d, DType::kFp8E4M3, [](int) { return 1.f; });
    auto poisoned = [](const Outputs& out) {
      for (float x : out.lse)
        if (!std::isnan(x)) return false;
      return true;
    };
    Status st;
    Outputs out = run_gpu_prefill(p, d, cache, &st);
    if (dim == 256) {
      EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.to_string();
      EXPECT_NE(st.message().find("head_dim 64 or 128"), std::string::npos) << st.to_string();
      EXPECT_TRUE(poisoned(out));
    } else {
      EXPECT_TRUE(st.ok()) << st.to_string();
      out = run_gpu_prefill(p, d, cache, &st, /*no_v_scales=*/true);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
      EXPECT_NE(st.message().find("need k_scales and v_scales"), std::string::npos) << st.to_string();
      EXPECT_TRUE(poisoned(out));
    }
  }
}

// The planner's launch shape for FP8 pages is the FP8 instance's (its registers and shared
// memory set its CTAs an SM), asked of the device once; other pages under a 16-bit call refused.
TEST(Fp8DecodeCuda, LaunchShapeOfFp8Pages) {
  FS_SKIP_WITHOUT_CUDA();
  for (int32_t dim : {64, 128}) {
    for (DType pages : {DType::kFp8E4M3, DType::kFp8E5M2}) {
      DecodeLaunchShape fp8, bf16;
      ASSERT_TRUE(decode_launch_shape(Device::kCUDA, dim, DType::kBFloat16, pages, &fp8).ok());
      ASSERT_TRUE(decode_launch_shape(Device::kCUDA, dim, DType::kBFloat16, &bf16).ok());
      EXPECT_GE(fp8.ctas_per_sm, 1);
      EXPECT_EQ(fp8.sm_count, bf16.sm_count);
      EXPECT_EQ(fp8.rows_per_cta, bf16.rows_per_cta);
      std::printf("[  NOTE    ] decode d %d: %s pages %d CTAs an SM, bf16 pages %d\n", dim, dtype_name(pages),
                  fp8.ctas_per_sm, bf16.ctas_per_sm);
      const int64_t asked = cuda::decode_launch_shape_queries();
      ASSERT_TRUE(decode_launch_shape(Device::kCUDA, dim, DType::kBFloat16, pages, &fp8).ok());
      EXPECT_EQ(cuda::decode_launch_shape_queries(), asked);
    }
  }
  DecodeLaunchShape none;
  EXPECT_EQ(decode_launch_shape(Device::kCUDA, 128, DType::kBFloat16, DType::kFloat16, &none).code(),
            StatusCode::kInvalidArgument);
}

// Equal codes, or both NaN (the formats have several NaN codes; both sides keep NaN as NaN).
bool same_code(uint8_t a, uint8_t b, DType t) {
  const float x = load_as_float(&a, t, 0), y = load_as_float(&b, t, 0);
  return a == b || (std::isnan(x) && std::isnan(y));
}

// A CUDA FP8 pool and a CPU one, the same scales (random per layer and kv head), the same K/V
// appended (N(0, 3) with NaN, ±inf, ±1e30, 1e-30, -0 among them; padding slots; each slot
// once), then the same copy_blocks: the pools agree byte for byte (or both hold a NaN code).
TEST(Fp8StorageCuda, AppendAndCopyBlocksMatchTheCpu) {
  FS_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(2700);
  std::normal_distribution<float> normal(0.f, 3.f);
  std::uniform_real_distribution<float> scale_of(0.01f, 0.5f);
  for (DType t : {DType::kFp8E4M3, DType::kFp8E5M2}) {
    for (DType src : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
      KVStorageShape sh;
      sh.num_layers = 2;
      sh.num_blocks = 9;
      sh.num_kv_heads = 3;
      sh.block_size = 16;
      sh.head_dim = 64;
      sh.dtype = t;
      KVStorage cpu, gpu;
      ASSERT_TRUE(KVStorage::create(Device::kCPU, sh, &cpu).ok());
      const Status created = KVStorage::create(Device::kCUDA, sh, &gpu);
      ASSERT_TRUE(created.ok()) << created.to_string();
      for (int32_t l = 0; l < sh.num_layers; ++l) {
        std::vector<float> ks(sh.num_kv_heads), vs(sh.num_kv_heads);
        for (auto* v : {&ks, &vs})
          for (float& x : *v) x = scale_of(rng);
        ASSERT_TRUE(cpu.set_scales(l, ks.data(), vs.data()).ok());
        ASSERT_TRUE(gpu.set_scales(l, ks.data(), vs.data()).ok());
        // The view's scales are the device copy, equal to the host's.
        std::vector<float> back(sh.num_kv_heads);
        FS_ASSERT_CUDA(cudaMemcpy(back.data(), gpu.view(l, nullptr, 0, nullptr).v_scales, 4 * back.size(),
                                  cudaMemcpyDeviceToHost));
        EXPECT_EQ(back, vs);
      }
      const int64_t n = 40, row = int64_t{sh.num_kv_heads} * sh.head_dim;
      const int64_t elems = sh.num_layers * n * row;
      std::vector<float> kf(elems), vf(elems);
      const float specials[] = {NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 1e-30f, -0.f};
      for (int64_t i = 0; i < elems; ++i) {
        kf[i] = i % 97 < 7 ? specials[i % 97] : normal(rng);
        vf[i] = i % 89 < 7 ? specials[i % 89] : normal(rng);
      }
      Buffer kb, vb;
      kb.resize(elems * dtype_size(src));
      vb.resize(elems * dtype_size(src));
      convert_from_float(kf.data(), src, elems, kb.data());
      convert_from_float(vf.data(), src, elems, vb.data());
      std::vector<int64_t> slots(n);
      std::vector<int64_t> all(static_cast<size_t>(sh.num_blocks) * sh.block_size);
      for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
      std::shuffle(all.begin(), all.end(), rng);
      for (int64_t i = 0; i < n; ++i) slots[i] = i % 13 == 5 ? -1 : all[i];
      ASSERT_TRUE(cpu.append(0, sh.num_layers, src, kb.data(), vb.data(), slots.data(), n).ok());
      DeviceBuffer dk = to_device(kb), dv = to_device(vb), ds = to_device(slots);
      const Status st = gpu.append(0, sh.num_layers, src, dk.get(), dv.get(), ds.as<int64_t>(), n);
      ASSERT_TRUE(st.ok()) << st.to_string();
      const BlockCopy pairs[] = {{2, 7}, {5, 1}, {0, 8}};
      ASSERT_TRUE(cpu.copy_blocks(pairs, 3).ok());
      ASSERT_TRUE(gpu.copy_blocks(pairs, 3).ok());
      FS_ASSERT_CUDA(cudaDeviceSynchronize());
      std::vector<uint8_t> got(static_cast<size_t>(sh.bytes()));
      FS_ASSERT_CUDA(cudaMemcpy(got.data(), gpu.k_pages(0), got.size(), cudaMemcpyDeviceToHost));
      const auto* want = static_cast<const uint8_t*>(cpu.k_pages(0));
      int64_t differ = 0, first = -1;
      for (size_t i = 0; i < got.size(); ++i)
        if (!same_code(got[i], want[i], t) && differ++ == 0) first = static_cast<int64_t>(i);
      EXPECT_EQ(differ, 0) << dtype_name(t) << " from " << dtype_name(src) << ": first at byte " << first << " ("
                           << int{got[first < 0 ? 0 : first]} << " vs " << int{want[first < 0 ? 0 : first]} << ")";
    }
  }
}

// The engine's path on the GPU: bf16 K/V appended into a CUDA FP8 pool, then CUDA decode over it,
// against the CPU decode over the CPU pool the same append wrote.
TEST(Fp8StorageCuda, DecodeOverAPoolTheGpuWrote) {
  FS_SKIP_WITHOUT_CUDA();
  Problem p = decode_problem({77, 300, 1025}, 1, 16, 4, 128, DType::kBFloat16, 16, 2800);
  ProblemData d = make_data(p);
  Fp8Cache cache = make_fp8_cache(p, d, DType::kFp8E4M3, [](int h) { return 1.f + h; });  // the CPU pool
  KVStorage gpu;
  ASSERT_TRUE(KVStorage::create(Device::kCUDA, cache.storage.shape(), &gpu).ok());
  ASSERT_TRUE(gpu.set_scales(0, cache.storage.k_scales(0), cache.storage.v_scales(0)).ok());
  std::vector<int64_t> slots;
  for (size_t b = 0; b < p.seqs.size(); ++b)
    for (int64_t j = 0; j < p.seqs[b].k_len; ++j)
      slots.push_back(int64_t{d.block_table[b * d.table_stride + j / p.block_size]} * p.block_size + j % p.block_size);
  DeviceBuffer dk = to_device(d.k_buf), dv = to_device(d.v_buf), ds = to_device(slots);
  ASSERT_TRUE(gpu.append(0, 1, p.dtype, dk.get(), dv.get(), ds.as<int64_t>(), static_cast<int64_t>(slots.size())).ok());
  const Reference ref = reference(p, cache.dequantized);
  Outputs cpu = make_outputs(p);
  DecodeParams cp = decode_params(p, d, cpu);
  cp.pages = view_of(cache.storage, d);
  ASSERT_TRUE(decode(cp).ok());
  DeviceProblem g = upload(p, d);
  Outputs host = make_outputs(p);
  DecodeParams dp = device_decode_params(p, d, host, g);
  dp.pages = gpu.view(0, g.block_table.as<int32_t>(), d.table_stride, g.seq_lens.as<int32_t>());
  DeviceBuffer ws;
  configure_splits(dp, p, d, 0, 0, ws);
  const Status st = decode(dp, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  FS_ASSERT_CUDA(cudaDeviceSynchronize());
  const Outputs out = download_outputs(p, g);
  EXPECT_EQ(compare_outputs(p, out, cpu, 2.0, 2 * ref.p_rounding_err), "");
}

}  // namespace
}  // namespace flashserve::test
