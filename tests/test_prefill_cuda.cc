// CUDA varlen prefill (label gpu): against the float64 reference and the CPU path over the
// CPU tests' grid (odd lengths in mixed packed batches, GQA 21/3, window, ALiBi, softcap,
// packed and paged), outputs poisoned first; NaN never passes. Every case runs on every
// kernel: on sm_90 the warp-specialized TMA one (in each of its variants: check_problem) and
// v3's wgmma one, everywhere the mma.sync one (Ampere's), selected through
// FLASHSERVE_PREFILL_KERNEL, and compared with each other.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "attention/cuda/prefill_cuda.h"
#include "attention/prefill.h"
#include "tests/cuda_support.h"

namespace flashserve::test {
namespace {

const int kLens[] = {1, 7, 77, 257, 1025};
#if FLASHSERVE_PREFILL_HD256
constexpr bool kHeadDim256Built = true;
#else
constexpr bool kHeadDim256Built = false;
#endif

Outputs run_gpu(const Problem& p, ProblemData& d, Status* st) {
  DeviceProblem g = upload(p, d);
  Outputs host = make_outputs(p);
  PrefillParams pp = device_prefill_params(p, d, host, g);
  *st = prefill(pp, nullptr);
  const cudaError_t err = cudaDeviceSynchronize();
  EXPECT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
  return download_outputs(p, g);
}

// Selects the kernel for the calls that follow ("mma", "wgmma" or "ws").
void use_kernel(const char* which) { setenv("FLASHSERVE_PREFILL_KERNEL", which, 1); }

// Whether the wgmma kernel runs on this device (sm_90); elsewhere only mma.sync is checked.
bool probe_wgmma() {
  use_kernel("wgmma");
  Problem p;
  p.num_heads = p.num_kv_heads = 1;
  p.head_dim = 64;
  p.dtype = DType::kBFloat16;
  p.seqs = {{3, 3}};
  ProblemData d = make_data(p);
  Status st;
  run_gpu(p, d, &st);
  if (!st.ok()) std::printf("[  NOTE    ] the wgmma kernel does not run here (%s): mma.sync only\n", st.to_string().c_str());
  return st.ok();
}
bool wgmma_runs() {
  static const bool runs = probe_wgmma();
  return runs;
}

void check_problem(const Problem& p) {
  ProblemData d = make_data(p);
  const bool sm90 = wgmma_runs();
  Status st;
  use_kernel("mma");
  Outputs mma = run_gpu(p, d, &st);
  ASSERT_TRUE(st.ok()) << st.to_string() << "\n  case: " << p.describe();
  const Reference ref = reference(p, d);
  const Tolerance tol = gpu_tolerance(p, ref);
  EXPECT_EQ(compare(p, mma, ref, tol), "") << "mma.sync kernel";
  Outputs cpu = make_outputs(p);
  PrefillParams cp = prefill_params(p, d, cpu);
  ASSERT_TRUE(prefill(cp).ok());
  EXPECT_EQ(compare_outputs(p, mma, cpu, 2.0, 2 * ref.p_rounding_err), "") << "mma.sync vs CPU";
  if (!sm90) return;
  // The warp-specialized kernel runs under the overrides that pick its variants (each read at
  // every call): at d 128 both key tiles (FLASHSERVE_PREFILL_WS_BLOCK_N 128 and the wide 176; the
  // default picks one by the mask), at d 64 the three row tiles (FLASHSERVE_PREFILL_WS_BLOCK_M 192,
  // 128 and 64), and once with a work order of 5-pair sections
  // (FLASHSERVE_PREFILL_WS_SECTION: the last one short; the default makes a small problem one
  // section). Paged K/V come by the row gather (its own instance, WsKv::kPages), at every page
  // size (16-bit pages of 128 tokens or more on the 128-key tile without a logit transform by TMA
  // page boxes, WsKv::kPageBoxes); packed or paged, once on a persistent grid
  // (FLASHSERVE_PREFILL_WS_PERSISTENT=1: CTAs that walk several items carry the ring's stages
  // across them) by the dynamic walk or the
  // static one (FLASHSERVE_PREFILL_WS_SCHED, by the seed's parity), and once one CTA an item
  // (PERSISTENT=0: what a graph capture runs). At d 256 there is no v3 kernel ("wgmma" takes
  // the warp-specialized one).
  struct Run {
    const char* kernel;
    std::vector<std::pair<const char*, const char*>> env;
    bool paged_only = false;  // the same as another run without pages
  };
  std::vector<Run> runs;
  if (p.head_dim == 64)
    runs = {{"wgmma", {}},
            {"ws", {{"FLASHSERVE_PREFILL_WS_BLOCK_M", "192"}, {"FLASHSERVE_PREFILL_WS_SECTION", "5"}}},
            {"ws", {{"FLASHSERVE_PREFILL_WS_BLOCK_M", "128"}}},
            // The 128-row tile on a 3-CTA persistent grid.
            {"ws",
             {{"FLASHSERVE_PREFILL_WS_BLOCK_M", "128"},
              {"FLASHSERVE_PREFILL_WS_PERSISTENT", "1"},
              {"FLASHSERVE_PREFILL_WS_GRID", "3"}}},
            // The 64-row tile (one consumer warpgroup, two CTAs an SM), one CTA an item and on a
            // persistent grid of 2 or 6 CTAs (GRID counts SMs) by the dynamic or the static walk.
            {"ws", {{"FLASHSERVE_PREFILL_WS_BLOCK_M", "64"}, {"FLASHSERVE_PREFILL_WS_PERSISTENT", "0"}}},
            {"ws",
             {{"FLASHSERVE_PREFILL_WS_BLOCK_M", "64"},
              {"FLASHSERVE_PREFILL_WS_PERSISTENT", "1"},
              {"FLASHSERVE_PREFILL_WS_GRID", p.seed % 3 == 0 ? "1" : "3"},
              {"FLASHSERVE_PREFILL_WS_SCHED", p.seed % 2 ? "static" : "dynamic"},
              {"FLASHSERVE_PREFILL_WS_SECTION", "5"}}}};
  if (p.head_dim == 128)
    runs = {{"wgmma", {}},
            {"ws", {{"FLASHSERVE_PREFILL_WS_BLOCK_N", "128"}}},
            {"ws", {{"FLASHSERVE_PREFILL_WS_BLOCK_N", "176"}, {"FLASHSERVE_PREFILL_WS_SECTION", "5"}}},
            // The row gather's 176-key tile (a lane stages two rows a tile) on a 3-CTA persistent grid.
            {"ws",
             {{"FLASHSERVE_PREFILL_WS_BLOCK_N", "176"},
              {"FLASHSERVE_PREFILL_WS_PERSISTENT", "1"},
              {"FLASHSERVE_PREFILL_WS_GRID", "3"}},
             true}};
  if (p.head_dim == 256) runs = {{"ws", {{"FLASHSERVE_PREFILL_WS_SECTION", "5"}}}};
  // Pages of 128 tokens or more by the row gather (FLASHSERVE_PREFILL_WS_PAGE_BOXES=0), which the
  // other runs on the 128-key tile take by TMA page boxes where there is no logit transform (the
  // 128-key pin matters at d 128 only).
  if (p.block_size >= 128 && p.head_dim != 256)
    runs.push_back({"ws", {{"FLASHSERVE_PREFILL_WS_PAGE_BOXES", "0"}, {"FLASHSERVE_PREFILL_WS_BLOCK_N", "128"}}, true});
  runs.push_back({"ws", {{"FLASHSERVE_PREFILL_WS_PERSISTENT", "0"}}});
  runs.push_back({"ws",
                  {{"FLASHSERVE_PREFILL_WS_PERSISTENT", "1"},
                   {"FLASHSERVE_PREFILL_WS_SCHED", p.seed % 2 ? "static" : "dynamic"},
                   {"FLASHSERVE_PREFILL_WS_SECTION", "5"}}});
  // On a persistent grid of 3 CTAs (FLASHSERVE_PREFILL_WS_GRID): each walks several items, items
  // without keys between (the grid above has a CTA an SM: on these small problems mostly one
  // item a CTA), by the dynamic and the static walk, packed or paged. Every third case on one
  // CTA, which walks every item: each Q slot reused with its last O store and Q load back to back.
  runs.push_back({"ws",
                  {{"FLASHSERVE_PREFILL_WS_PERSISTENT", "1"},
                   {"FLASHSERVE_PREFILL_WS_GRID", p.seed % 3 == 0 ? "1" : "3"},
                   {"FLASHSERVE_PREFILL_WS_SCHED", p.seed % 2 ? "dynamic" : "static"}}});
  // O from registers (FLASHSERVE_PREFILL_WS_TMA_O=0), where by default the instances with an O
  // buffer (d 64, d 128's paged 128-key ones) store a warpgroup's whole 64-row blocks by TMA, on a
  // 3-CTA grid (the buffer reused from item to item); every other case with every tile by the
  // consumers' general loop (FLASHSERVE_PREFILL_WS_PLAIN=0: no plain run).
  runs.push_back({"ws",
                  {{"FLASHSERVE_PREFILL_WS_TMA_O", "0"},
                   {"FLASHSERVE_PREFILL_WS_PERSISTENT", "1"},
                   {"FLASHSERVE_PREFILL_WS_GRID", "3"},
                   {"FLASHSERVE_PREFILL_WS_PLAIN", p.seed % 2 ? "0" : "1"}}});
  // One Q slot with O's buffer apart (FLASHSERVE_PREFILL_WS_Q_SLOTS=1, v4.17's walk), where by
  // default those instances load the next item's Q into the buffer's place while a warpgroup's O
  // goes into its rows of the slot its Q came in; on a 3-CTA grid, by the static or the dynamic walk.
  runs.push_back({"ws",
                  {{"FLASHSERVE_PREFILL_WS_Q_SLOTS", "1"},
                   {"FLASHSERVE_PREFILL_WS_PERSISTENT", "1"},
                   {"FLASHSERVE_PREFILL_WS_GRID", "3"},
                   {"FLASHSERVE_PREFILL_WS_SCHED", p.seed % 2 ? "static" : "dynamic"}}});
  // Batches whose q lengths differ walk only the q tiles that exist (WsVarlenOrder) on a
  // persistent grid, dynamic or static, in every run above that takes one; here the grid order,
  // which claims and skips the items past a sequence's queries (FLASHSERVE_PREFILL_WS_VARLEN=0),
  // by the walk the run above did not take.
  runs.push_back({"ws",
                  {{"FLASHSERVE_PREFILL_WS_PERSISTENT", "1"},
                   {"FLASHSERVE_PREFILL_WS_GRID", "3"},
                   {"FLASHSERVE_PREFILL_WS_VARLEN", "0"},
                   {"FLASHSERVE_PREFILL_WS_SCHED", p.seed % 2 ? "dynamic" : "static"}}});
  for (const Run& run : runs) {
    if (run.paged_only && p.block_size == 0) continue;
    use_kernel(run.kernel);
    std::string what = run.kernel;
    for (const auto& [var, val] : run.env) {
      setenv(var, val, 1);
      what += std::string(" ") + (var + std::strlen("FLASHSERVE_PREFILL_WS_")) + "=" + val;
    }
    Outputs gpu = run_gpu(p, d, &st);
    for (const auto& kv : run.env) unsetenv(kv.first);
    ASSERT_TRUE(st.ok()) << st.to_string() << "\n  case: " << p.describe();
    EXPECT_EQ(compare(p, gpu, ref, tol), "") << what << " kernel";
    EXPECT_EQ(compare_outputs(p, gpu, mma, 2.0, 2 * ref.p_rounding_err), "") << what << " vs mma.sync";
    EXPECT_EQ(compare_outputs(p, gpu, cpu, 2.0, 2 * ref.p_rounding_err), "") << what << " vs CPU";
  }
  // The plain tile run (prefill v4.20) computes for its tiles what the general loop computes:
  // the same bytes with it on and off (FLASHSERVE_PREFILL_WS_PLAIN=0).
  {
    use_kernel("ws");
    Outputs plain = run_gpu(p, d, &st);
    ASSERT_TRUE(st.ok()) << st.to_string() << "\n  case: " << p.describe();
    setenv("FLASHSERVE_PREFILL_WS_PLAIN", "0", 1);
    Outputs general = run_gpu(p, d, &st);
    unsetenv("FLASHSERVE_PREFILL_WS_PLAIN");
    ASSERT_TRUE(st.ok()) << st.to_string() << "\n  case: " << p.describe();
    EXPECT_EQ(std::memcmp(plain.o.data(), general.o.data(), plain.o.storage.size() * sizeof(double)), 0)
        << "o: the plain run against the general loop, case: " << p.describe();
    EXPECT_EQ(std::memcmp(plain.lse.data(), general.lse.data(), plain.lse.size() * sizeof(float)), 0)
        << "lse: the plain run against the general loop, case: " << p.describe();
  }
  unsetenv("FLASHSERVE_PREFILL_KERNEL");  // the default the server runs
}

// d 64's row tile rule (ws_tile_form), on the host (no device: it runs, not skips, in CI): 64 rows,
// two CTAs an SM, for the short rows' packed calls, 128 for the same rows paged, 192 for the
// others; the overrides (an A/B run's own value put back after).
TEST(PrefillWsRule, D64RowTiles) {
  const char* outer = std::getenv("FLASHSERVE_PREFILL_WS_BLOCK_M");
  const bool had = outer != nullptr;
  const std::string saved = had ? outer : "";
  unsetenv("FLASHSERVE_PREFILL_WS_BLOCK_M");
  PrefillParams p;
  p.head_dim = 64;
  p.num_heads = p.num_kv_heads = 32;
  auto rows = [&](int batch, int q_len, bool causal, bool paged) {
    p.batch = batch;
    p.max_seqlen_q = q_len;
    p.total_q = p.total_k = static_cast<int64_t>(batch) * q_len;
    p.mask.causal = causal;
    p.paged = paged;
    return cuda::prefill_ws_tile_rows(p);
  };
  EXPECT_EQ(rows(16, 1024, true, false), 64);    // 16x1k causal
  EXPECT_EQ(rows(4, 4096, true, false), 64);     // 4x4k causal: mean keys under 8k
  EXPECT_EQ(rows(1, 16384, true, false), 192);   // 1x16k causal
  EXPECT_EQ(rows(2, 8192, true, false), 192);    // mean keys 8k: not short
  EXPECT_EQ(rows(16, 1024, true, true), 128);    // paged: the row gather's 128
  EXPECT_EQ(rows(64, 300, false, false), 64);    // non-causal, at most 1024 queries
  EXPECT_EQ(rows(16, 1024, false, true), 128);
  EXPECT_EQ(rows(8, 2048, false, false), 192);   // non-causal, longer queries
  EXPECT_EQ(rows(15, 1025, false, false), 192);
  p.mask.window_left = 256;                      // a window: the long tile
  EXPECT_EQ(rows(16, 1024, false, false), 192);
  EXPECT_EQ(rows(16, 1024, true, false), 192);
  p.mask.window_left = -1;
  p.total_k = 0;  // paged without the keys' hint: long
  p.paged = true;
  p.mask.causal = true;
  EXPECT_EQ(cuda::prefill_ws_tile_rows(p), 192);
  for (const char* force : {"64", "128", "192"}) {
    setenv("FLASHSERVE_PREFILL_WS_BLOCK_M", force, 1);
    EXPECT_EQ(rows(1, 16384, true, true), std::atoi(force)) << force;
    EXPECT_EQ(rows(16, 1024, false, false), std::atoi(force)) << force;
  }
  EXPECT_EQ(cuda::prefill_ws_key_tile(p), 128);  // every d 64 tile: 128 keys
  p.head_dim = 128;                              // (the override is d 64's)
  EXPECT_EQ(rows(16, 1024, true, false), 128);
  unsetenv("FLASHSERVE_PREFILL_WS_BLOCK_M");
  EXPECT_EQ(rows(16, 1024, true, false), 128);
  p.head_dim = 96;
  EXPECT_EQ(rows(16, 1024, true, false), 0);
  if (had) setenv("FLASHSERVE_PREFILL_WS_BLOCK_M", saved.c_str(), 1);
}

class PrefillCudaGrid : public ::testing::TestWithParam<std::tuple<int, int, int, bool, int>> {};

TEST_P(PrefillCudaGrid, MatchesReferenceAndCpu) {
  FS_SKIP_WITHOUT_CUDA();
  const auto params = GetParam();
  const int heads_i = std::get<0>(params), dim_i = std::get<1>(params), dtype_i = std::get<2>(params);
  const bool causal = std::get<3>(params);
  const int layout = std::get<4>(params);
  const int heads[4][2] = {{1, 1}, {8, 2}, {32, 8}, {21, 3}};
  Problem p;
  p.num_heads = heads[heads_i][0];
  p.num_kv_heads = heads[heads_i][1];
  p.head_dim = dim_i == 0 ? 64 : 128;
  p.dtype = dtype_i == 0 ? DType::kFloat16 : DType::kBFloat16;
  p.causal = causal;
  p.block_size = layout == 0 ? 0 : (layout == 1 ? 16 : 64);
  const int index = (((heads_i * 2 + dim_i) * 2 + dtype_i) * 2 + causal) * 3 + layout;
  p.seed = 7000 + index;
  for (int j = 0; j < 4; ++j) {
    const int pair = (index * 4 + j * 7) % 25;
    int q = kLens[pair / 5], k = kLens[pair % 5];
    if (p.block_size > 0 && q > k) std::swap(q, k);  // paged: the queries are the sequence's tail
    p.seqs.push_back({q, k});
  }
  check_problem(p);
}

INSTANTIATE_TEST_SUITE_P(Gpu, PrefillCudaGrid,
                         ::testing::Combine(::testing::Range(0, 4), ::testing::Range(0, 2), ::testing::Range(0, 2),
                                            ::testing::Bool(), ::testing::Range(0, 3)));

TEST(PrefillCuda, MaskOptions) {
  FS_SKIP_WITHOUT_CUDA();
  struct Opt {
    bool causal;
    int wl, wr;
    bool alibi;
    float softcap;
  };
  const Opt opts[] = {{false, 32, -1, false, 0}, {false, 17, 9, false, 0}, {true, 40, -1, false, 0},
                      {true, 0, -1, false, 0},   {false, -1, -1, true, 0}, {true, -1, -1, true, 0},
                      {false, -1, -1, false, 5}, {true, -1, -1, false, 30}, {true, 50, -1, true, 20}};
  // d 128 first (seeds 900..917 as before), then d 64, in bf16, then both in fp16: the calls
  // with softcap or ALiBi take the instances with the transform's code and the others those
  // without (prefill_ws_split_logits), each in both dtypes.
  int seed = 900;
  constexpr int kOpts = sizeof(opts) / sizeof(opts[0]);
  for (int i = 0; i < 4 * kOpts; ++i) {
    const Opt& o = opts[i % kOpts];
    const int head_dim = (i / kOpts) % 2 == 0 ? 128 : 64;
    for (int bs : {0, 16}) {
      Problem p;
      p.num_heads = 21;
      p.num_kv_heads = 3;
      p.head_dim = head_dim;
      p.dtype = i < 2 * kOpts ? DType::kBFloat16 : DType::kFloat16;
      p.causal = o.causal;
      p.window_left = o.wl;
      p.window_right = o.wr;
      p.alibi = o.alibi;
      p.softcap = o.softcap;
      p.block_size = bs;
      p.seed = seed++;
      p.seqs = {{77, 257}, {1, 7}, {7, 7}, {130, 300}, {64, 64}, {200, 200}};
      check_problem(p);
    }
  }
}

TEST(PrefillCuda, FullyMaskedRowsAndLongSequences) {
  FS_SKIP_WITHOUT_CUDA();
  Problem p;
  p.num_heads = 32;
  p.num_kv_heads = 8;
  p.head_dim = 128;
  p.dtype = DType::kBFloat16;
  p.causal = true;
  p.seqs = {{9, 3}, {2048, 2048}, {100, 0}, {1, 3000}};  // q > k: rows with no key
  check_problem(p);
}

// Varlen batches whose q lengths are far apart (one long sequence among short ones, a sequence
// without queries, one query), packed and paged, every head dim, both masks, and batches of
// more sequences than a persistent CTA caches (PrefillWsTraits::kSeqCache: 257 at d 64 and in
// d 128's pages, 162 in d 256's packed instances: their views then read the offsets from global
// memory, and the varlen walk keeps only its q tile prefix in shared memory, up to 3·kSeqCache - 1
// sequences, past that the grid order; d 128's packed 128-key instance caches 159, its 176-key
// one 257, so a packed batch of 200 runs both ways, and one of 500 takes the grid order on the
// 128-key tile, whose prefix holds 476). The dynamic walk takes only the q tiles that exist
// (WsVarlenOrder). Every run of check_problem, against the reference, mma.sync and the CPU.
TEST(PrefillCuda, SkewedVarlenBatches) {
  FS_SKIP_WITHOUT_CUDA();
  int seed = 1600;
  for (int dim : {64, 128, 256}) {
    if (dim == 256 && !kHeadDim256Built) continue;
    for (int bs : {0, 16}) {
      Problem p;
      p.num_heads = 6;
      p.num_kv_heads = 2;
      p.head_dim = dim;
      p.dtype = bs ? DType::kBFloat16 : DType::kFloat16;
      p.causal = (seed % 2) == 0;
      p.block_size = bs;
      p.seed = seed++;
      p.seqs = {{1, 7}, {1100, 1100}, {0, 5}, {7, 7}, {130, 300}, {1, 1}, {257, 1025}, {64, 64}, {3, 40}};
      check_problem(p);
    }
  }
  // More sequences than the cache: 300 (d 128, 16-token pages), 200 (d 128 packed, causal and
  // not), 500 (d 128 packed: past the varlen walk's prefix too), 170 (d 256 packed), lengths 1 to 40.
  struct Big {
    int dim, block_size, seqs;
    bool causal;
  };
  for (const Big& c : {Big{128, 16, 300, true}, Big{128, 0, 200, true}, Big{128, 0, 200, false}, Big{128, 0, 500, true},
                      Big{256, 0, 170, true}}) {
    if (c.dim == 256 && !kHeadDim256Built) continue;
    Problem p;
    p.num_heads = 4;
    p.num_kv_heads = 1;
    p.head_dim = c.dim;
    p.dtype = DType::kBFloat16;
    p.causal = c.causal;
    p.block_size = c.block_size;
    p.seed = seed++;
    for (int i = 0; i < c.seqs; ++i) {
      const int q = 1 + (i * 37) % 40;
      p.seqs.push_back({q, q + (i * 11) % 9});
    }
    check_problem(p);
  }
}

// One call of p captured into a graph and replayed `replays` times, the outputs poisoned before
// each replay, against the reference and, byte for byte, against the eager call (the same tiles by
// the dynamic walk on the same grid).
void check_captured(const Problem& p, int replays) {
  ProblemData d = make_data(p);
  const Reference ref = reference(p, d);
  const Tolerance tol = gpu_tolerance(p, ref);
  Status st;
  const Outputs eager = run_gpu(p, d, &st);
  ASSERT_TRUE(st.ok()) << st.to_string() << "\n  case: " << p.describe();
  DeviceProblem g = upload(p, d);
  Outputs host = make_outputs(p);
  const PrefillParams pp = device_prefill_params(p, d, host, g);
  cudaStream_t stream;
  FS_ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  FS_ASSERT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  st = prefill(pp, stream);
  FS_ASSERT_CUDA(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(st.ok()) << st.to_string() << "\n  case: " << p.describe();
  FS_ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < replays; ++replay) {
    FS_ASSERT_CUDA(cudaMemsetAsync(g.o.get(), 0xff, g.o.bytes(), stream));
    FS_ASSERT_CUDA(cudaMemsetAsync(g.lse.get(), 0xff, g.lse.bytes(), stream));
    FS_ASSERT_CUDA(cudaGraphLaunch(exec, stream));
    FS_ASSERT_CUDA(cudaStreamSynchronize(stream));
    const Outputs out = download_outputs(p, g);
    EXPECT_EQ(compare(p, out, ref, tol), "") << "replay " << replay << ", case: " << p.describe();
    EXPECT_EQ(std::memcmp(out.o.data(), eager.o.data(), out.o.storage.size() * sizeof(double)), 0)
        << "o: the replay against the eager call, case: " << p.describe();
    EXPECT_EQ(std::memcmp(out.lse.data(), eager.lse.data(), out.lse.size() * sizeof(float)), 0)
        << "lse: the replay against the eager call, case: " << p.describe();
  }
  FS_ASSERT_CUDA(cudaGraphExecDestroy(exec));
  FS_ASSERT_CUDA(cudaGraphDestroy(graph));
  FS_ASSERT_CUDA(cudaStreamDestroy(stream));
}

// Calls captured into a graph (a mixed step's): by default the dynamic walk on counters of the
// graph's own (prefill v4.41, prefill_cuda.cu; two replays: the first leaves them at zero for the
// second); the FLASHSERVE_PREFILL_WS_CAPTURED_SCHED=0 rounds without them, as v4.40: the static
// walk on a persistent grid, causal rows by zigzag units, and with FLASHSERVE_PREFILL_WS_ZIGZAG=0
// too v4.39's rule (batches whose q lengths differ, calls without a causal mask and d 64's 64-
// and 128-row tiles the static walk by round robin, the others one CTA an item). Packed and in
// 16-token pages; on the full grid and on a grid of 3 SMs' CTAs (FLASHSERVE_PREFILL_WS_GRID) with
// PERSISTENT=1, where every launch walks several items (on the full grid these small calls have
// about an item a CTA). Each case by check_captured, two replays.
TEST(PrefillCuda, CapturedCalls) {
  FS_SKIP_WITHOUT_CUDA();
  unsetenv("FLASHSERVE_PREFILL_KERNEL");  // the default the server runs
  int seed = 1700;
  struct Round {
    const char* grid;
    const char* zigzag;
    const char* counters;
  };
  for (const Round round : {Round{nullptr, nullptr, nullptr}, Round{"3", nullptr, nullptr}, Round{nullptr, nullptr, "0"},
                            Round{nullptr, "0", "0"}, Round{"3", nullptr, "0"}, Round{"3", "0", "0"}}) {
    const ScopedEnv cap("FLASHSERVE_PREFILL_WS_GRID", round.grid);
    const ScopedEnv persistent("FLASHSERVE_PREFILL_WS_PERSISTENT", round.grid != nullptr ? "1" : nullptr);
    const ScopedEnv zigzag("FLASHSERVE_PREFILL_WS_ZIGZAG", round.zigzag);
    const ScopedEnv counters("FLASHSERVE_PREFILL_WS_CAPTURED_SCHED", round.counters);
    for (int dim : {64, 128}) {
      for (int bs : {0, 16}) {
        for (bool ragged : {true, false}) {
          for (bool causal : {true, false}) {
            Problem p;
            p.num_heads = 6;
            p.num_kv_heads = 2;
            p.head_dim = dim;
            p.dtype = DType::kBFloat16;
            p.causal = causal;
            p.block_size = bs;
            p.seed = seed++;
            if (ragged) {
              p.seqs = {{1100, 1100}, {7, 7}, {130, 300}, {1, 1}, {257, 1025}, {64, 64}, {3, 40}};
              for (int i = 0; i < 40; ++i) p.seqs.push_back({1 + (i * 37) % 90, 1 + (i * 37) % 90 + i % 5});
            } else {
              p.seqs = {{333, 333}, {333, 333}, {333, 400}};
            }
            check_captured(p, 2);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// The captured static walk (FLASHSERVE_PREFILL_WS_CAPTURED_SCHED=0, v4.40's path: no counters) on
// a grid of 3 SMs' CTAs, where every CTA walks several items one after the other in the same
// shared memory: by zigzag units and, with FLASHSERVE_PREFILL_WS_ZIGZAG=0, by round robin; d 64
// and d 128, packed and in 16-token pages, a ragged causal batch and a uniform non-causal one; one
// replay each. CapturedCalls' rounds in small: 32 launches (the eager call and one replay a
// case), few enough for compute-sanitizer's racecheck (CapturedCalls' 96 captured cases did not
// finish there in 300 s, session 57).
TEST(PrefillCuda, CapturedStaticWalk) {
  FS_SKIP_WITHOUT_CUDA();
  if (!wgmma_runs()) GTEST_SKIP() << "the warp-specialized kernel (sm_90a) does not run on this device";
  unsetenv("FLASHSERVE_PREFILL_KERNEL");
  const ScopedEnv counters("FLASHSERVE_PREFILL_WS_CAPTURED_SCHED", "0");
  const ScopedEnv cap("FLASHSERVE_PREFILL_WS_GRID", "3");
  const ScopedEnv persistent("FLASHSERVE_PREFILL_WS_PERSISTENT", "1");
  int seed = 1800;
  for (const char* zigzag : {static_cast<const char*>(nullptr), "0"}) {
    const ScopedEnv zz("FLASHSERVE_PREFILL_WS_ZIGZAG", zigzag);
    for (int dim : {64, 128}) {
      for (int bs : {0, 16}) {
        for (bool causal : {true, false}) {
          Problem p;
          p.num_heads = 4;
          p.num_kv_heads = 2;
          p.head_dim = dim;
          p.dtype = DType::kBFloat16;
          p.causal = causal;
          p.block_size = bs;
          p.seed = seed++;
          if (causal) {
            p.seqs = {{300, 300}, {5, 9}, {129, 260}, {1, 1}, {70, 70}};
          } else {
            p.seqs = {{200, 200}, {200, 200}, {200, 231}};
          }
          check_captured(p, 1);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Captured launches' own counters (the default, where the warp-specialized kernel runs): a graph
// of three calls holds three pairs, the executable graph keeps them after the graph is gone, and
// they come back when it goes too (the user objects' destructors run asynchronously: the count
// polled until it settles, up to 5 s, before and after);
// the replays in between, on a 3-SM grid (several items a CTA, so the dynamic walk claims), match
// the reference, and a second graph captured while the first exists takes other pairs and matches
// it too.
TEST(PrefillCuda, CapturedCallsOwnTheirCounters) {
  FS_SKIP_WITHOUT_CUDA();
  if (!wgmma_runs()) GTEST_SKIP() << "the warp-specialized kernel (sm_90a) does not run on this device";
  unsetenv("FLASHSERVE_PREFILL_KERNEL");
  const ScopedEnv counters("FLASHSERVE_PREFILL_WS_CAPTURED_SCHED", nullptr);
  const ScopedEnv cap("FLASHSERVE_PREFILL_WS_GRID", "3");
  Problem p;
  p.num_heads = 6;
  p.num_kv_heads = 2;
  p.head_dim = 128;
  p.dtype = DType::kBFloat16;
  p.causal = true;
  p.block_size = 16;
  p.seed = 1790;
  p.seqs = {{700, 700}, {5, 9}, {260, 300}, {1, 1}, {129, 129}};
  ProblemData d = make_data(p);
  const Reference ref = reference(p, d);
  const Tolerance tol = gpu_tolerance(p, ref);
  DeviceProblem g = upload(p, d);
  Outputs host = make_outputs(p);
  const PrefillParams pp = device_prefill_params(p, d, host, g);
  cudaStream_t stream;
  FS_ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // The count once the destructors of graphs gone before have run: `want`, or (want < 0: the
  // graphs CapturedCalls left) unchanged over 100 ms; its value after 5 s otherwise.
  auto settled = [](int want) {
    int n = cuda::prefill_ws_captured_pairs_in_use();
    for (int i = 0, same = 0; i < 500 && n != want && (want >= 0 || same < 10); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const int m = cuda::prefill_ws_captured_pairs_in_use();
      same = m == n ? same + 1 : 0;
      n = m;
    }
    return n;
  };
  FS_ASSERT_CUDA(cudaDeviceSynchronize());
  const int before = settled(-1);
  auto capture = [&](cudaGraph_t* graph) {
    FS_ASSERT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    Status st;
    for (int i = 0; i < 3 && st.ok(); ++i) st = prefill(pp, stream);
    FS_ASSERT_CUDA(cudaStreamEndCapture(stream, graph));
    ASSERT_TRUE(st.ok()) << st.to_string();
  };
  auto replay = [&](cudaGraphExec_t exec, const char* what) {
    for (int r = 0; r < 3; ++r) {
      FS_ASSERT_CUDA(cudaMemsetAsync(g.o.get(), 0xff, g.o.bytes(), stream));
      FS_ASSERT_CUDA(cudaMemsetAsync(g.lse.get(), 0xff, g.lse.bytes(), stream));
      FS_ASSERT_CUDA(cudaGraphLaunch(exec, stream));
      FS_ASSERT_CUDA(cudaStreamSynchronize(stream));
      EXPECT_EQ(compare(p, download_outputs(p, g), ref, tol), "") << what << ", replay " << r;
    }
  };
  cudaGraph_t graph = nullptr, graph2 = nullptr;
  cudaGraphExec_t exec = nullptr, exec2 = nullptr;
  capture(&graph);
  if (HasFatalFailure()) return;
  EXPECT_EQ(cuda::prefill_ws_captured_pairs_in_use(), before + 3);
  FS_ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  FS_ASSERT_CUDA(cudaGraphDestroy(graph));
  EXPECT_EQ(cuda::prefill_ws_captured_pairs_in_use(), before + 3) << "the executable graph holds the pairs";
  replay(exec, "first graph");
  if (HasFatalFailure()) return;
  capture(&graph2);
  if (HasFatalFailure()) return;
  EXPECT_EQ(cuda::prefill_ws_captured_pairs_in_use(), before + 6);
  FS_ASSERT_CUDA(cudaGraphInstantiate(&exec2, graph2, 0));
  replay(exec2, "second graph");
  replay(exec, "first graph again");
  if (HasFatalFailure()) return;
  FS_ASSERT_CUDA(cudaGraphExecDestroy(exec));
  FS_ASSERT_CUDA(cudaGraphExecDestroy(exec2));
  FS_ASSERT_CUDA(cudaGraphDestroy(graph2));
  FS_ASSERT_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(settled(before), before) << "pairs given back when the graphs are gone";
  FS_ASSERT_CUDA(cudaStreamDestroy(stream));
}

// The status of one small call (4 heads over 2, one 7×7 sequence) with this head_dim and dtype.
Status status_of_small_call(int head_dim, DType dtype) {
  Problem p;
  p.num_heads = 4;
  p.num_kv_heads = 2;
  p.head_dim = head_dim;
  p.dtype = dtype;
  p.seqs = {{7, 7}};
  ProblemData d = make_data(p);
  Status st;
  run_gpu(p, d, &st);
  return st;
}

// Pages of every power-of-two size the kernels take, 1 to 256 (scattered ids, NaN in free
// slots), both head dims, in the project's one pool and in K and V pools apart, against the
// reference and across the two kernels.
TEST(PrefillCuda, PageSizesOneTo256) {
  FS_SKIP_WITHOUT_CUDA();
  int seed = 1300;
  for (int bs : {1, 2, 8, 32, 128, 256}) {
    for (bool separate : {false, true}) {
      Problem p;
      p.separate_pools = separate;
      p.num_heads = 21;
      p.num_kv_heads = 3;
      p.head_dim = bs % 4 == 0 ? 128 : 64;
      p.dtype = (bs / 2) % 2 ? DType::kFloat16 : DType::kBFloat16;
      p.causal = bs != 32;
      p.block_size = bs;
      p.seed = seed++;
      p.seqs = {{77, 257}, {1, 7}, {130, 300}, {64, 64}, {200, 1025}};
      check_problem(p);
    }
  }
}

// Pages of 128 and 256 tokens, which the 128-key tile takes by TMA page boxes where there is no
// logit transform (the row gather for a sequence's last partial tile, and with softcap every tile;
// check_problem's runs also take them by the row gather): a window (tiles that start before a
// row's first visible key), softcap, both pools. GQA 8/2, sequences whose keys end on a 128-key
// tile's edge and inside it, the free slots NaN. Where sm_90a runs, asserts that the ws kernel
// takes the pages by boxes exactly where there is no softcap.
TEST(PrefillCuda, BigPages) {
  FS_SKIP_WITHOUT_CUDA();
  struct Case {
    int dim, block_size, window_left;
    bool causal, separate;
    float softcap;
    DType dtype;
  };
  const Case cases[] = {
      {128, 128, -1, false, false, 0, DType::kBFloat16}, {128, 256, -1, true, false, 0, DType::kFloat16},
      {128, 128, 200, true, true, 0, DType::kBFloat16},  {128, 256, -1, false, true, 30, DType::kBFloat16},
      {64, 128, -1, true, false, 0, DType::kBFloat16},   {64, 256, 150, false, false, 0, DType::kFloat16},
      {64, 128, -1, false, true, 20, DType::kFloat16}};
  uint64_t seed = 1500;
  for (const Case& c : cases) {
    Problem p;
    p.num_heads = 8;
    p.num_kv_heads = 2;
    p.head_dim = c.dim;
    p.dtype = c.dtype;
    p.causal = c.causal;
    p.window_left = c.window_left;
    p.softcap = c.softcap;
    p.block_size = c.block_size;
    p.separate_pools = c.separate;
    p.seed = seed++;
    p.seqs = {{300, 300}, {1, 128}, {128, 256}, {77, 1025}, {5, 129}, {200, 640}, {1, 1}};
    if (wgmma_runs()) {
      ProblemData d = make_data(p);
      DeviceProblem g = upload(p, d);
      Outputs host = make_outputs(p);
      EXPECT_EQ(cuda::prefill_ws_page_boxes(device_prefill_params(p, d, host, g)), c.softcap == 0)
          << "case: " << p.describe();
    }
    check_problem(p);
  }
}

// Head dim 256: a build option (FLASHSERVE_PREFILL_HD256); without it a clear kUnsupported.
TEST(PrefillCuda, HeadDim256) {
  FS_SKIP_WITHOUT_CUDA();
#if FLASHSERVE_PREFILL_HD256
  struct Opt {
    int heads, kv_heads;
    bool causal;
    int block_size, wl;
    bool alibi;
    float softcap;
    DType dtype;
  };
  const Opt opts[] = {{8, 2, false, 0, -1, false, 0, DType::kBFloat16}, {21, 3, true, 0, -1, false, 0, DType::kFloat16},
                      {8, 8, true, 16, -1, false, 0, DType::kBFloat16}, {21, 3, true, 64, 40, true, 20, DType::kBFloat16},
                      {4, 1, false, 16, 17, false, 5, DType::kFloat16}, {8, 2, true, 8, -1, false, 0, DType::kBFloat16},
                      {8, 2, false, 128, -1, false, 0, DType::kFloat16}, {9, 3, true, 1, -1, false, 0, DType::kBFloat16}};
  int seed = 1400;
  for (const Opt& o : opts) {
    Problem p;
    p.num_heads = o.heads;
    p.num_kv_heads = o.kv_heads;
    p.head_dim = 256;
    p.dtype = o.dtype;
    p.causal = o.causal;
    p.block_size = o.block_size;
    p.window_left = o.wl;
    p.alibi = o.alibi;
    p.softcap = o.softcap;
    p.seed = seed++;
    p.seqs = {{77, 257}, {1, 7}, {7, 7}, {130, 300}, {257, 1025}};
    check_problem(p);
  }
#else
  const Status st = status_of_small_call(256, DType::kBFloat16);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.to_string();
  EXPECT_NE(st.message().find("FLASHSERVE_PREFILL_HD256"), std::string::npos) << st.to_string();
#endif
}

// o not 16-byte aligned, one way at a time (the pointer 4 bytes off, rows of H·D + 2 elements,
// heads D + 2 apart): the warp-specialized kernel stores 4 bytes at a time there instead of 16,
// into exactly the values of the call with o packed (bit for bit: the same kernel otherwise),
// which is checked against the float64 reference; every element outside o's own stays as
// poisoned. K/V packed, and in pages.
TEST(PrefillCuda, OutputsNot16ByteAligned) {
  FS_SKIP_WITHOUT_CUDA();
  if (wgmma_runs()) use_kernel("ws");  // else the mma.sync kernel (4-byte stores) takes both calls
  int seed = 1500;
  for (int dim : {64, 128, 256}) {
    if (dim == 256 && !kHeadDim256Built) continue;
    for (int variant = 0; variant < 3; ++variant) {
      // Packed non-causal and causal, and causal in 16-token pages (d 128's paged instances have
      // the O buffer, the packed ones not: three stages).
      const bool causal = variant > 0;
      Problem p;
      p.num_heads = 6;
      p.num_kv_heads = 2;
      p.head_dim = dim;
      p.dtype = causal ? DType::kFloat16 : DType::kBFloat16;
      p.causal = causal;
      p.block_size = variant == 2 ? 16 : 0;
      p.seed = seed++;
      p.seqs = {{77, 257}, {1, 7}, {200, 200}, {130, 300}};
      ProblemData d = make_data(p);
      Status st;
      const Outputs packed = run_gpu(p, d, &st);
      ASSERT_TRUE(st.ok()) << st.to_string();
      const Reference ref = reference(p, d);
      EXPECT_EQ(compare(p, packed, ref, gpu_tolerance(p, ref)), "") << "d " << dim << ": the packed call";
      const uint16_t* want = static_cast<const uint16_t*>(packed.o.data());
      const int64_t H = p.num_heads, rows = p.total_q();
      struct Layout {
        const char* what;
        int64_t offset, row_stride, head_stride;  // elements
      };
      const Layout layouts[] = {{"o 4 bytes off", 2, H * dim, dim},
                                {"rows of H*D + 2", 0, H * dim + 2, dim},
                                {"heads D + 2 apart", 0, H * (dim + 2), dim + 2},
                                // Padded by 16 bytes: the TMA store of O (d 64, d 128's pages) with
                                // strides of its own, nothing written in the pads.
                                {"rows of H*D + 8", 0, H * dim + 8, dim},
                                {"heads D + 8 apart", 0, H * (dim + 8), dim + 8}};
      for (const Layout& l : layouts) {
        DeviceProblem g = upload(p, d);
        Outputs host = make_outputs(p);
        PrefillParams pp = device_prefill_params(p, d, host, g);
        const int64_t elems = l.offset + rows * l.row_stride;
        DeviceBuffer o(2 * elems);  // poisoned: 0xffff everywhere
        pp.o = o.as<uint16_t>() + l.offset;
        pp.o_row_stride = l.row_stride;
        pp.o_head_stride = l.head_stride;
        st = prefill(pp, nullptr);
        ASSERT_TRUE(st.ok()) << l.what << ": " << st.to_string();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<uint16_t> got(static_cast<size_t>(elems));
        o.download(got.data(), 2 * elems);
        std::vector<char> mine(got.size(), 0);
        int64_t bad = 0, stray = 0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t e = 0; e < dim; ++e) {
              const int64_t at = l.offset + r * l.row_stride + h * l.head_stride + e;
              mine[at] = 1;
              bad += got[at] != want[(r * H + h) * dim + e];
            }
        for (size_t i = 0; i < got.size(); ++i) stray += !mine[i] && got[i] != 0xffff;
        EXPECT_EQ(bad, 0) << "d " << dim << (causal ? " causal, " : ", ") << (p.block_size ? "pages, " : "") << l.what
                          << ": elements unlike the aligned call's";
        EXPECT_EQ(stray, 0) << "d " << dim << ", " << l.what << ": elements outside o written";
      }
    }
  }
  unsetenv("FLASHSERVE_PREFILL_KERNEL");
}

// A pool the row gather's 32-bit offsets (16-byte units) cannot reach, 64 GiB or more, takes v3's
// kernel (the warp-specialized one's paged path is the row gather only since v4.23): here a view
// that claims that many blocks, its pages all among the first ones. The same outputs, within
// the reference's tolerance, as the call over the true pool (the row gather).
TEST(PrefillCuda, PoolsBeyondTheRowGathersReach) {
  FS_SKIP_WITHOUT_CUDA();
  if (!wgmma_runs()) GTEST_SKIP() << "no sm_90 kernels here: the mma.sync kernel takes every pool";
  use_kernel("ws");
  int seed = 1600;
  for (int dim : {64, 128}) {
    Problem p;
    p.num_heads = 6;
    p.num_kv_heads = 2;
    p.head_dim = dim;
    p.dtype = dim == 64 ? DType::kFloat16 : DType::kBFloat16;
    p.causal = true;
    p.block_size = 16;
    p.seed = seed++;
    p.seqs = {{77, 257}, {130, 300}, {1025, 1025}};
    ProblemData d = make_data(p);
    const Reference ref = reference(p, d);
    Status st;
    const Outputs rows = run_gpu(p, d, &st);  // the row gather
    ASSERT_TRUE(st.ok()) << st.to_string();
    DeviceProblem g = upload(p, d);
    Outputs host = make_outputs(p);
    PrefillParams pp = device_prefill_params(p, d, host, g);
    const int64_t block_bytes = pp.pages.block_stride * 2;
    pp.pages.num_blocks = static_cast<int32_t>((int64_t{64} << 30) / block_bytes + 1);
    ASSERT_GT(pp.pages.num_blocks, d.num_blocks);
    st = prefill(pp, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const Outputs big = download_outputs(p, g);
    EXPECT_EQ(compare(p, big, ref, gpu_tolerance(p, ref)), "") << "d " << dim << ": a pool of 64 GiB";
    EXPECT_EQ(compare_outputs(p, big, rows, 2.0, 2 * ref.p_rounding_err), "") << "d " << dim << ": against the row gather";
  }
  unsetenv("FLASHSERVE_PREFILL_KERNEL");
}

TEST(PrefillCuda, UnsupportedShapesAreErrors) {
  FS_SKIP_WITHOUT_CUDA();
  Status st = status_of_small_call(80, DType::kBFloat16);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.to_string();
  st = status_of_small_call(64, DType::kFloat32);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.to_string();
}

}  // namespace
}  // namespace flashserve::test
