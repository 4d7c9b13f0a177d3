// CUDA split-K decode (label gpu): against the float64 reference and the CPU path, over the
// shapes of issue 4 (seq_lens 1, 15, 16, 17, 1000, 32769; mixed batches; pages 8..256;
// GQA 32/8, 28/4, 8/8, 64/8; scattered, non-monotonic block tables), outputs poisoned before
// each run; plus merge, CUDA-graph replay, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "attention/cuda/merge_cuda.h"
#include "attention/merge.h"
#include "common/cuda_device.h"
#include "decode/cuda/decode_cuda.h"
#include "decode/decode.h"
#include "decode/planner.h"
#include "tests/cuda_support.h"
#include "tests/delayed_copy.h"

namespace flashserve::test {
namespace {

struct GpuRun {
  Outputs out;
  Status status;
};

// Runs decode on the GPU with the given split count and chunk (configure_splits), poisoned
// outputs and workspace.
GpuRun run_gpu(const Problem& p, ProblemData& d, int32_t num_splits, int32_t pages_per_split) {
  DeviceProblem g = upload(p, d);
  Outputs host = make_outputs(p);
  DecodeParams dp = device_decode_params(p, d, host, g);
  DeviceBuffer ws;
  configure_splits(dp, p, d, num_splits, pages_per_split, ws);
  GpuRun r;
  r.status = validate_decode_lengths_host(decode_params(p, d, host));
  if (r.status.ok()) r.status = decode(dp, nullptr);
  const cudaError_t err = cudaDeviceSynchronize();
  EXPECT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
  r.out = download_outputs(p, g);
  return r;
}

// Reference and CPU decode once per problem; the GPU for three split choices, within
// gpu_tolerance (cuda_support.h).

// A problem with its data, float64 reference and tolerance, device copies, and decode params
// over them (dp points into g; not copyable).
struct GpuProblem {
  Problem p;
  ProblemData d;
  Reference ref;
  Tolerance tol;
  DeviceProblem g;
  Outputs host;
  DecodeParams dp;
  explicit GpuProblem(Problem problem)
      : p(std::move(problem)), d(make_data(p)), ref(reference(p, d)), tol(gpu_tolerance(p, ref)), g(upload(p, d)),
        host(make_outputs(p)), dp(device_decode_params(p, d, host, g)) {}
  GpuProblem(const GpuProblem&) = delete;
  GpuProblem& operator=(const GpuProblem&) = delete;

  // Poisons the outputs, runs dp, and compares with the reference ("" when they agree).
  std::string run_and_compare() {
    if (cudaMemset(g.o.get(), 0xff, g.o.bytes()) != cudaSuccess ||
        cudaMemset(g.lse.get(), 0xff, g.lse.bytes()) != cudaSuccess)
      return "cudaMemset failed";
    const Status st = decode(dp, nullptr);
    if (!st.ok()) return st.to_string();
    const cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) return cudaGetErrorString(err);
    return compare(p, download_outputs(p, g), ref, tol);
  }
};

// d: p's data; ref: its float64 reference (the layout of the pages does not change it).
void check_problem(const Problem& p, ProblemData& d, const Reference& ref) {
  const Tolerance tol = gpu_tolerance(p, ref);
  Outputs cpu = make_outputs(p);
  DecodeParams cp = decode_params(p, d, cpu);
  ASSERT_TRUE(decode(cp).ok());
  for (int32_t splits : {0, 1, 7}) {
    const int32_t chunk = splits == 0 ? 0 : std::max(1, (max_pages(p) + splits - 1) / splits);
    GpuRun g = run_gpu(p, d, splits, chunk);
    ASSERT_TRUE(g.status.ok()) << g.status.to_string();
    EXPECT_EQ(compare(p, g.out, ref, tol), "") << "splits " << splits;
    EXPECT_EQ(compare_outputs(p, g.out, cpu, 2.0, 2 * ref.p_rounding_err), "") << "GPU vs CPU, splits " << splits;
  }
}

void check_problem(const Problem& p) {
  ProblemData d = make_data(p);
  check_problem(p, d, reference(p, d));
}

struct GpuCase {
  int h, kv, dim, q_len, bs;
  DType dtype;
};

class DecodeCudaGrid : public ::testing::TestWithParam<GpuCase> {};

TEST_P(DecodeCudaGrid, MatchesReferenceAndCpu) {
  FS_SKIP_WITHOUT_CUDA();
  const GpuCase& c = GetParam();
  Problem p = decode_problem({1, 15, 16, 17, 1000, 4099}, c.q_len, c.h, c.kv, c.dim, c.dtype, c.bs,
                             c.h * 131 + c.q_len * 7 + c.bs);
  ProblemData d = make_data(p);
  const Reference ref = reference(p, d);
  check_problem(p, d, ref);  // the project's one pool
  p.separate_pools = true;   // the same keys in K and V pools apart
  ProblemData apart = make_data(p);
  check_problem(p, apart, ref);
}

INSTANTIATE_TEST_SUITE_P(
    Gpu, DecodeCudaGrid,
    ::testing::Values(GpuCase{32, 8, 128, 1, 16, DType::kBFloat16}, GpuCase{32, 8, 128, 1, 16, DType::kFloat16},
                      GpuCase{28, 4, 128, 1, 8, DType::kBFloat16}, GpuCase{8, 8, 128, 1, 32, DType::kFloat16},
                      GpuCase{64, 8, 128, 1, 64, DType::kBFloat16}, GpuCase{32, 8, 64, 1, 128, DType::kBFloat16},
                      GpuCase{32, 8, 128, 4, 256, DType::kBFloat16}, GpuCase{64, 8, 128, 8, 16, DType::kFloat16},
                      GpuCase{16, 1, 64, 3, 16, DType::kBFloat16}, GpuCase{8, 8, 64, 8, 8, DType::kFloat16},
                      // 12 rows a CTA (GQA 12; q_len 3 × GQA 4): fragment rows 8-11 live, 12-15 padding
                      GpuCase{24, 2, 128, 1, 16, DType::kBFloat16}, GpuCase{32, 8, 128, 3, 32, DType::kFloat16},
                      // 2 row blocks a kv head (q_len 8 × GQA 4; q_len 2 × GQA 12, the second block 8
                      // rows): launched in clusters of two CTAs (the 64/8 q8 case above: 4 row
                      // blocks, two clusters a head; 16/1 q3: 3, none)
                      GpuCase{32, 8, 128, 8, 16, DType::kBFloat16}, GpuCase{16, 4, 64, 8, 16, DType::kFloat16},
                      GpuCase{24, 2, 128, 2, 16, DType::kBFloat16}),
    [](const ::testing::TestParamInfo<GpuCase>& info) {
      const GpuCase& c = info.param;
      return "h" + std::to_string(c.h) + "_kv" + std::to_string(c.kv) + "_d" + std::to_string(c.dim) + "_q" +
             std::to_string(c.q_len) + "_page" + std::to_string(c.bs) + "_" + dtype_name(c.dtype);
    });

// Pages laid out token-major, [blocks, block_size, kv_heads, head_dim] (a key's heads side by
// side, a head's keys token_stride apart): the kernel reads any strides, and the first tiles'
// L2 prefetch takes its one-key-at-a-time path. Against the reference, splits 1 and 5.
TEST(DecodeCuda, TokenMajorPages) {
  FS_SKIP_WITHOUT_CUDA();
  GpuProblem t(decode_problem({1, 17, 300, 1000}, 2, 16, 4, 128, DType::kBFloat16, 16, 4242));
  const Problem& p = t.p;
  const int64_t elem = dtype_size(p.dtype), row = p.head_dim * elem;
  // K (V) from the problem's pool, whose element `offset` starts it, to [blocks, bs, Hkv, D].
  auto token_major = [&](int64_t offset) {
    Buffer out;
    out.resize(int64_t{t.d.num_blocks} * p.num_kv_heads * p.block_size * row);
    const char* src = static_cast<const char*>(t.d.pages.data()) + offset * elem;
    char* dst = static_cast<char*>(out.data());
    for (int64_t blk = 0; blk < t.d.num_blocks; ++blk)
      for (int64_t h = 0; h < p.num_kv_heads; ++h)
        for (int64_t tok = 0; tok < p.block_size; ++tok)
          std::memcpy(dst + ((blk * p.block_size + tok) * p.num_kv_heads + h) * row,
                      src + blk * t.d.block_stride * elem + (h * p.block_size + tok) * row, static_cast<size_t>(row));
    return out;
  };
  const DeviceBuffer k_pages = to_device(token_major(0)), v_pages = to_device(token_major(t.d.v_offset));
  t.dp.pages.k_pages = k_pages.get();
  t.dp.pages.v_pages = v_pages.get();
  t.dp.pages.token_stride = int64_t{p.num_kv_heads} * p.head_dim;
  t.dp.pages.head_stride = p.head_dim;
  t.dp.pages.block_stride = int64_t{p.block_size} * p.num_kv_heads * p.head_dim;
  for (int32_t splits : {1, 5}) {
    DeviceBuffer ws;
    configure_splits(t.dp, p, t.d, splits, (max_pages(p) + splits - 1) / splits, ws);
    EXPECT_EQ(t.run_and_compare(), "") << "splits " << splits;
  }
}

TEST(DecodeCuda, LongContext32769) {
  FS_SKIP_WITHOUT_CUDA();
  check_problem(decode_problem({32769, 1000}, 1, 32, 8, 128, DType::kBFloat16, 16, 32769));
}

TEST(DecodeCuda, MaskOptions) {
  FS_SKIP_WITHOUT_CUDA();
  for (int variant = 0; variant < 3; ++variant) {
    Problem p = decode_problem({3, 77, 300, 1025}, 2, 16, 4, 128, DType::kBFloat16, 16, 900 + variant);
    if (variant == 0) p.window_left = 100;
    if (variant == 1) p.alibi = true;
    if (variant == 2) p.softcap = 10.f;
    check_problem(p);
  }
}

// Merge on the GPU equals merge on the CPU: few and many states (a warp a row up to 12 states at
// head_dim <= 128 and 6 above, the edges of that on both sides; more than one round of a warp's
// loads), head_dim 64/128/256 and odd ones, row counts that are not multiples of the 4 rows a CTA
// takes, a row whose states are all empty. bf16 out by merge_states; fp32 out (a tight check of
// the weights) launched as decode launches it, a programmatic dependent, whose first CTAs run the
// merge once dry before their wait.
TEST(DecodeCuda, MergeStatesMatchesCpu) {
  FS_SKIP_WITHOUT_CUDA();
  for (auto [S, rows, D] : {std::tuple{5, 333, 128}, std::tuple{45, 37, 128}, std::tuple{3, 29, 256},
                            std::tuple{70, 19, 64}, std::tuple{33, 23, 80}, std::tuple{1, 7, 200},
                            std::tuple{12, 41, 128}, std::tuple{13, 11, 128}, std::tuple{7, 9, 256}}) {
    SCOPED_TRACE("states " + std::to_string(S) + " rows " + std::to_string(rows) + " head_dim " + std::to_string(D));
    std::vector<float> o(S * rows * D), lse(S * rows);
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    for (auto& x : o) x = normal(rng);
    for (size_t i = 0; i < lse.size(); ++i) lse[i] = (i % 7 == 0) ? -INFINITY : 3.f * normal(rng);
    for (int s = 0; s < S; ++s) lse[s * rows + 1] = -INFINITY;  // row 1: nothing visible anywhere
    // Empty states' o is garbage by contract: NaN here, which must never reach the output.
    for (size_t i = 0; i < lse.size(); ++i)
      if (lse[i] == -INFINITY) std::fill_n(&o[i * D], D, std::numeric_limits<float>::quiet_NaN());
    MergeParams m;
    m.num_states = S;
    m.num_rows = rows;
    m.head_dim = D;
    m.o_in_state_stride = int64_t{rows} * D;
    m.o_in_row_stride = D;
    m.lse_in_state_stride = rows;
    m.lse_in_row_stride = 1;
    m.out_dtype = DType::kBFloat16;
    m.o_out_row_stride = D;
    std::vector<uint16_t> cpu_o(rows * D), gpu_o(rows * D);
    std::vector<float> cpu_lse(rows), gpu_lse(rows);
    m.o_in = o.data();
    m.lse_in = lse.data();
    m.o_out = cpu_o.data();
    m.lse_out = cpu_lse.data();
    ASSERT_TRUE(merge_states(m).ok());
    DeviceBuffer d_o = to_device(o), d_lse = to_device(lse), d_out(rows * D * 2), d_lse_out(rows * 4);
    m.device = Device::kCUDA;
    m.o_in = d_o.get();
    m.lse_in = d_lse.as<float>();
    m.o_out = d_out.get();
    m.lse_out = d_lse_out.as<float>();
    ASSERT_TRUE(merge_states(m).ok());
    FS_ASSERT_CUDA(cudaDeviceSynchronize());
    d_out.download(gpu_o.data(), rows * D * 2);
    d_lse_out.download(gpu_lse.data(), rows * 4);
    auto expect_lse = [&](int r, const char* what) {  // row r's merged lse, GPU against CPU
      if (cpu_lse[r] == -INFINITY)
        ASSERT_EQ(gpu_lse[r], -INFINITY) << what << "row " << r;
      else
        ASSERT_NEAR(gpu_lse[r], cpu_lse[r], 1e-5 * (1 + std::fabs(cpu_lse[r]))) << what << "row " << r;
    };
    for (int r = 0; r < rows; ++r) {
      ASSERT_NO_FATAL_FAILURE(expect_lse(r, ""));
      for (int x = 0; x < D; ++x) {
        const float a = bf16_to_float(gpu_o[r * D + x]), b = bf16_to_float(cpu_o[r * D + x]);
        ASSERT_LE(std::fabs(a - b), std::ldexp(1.f, -7) * std::fabs(b) + 1e-6f) << "row " << r << " dim " << x;
      }
    }
    ASSERT_EQ(gpu_lse[1], -INFINITY);
    ASSERT_EQ(bf16_to_float(gpu_o[D]), 0.f);

    MergeParams m32 = m;  // device pointers
    m32.out_dtype = DType::kFloat32;
    DeviceBuffer d_out32(rows * D * 4);
    m32.o_out = d_out32.get();
    cudaStream_t stream = nullptr;
    FS_ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    FS_ASSERT_CUDA(cudaDeviceSynchronize());  // the uploads ran on the legacy stream
    const Status st = cuda::merge_cuda(m32, stream, /*dependent_launch=*/true);
    const cudaError_t sync = cudaStreamSynchronize(stream);
    FS_ASSERT_CUDA(cudaStreamDestroy(stream));
    ASSERT_TRUE(st.ok()) << st.to_string();
    FS_ASSERT_CUDA(sync);
    std::vector<float> cpu_o32(rows * D), gpu_o32(rows * D);
    m32.device = Device::kCPU;
    m32.o_in = o.data();
    m32.lse_in = lse.data();
    m32.o_out = cpu_o32.data();
    m32.lse_out = cpu_lse.data();
    ASSERT_TRUE(merge_states(m32).ok());
    d_out32.download(gpu_o32.data(), rows * D * 4);
    d_lse_out.download(gpu_lse.data(), rows * 4);
    for (int r = 0; r < rows; ++r) {
      ASSERT_NO_FATAL_FAILURE(expect_lse(r, "fp32, "));
      for (int x = 0; x < D; ++x)
        ASSERT_NEAR(gpu_o32[r * D + x], cpu_o32[r * D + x], 2e-5 * (1 + std::fabs(cpu_o32[r * D + x])))
            << "fp32, row " << r << " dim " << x;
    }
  }
}

// The split kernel's launch shape, which the planner plans for: rows a CTA as the launch counts
// its row blocks, CTAs an SM from the occupancy API (at least 1, at most the SM's limit; at least
// the launch bounds' 2 at head_dim 128 on sm_90, whose 228 KB of shared memory hold two CTAs'
// 100 KB), the device's SMs; asked of the device once per device and instance, after which
// neither the query nor decode() asks it again.
TEST(DecodeCuda, LaunchShapeFromTheDevice) {
  FS_SKIP_WITHOUT_CUDA();
  int device = 0, devices = 0, max_blocks = 0, cc_major = 0;
  FS_ASSERT_CUDA(cudaGetDevice(&device));
  FS_ASSERT_CUDA(cudaGetDeviceCount(&devices));
  FS_ASSERT_CUDA(cudaDeviceGetAttribute(&max_blocks, cudaDevAttrMaxBlocksPerMultiprocessor, device));
  FS_ASSERT_CUDA(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, device));
  CudaDeviceInfo info;
  ASSERT_TRUE(cuda_device_info(device, &info).ok());
  DecodeLaunchShape hd128_bf16;
  for (int32_t head_dim : {64, 128}) {
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string("head_dim ") + std::to_string(head_dim) + " " + dtype_name(dtype));
      DecodeLaunchShape s;
      ASSERT_TRUE(decode_launch_shape(Device::kCUDA, head_dim, dtype, &s).ok());
      EXPECT_GE(cuda::decode_launch_shape_queries(), 1);
      EXPECT_EQ(s.rows_per_cta, kDecodeRowsPerCta);
      EXPECT_GE(s.ctas_per_sm, 1);
      EXPECT_LE(s.ctas_per_sm, max_blocks);
      if (cc_major >= 9 && head_dim == 128) {
        EXPECT_GE(s.ctas_per_sm, 2);
      }
      EXPECT_EQ(s.sm_count, info.sm_count);
      const int64_t asked = cuda::decode_launch_shape_queries();
      DecodeLaunchShape again;
      ASSERT_TRUE(decode_launch_shape(Device::kCUDA, head_dim, dtype, &again).ok());
      EXPECT_EQ(cuda::decode_launch_shape_queries(), asked) << "the second call asked the device";
      EXPECT_EQ(again.rows_per_cta, s.rows_per_cta);
      EXPECT_EQ(again.ctas_per_sm, s.ctas_per_sm);
      EXPECT_EQ(again.sm_count, s.sm_count);
      if (head_dim == 128 && dtype == DType::kBFloat16) hd128_bf16 = s;
    }
  }
  EXPECT_LE(cuda::decode_launch_shape_queries(), 4 * devices);  // once per device and instance at most

  // decode() reads the cache: planned (configure_splits) and run, with splits, it asks nothing.
  const int64_t asked = cuda::decode_launch_shape_queries();
  Problem p = decode_problem({2000, 700, 1}, 1, 32, 8, 128, DType::kBFloat16, 16, 2626);
  ProblemData d = make_data(p);
  GpuRun r = run_gpu(p, d, 0, 0);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(cuda::decode_launch_shape_queries(), asked) << "decode() asked the device";

  // The planner's workers an item are the CTAs the launch gives it.
  for (int32_t q_len = 1; q_len <= kMaxDecodeQLen; ++q_len) {
    for (int32_t group : {1, 2, 3, 4, 5, 7, 8, 16}) {
      DecodePlanInput in;
      in.q_len = q_len;
      in.num_kv_heads = 2;
      in.num_heads = 2 * group;
      in.shape = hd128_bf16;
      EXPECT_EQ(decode_workers_per_item(in), cuda::decode_row_blocks(q_len, group))
          << "q_len " << q_len << " group " << group;
    }
  }
  DecodeLaunchShape none;
  EXPECT_EQ(decode_launch_shape(Device::kCUDA, 96, DType::kBFloat16, &none).code(), StatusCode::kUnsupported);
  EXPECT_EQ(decode_launch_shape(Device::kCUDA, 128, DType::kFloat32, &none).code(), StatusCode::kUnsupported);
}

// CUDA-graph mode: plan with a fixed split count for a maximum length, capture once, then
// replay after the lengths (device memory) change; every replay matches the reference.
TEST(DecodeCuda, GraphReplayWithChangingLengths) {
  FS_SKIP_WITHOUT_CUDA();
  Problem p = decode_problem({2000, 700, 1}, 1, 32, 8, 128, DType::kBFloat16, 16, 4321);
  ProblemData d = make_data(p);
  DeviceProblem g = upload(p, d);
  Outputs host = make_outputs(p);
  DecodeParams dp = device_decode_params(p, d, host, g);
  DecodePlanInput in;
  in.batch = dp.batch;
  in.q_len = 1;
  in.num_heads = 32;
  in.num_kv_heads = 8;
  in.head_dim = 128;
  in.block_size = 16;
  ASSERT_TRUE(decode_launch_shape(Device::kCUDA, 128, DType::kBFloat16, &in.shape).ok());
  in.graph_mode = true;
  in.max_splits = 8;
  in.max_seq_len = 2000;
  DecodePlan plan;
  ASSERT_TRUE(plan_decode(in, &plan).ok());
  dp.num_splits = plan.num_splits;
  dp.pages_per_split = plan.pages_per_split;
  DeviceBuffer ws(plan.workspace_bytes);
  dp.workspace = ws.get();
  dp.workspace_bytes = plan.workspace_bytes;

  cudaStream_t stream;
  FS_ASSERT_CUDA(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  FS_ASSERT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  ASSERT_TRUE(decode(dp, stream).ok());
  FS_ASSERT_CUDA(cudaStreamEndCapture(stream, &graph));
  FS_ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));

  // The keys of each sequence stay in the pool; shorter lengths are prefixes of them, and the
  // query is then the last of those keys' positions (the test reuses the same q).
  for (const std::vector<int32_t>& lens : {std::vector<int32_t>{2000, 700, 1}, std::vector<int32_t>{1500, 5, 1},
                                           std::vector<int32_t>{16, 699, 1}}) {
    Problem pl = p;
    for (size_t b = 0; b < lens.size(); ++b) pl.seqs[b].k_len = lens[b];
    ProblemData dl = d;  // same pools; the reference reads packed k/v: cut each sequence
    dl.k.clear();
    dl.v.clear();
    const int64_t row = 8 * 128;
    for (size_t b = 0; b < lens.size(); ++b) {
      const int64_t k0 = d.cu_seqlens_k[b];
      dl.k.insert(dl.k.end(), d.k.begin() + k0 * row, d.k.begin() + (k0 + lens[b]) * row);
      dl.v.insert(dl.v.end(), d.v.begin() + k0 * row, d.v.begin() + (k0 + lens[b]) * row);
    }
    dl.cu_seqlens_k = {0, lens[0], lens[0] + lens[1], lens[0] + lens[1] + lens[2]};
    g.seq_lens.upload(lens.data(), 12);
    FS_ASSERT_CUDA(cudaMemset(g.o.get(), 0xff, g.o.bytes()));
    FS_ASSERT_CUDA(cudaGraphLaunch(exec, stream));
    FS_ASSERT_CUDA(cudaStreamSynchronize(stream));
    Outputs out = download_outputs(pl, g);
    const Reference ref = reference(pl, dl);
    Tolerance tol = tolerance_for(pl, ref);
    tol.o_abs += 1e-5 + 2 * ref.p_rounding_err;
    EXPECT_EQ(compare(pl, out, ref, tol), "") << "lengths " << lens[0] << "," << lens[1] << "," << lens[2];
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Row blocks launched in clusters of two (q_len 8 × GQA 4 = 32 rows a kv head), captured in a
// CUDA graph with and without splits and replayed twice, each time into poisoned outputs.
TEST(DecodeCuda, GraphReplayOfClusteredRowBlocks) {
  FS_SKIP_WITHOUT_CUDA();
  GpuProblem t(decode_problem({1000, 333, 17}, 8, 32, 8, 128, DType::kBFloat16, 16, 8088));
  struct Handles {  // released on every exit, failed assertions included
    cudaStream_t stream = nullptr;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    void reset_graph() {
      if (exec != nullptr) cudaGraphExecDestroy(exec);
      if (graph != nullptr) cudaGraphDestroy(graph);
      exec = nullptr;
      graph = nullptr;
    }
    ~Handles() {
      reset_graph();
      if (stream != nullptr) cudaStreamDestroy(stream);
    }
  } h;
  FS_ASSERT_CUDA(cudaStreamCreate(&h.stream));
  for (int32_t splits : {1, 3}) {
    DeviceBuffer ws;
    configure_splits(t.dp, t.p, t.d, splits, (max_pages(t.p) + splits - 1) / splits, ws);
    h.reset_graph();
    FS_ASSERT_CUDA(cudaStreamBeginCapture(h.stream, cudaStreamCaptureModeGlobal));
    const Status st = decode(t.dp, h.stream);
    FS_ASSERT_CUDA(cudaStreamEndCapture(h.stream, &h.graph));
    ASSERT_TRUE(st.ok()) << st.to_string();
    FS_ASSERT_CUDA(cudaGraphInstantiate(&h.exec, h.graph, 0));
    for (int replay = 0; replay < 2; ++replay) {
      FS_ASSERT_CUDA(cudaMemset(t.g.o.get(), 0xff, t.g.o.bytes()));
      FS_ASSERT_CUDA(cudaMemset(t.g.lse.get(), 0xff, t.g.lse.bytes()));
      FS_ASSERT_CUDA(cudaGraphLaunch(h.exec, h.stream));
      FS_ASSERT_CUDA(cudaStreamSynchronize(h.stream));
      EXPECT_EQ(compare(t.p, download_outputs(t.p, t.g), t.ref, t.tol), "")
          << "splits " << splits << ", replay " << replay;
    }
  }
}

// Split-K merges inside the kernel (ready flags in the workspace): more splits than a warp's
// two lse loads a lane (70), and one workspace reused by eager calls of different split counts
// (each call's flags meet the previous call's leftovers: partials, reset flags, poison).
TEST(DecodeCuda, ManySplitsAndReusedWorkspace) {
  FS_SKIP_WITHOUT_CUDA();
  GpuProblem t(decode_problem({5000, 33, 1200}, 1, 32, 8, 128, DType::kBFloat16, 16, 777));
  const int32_t pages = max_pages(t.p);
  DeviceBuffer ws(decode_workspace_bytes(70, t.dp.batch, t.dp.q_len, t.dp.num_heads, t.dp.head_dim));
  for (int32_t splits : {70, 7, 70, 2, 70}) {
    t.dp.num_splits = splits;
    t.dp.pages_per_split = (pages + splits - 1) / splits;
    t.dp.workspace = ws.get();
    t.dp.workspace_bytes = ws.bytes();
    EXPECT_EQ(t.run_and_compare(), "") << splits << " splits";
  }
}

// Queries only element-aligned (2-byte offset): the kernel takes its element-load path for q
// (16-byte copies need 16-byte aligned rows and heads), with q_len 2 so a CTA has 8 rows.
TEST(DecodeCuda, QueriesOnlyElementAligned) {
  FS_SKIP_WITHOUT_CUDA();
  GpuProblem t(decode_problem({700, 45}, 2, 32, 8, 128, DType::kBFloat16, 16, 31));
  DeviceBuffer shifted(t.g.q.bytes() + 16);
  char* q_odd = static_cast<char*>(shifted.get()) + 2;
  FS_ASSERT_CUDA(cudaMemcpy(q_odd, t.g.q.get(), t.g.q.bytes(), cudaMemcpyDeviceToDevice));
  t.dp.q = q_odd;
  t.dp.num_splits = 3;
  t.dp.pages_per_split = (max_pages(t.p) + 2) / 3;
  DeviceBuffer ws(decode_workspace_bytes(3, t.dp.batch, t.dp.q_len, t.dp.num_heads, t.dp.head_dim));
  t.dp.workspace = ws.get();
  t.dp.workspace_bytes = ws.bytes();
  EXPECT_EQ(t.run_and_compare(), "");
}

// Calls back to back on one stream, no synchronisation between them, one workspace: on sm_90+
// each split kernel is a programmatic dependent of the kernel before it (here the previous
// call's merge), so it must wait on the device before it reads its inputs or overwrites the
// partial states that merge reads. Call A (70 splits) writes o_A; call B (one tile a split) takes
// o_A as its queries, straight after A's merge, and shares A's workspace; four rounds, each with
// outputs of its own. Every o_A must match the reference, and every chained o_B must equal, bit
// for bit, B run again on its own once everything has finished (a read of o_A before A's merge
// wrote it sees the NaN poison). (Built with -DFLASHSERVE_DECODE_EXPERIMENTS=ON
// -DFLASHSERVE_DECODE_EXPERIMENT=6, which drops the split kernel's wait, this test fails.)
TEST(DecodeCuda, BackToBackCallsShareOneWorkspace) {
  FS_SKIP_WITHOUT_CUDA();
  constexpr int kRounds = 4;
  GpuProblem a(decode_problem({5000, 33, 1200}, 1, 32, 8, 128, DType::kBFloat16, 16, 901));
  GpuProblem b(decode_problem({40, 17, 90}, 1, 32, 8, 128, DType::kBFloat16, 16, 902));
  const Problem &pa = a.p, &pb = b.p;
  DeviceProblem &ga = a.g, &gb = b.g;
  DecodeParams &dpa = a.dp, &dpb = b.dp;
  dpa.num_splits = 70;
  dpa.pages_per_split = (max_pages(pa) + 69) / 70;
  dpb.num_splits = 3;
  dpb.pages_per_split = (max_pages(pb) + 2) / 3;
  DeviceBuffer ws(decode_workspace_bytes(70, 3, 1, 32, 128));
  dpa.workspace = dpb.workspace = ws.get();
  dpa.workspace_bytes = dpb.workspace_bytes = ws.bytes();
  ASSERT_EQ(dpb.q_row_stride, dpa.o_row_stride);  // o_A is laid out as B's q
  ASSERT_EQ(dpb.q_head_stride, dpa.o_head_stride);
  std::vector<DeviceBuffer> o_a, lse_a, o_b, lse_b;  // one a round, poisoned
  for (int r = 0; r < kRounds; ++r) {
    o_a.emplace_back(ga.o.bytes());
    lse_a.emplace_back(ga.lse.bytes());
    o_b.emplace_back(gb.o.bytes());
    lse_b.emplace_back(gb.lse.bytes());
  }
  auto run = [&](DecodeParams dp, DeviceBuffer& o, DeviceBuffer& lse, const void* q, cudaStream_t st) {
    dp.o = o.get();
    dp.lse = lse.as<float>();
    if (q != nullptr) dp.q = q;
    return decode(dp, st).ok();
  };
  cudaStream_t stream = nullptr;
  FS_ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  FS_ASSERT_CUDA(cudaDeviceSynchronize());  // the uploads and poison above ran on the legacy stream
  for (int r = 0; r < kRounds; ++r) {
    ASSERT_TRUE(run(dpa, o_a[r], lse_a[r], nullptr, stream));
    ASSERT_TRUE(run(dpb, o_b[r], lse_b[r], o_a[r].get(), stream));
  }
  FS_ASSERT_CUDA(cudaStreamSynchronize(stream));
  FS_ASSERT_CUDA(cudaStreamDestroy(stream));
  const int64_t b_bytes = pb.total_q() * pb.num_heads * pb.head_dim * dtype_size(pb.dtype);
  for (int r = 0; r < kRounds; ++r) {
    std::swap(ga.o, o_a[r]);
    std::swap(ga.lse, lse_a[r]);
    EXPECT_EQ(compare(pa, download_outputs(pa, ga), a.ref, a.tol), "") << "call A, round " << r;
    std::swap(ga.o, o_a[r]);
    DeviceBuffer o_alone(gb.o.bytes()), lse_alone(gb.lse.bytes());
    ASSERT_TRUE(run(dpb, o_alone, lse_alone, o_a[r].get(), nullptr));
    FS_ASSERT_CUDA(cudaDeviceSynchronize());
    std::vector<uint16_t> chained(b_bytes / 2), alone(b_bytes / 2);
    o_b[r].download(chained.data(), b_bytes);
    o_alone.download(alone.data(), b_bytes);
    int64_t differ = 0;
    for (size_t e = 0; e < chained.size(); ++e) differ += chained[e] != alone[e];
    EXPECT_EQ(differ, 0) << "call B, round " << r << ": chained output differs from B run alone";
    bool finite = true;
    for (uint16_t x : alone) finite &= (x & 0x7f80) != 0x7f80;  // bf16: exponent all ones is inf/NaN
    EXPECT_TRUE(finite) << "call B, round " << r;
  }
}

// Inputs written by the kernel just before decode (in a model step, the kernel that appends
// the new K/V or updates the block table), when that kernel lets decode launch early: the
// split kernel's CTAs may then start while it still runs, and must read nothing before
// griddepcontrol.wait. Here the predecessor (delayed_copy.cu) lets decode launch, waits 30 us, then writes the true
// block table (the buffer held each row rotated: ids of other pages), the true lengths (the
// buffer held the table's capacity) and each sequence's last page of K and V (the buffer held
// NaN, as before an append). The outputs must match the reference for the true inputs. (A
// build without the split kernel's wait, -DFLASHSERVE_DECODE_EXPERIMENTS=ON
// -DFLASHSERVE_DECODE_EXPERIMENT=6, fails it.)
TEST(DecodeCuda, InputsWrittenByTheKernelBefore) {
  FS_SKIP_WITHOUT_CUDA();
  const Problem p = decode_problem({3000, 700, 5001}, 1, 32, 8, 128, DType::kBFloat16, 16, 904);
  ProblemData d = make_data(p);
  const Reference ref = reference(p, d);
  const Tolerance tol = gpu_tolerance(p, ref);
  DeviceProblem truth = upload(p, d);
  const int batch = static_cast<int>(p.seqs.size());
  const int64_t stride = d.table_stride;
  std::vector<int32_t> decoy_table(d.block_table.size());
  for (int b = 0; b < batch; ++b)
    for (int64_t i = 0; i < stride; ++i) decoy_table[b * stride + i] = d.block_table[b * stride + (i + 1 + b) % stride];
  const std::vector<int32_t> decoy_lens(batch, static_cast<int32_t>(stride * p.block_size));
  const int64_t elem = dtype_size(p.dtype), page_bytes = int64_t{p.num_kv_heads} * p.block_size * p.head_dim * elem;
  // The device state before the predecessor's writes, and the writes.
  auto stage = [&](DeviceProblem& g, DelayedCopies& c) {
    ASSERT_LE(c.count + 2 + 2 * batch, DelayedCopies::kMax);  // the copies below
    g.block_table.upload(decoy_table.data(), decoy_table.size() * 4);
    g.seq_lens.upload(decoy_lens.data(), batch * 4);
    c.copies[c.count++] = {g.block_table.get(), truth.block_table.get(), static_cast<int64_t>(decoy_table.size() * 4)};
    c.copies[c.count++] = {g.seq_lens.get(), truth.seq_lens.get(), batch * 4};
    for (int b = 0; b < batch; ++b) {
      const int64_t block = d.block_table[b * stride + (d.seq_lens[b] - 1) / p.block_size];
      for (int64_t kv_offset : {int64_t{0}, d.v_offset}) {  // the last page's K, then its V
        const int64_t off = (block * d.block_stride + kv_offset) * elem;
        char* page = static_cast<char*>(g.pages.get()) + off;
        FS_ASSERT_CUDA(cudaMemset(page, 0xff, page_bytes));
        c.copies[c.count++] = {page, static_cast<const char*>(truth.pages.get()) + off, page_bytes};
      }
    }
  };
  {  // The decoy state alone gives other outputs: the test can fail.
    DeviceProblem g = upload(p, d);
    DelayedCopies c;
    ASSERT_NO_FATAL_FAILURE(stage(g, c));
    Outputs host = make_outputs(p);
    DecodeParams dp = device_decode_params(p, d, host, g);
    DeviceBuffer ws;
    configure_splits(dp, p, d, 0, 0, ws);
    ASSERT_TRUE(decode(dp, nullptr).ok());
    FS_ASSERT_CUDA(cudaDeviceSynchronize());
    EXPECT_NE(compare(p, download_outputs(p, g), ref, tol), "");
  }
  cudaStream_t stream = nullptr;
  FS_ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int32_t splits : {0, 1, 7}) {
    DeviceProblem g = upload(p, d);
    DelayedCopies c;
    c.delay_ns = 30000;
    ASSERT_NO_FATAL_FAILURE(stage(g, c));
    ASSERT_EQ(c.count, DelayedCopies::kMax);
    Outputs host = make_outputs(p);
    DecodeParams dp = device_decode_params(p, d, host, g);
    DeviceBuffer ws;
    configure_splits(dp, p, d, splits, splits == 0 ? 0 : (max_pages(p) + splits - 1) / splits, ws);
    FS_ASSERT_CUDA(cudaDeviceSynchronize());  // uploads and poison ran on the legacy stream
    FS_ASSERT_CUDA(launch_delayed_copies(c, stream));
    ASSERT_TRUE(decode(dp, stream).ok());
    FS_ASSERT_CUDA(cudaStreamSynchronize(stream));
    EXPECT_EQ(compare(p, download_outputs(p, g), ref, tol), "") << "splits " << dp.num_splits;
  }
  FS_ASSERT_CUDA(cudaStreamDestroy(stream));
}

TEST(DecodeCuda, UnsupportedShapesAreErrors) {
  FS_SKIP_WITHOUT_CUDA();
  Problem p = decode_problem({40}, 1, 8, 2, 80, DType::kBFloat16, 16, 1);
  ProblemData d = make_data(p);
  GpuRun r = run_gpu(p, d, 1, 3);
  EXPECT_EQ(r.status.code(), StatusCode::kUnsupported) << r.status.to_string();
  p = decode_problem({40}, 1, 8, 2, 64, DType::kFloat32, 16, 1);
  d = make_data(p);
  r = run_gpu(p, d, 1, 3);
  EXPECT_EQ(r.status.code(), StatusCode::kUnsupported) << r.status.to_string();
  p = decode_problem({40}, 1, 8, 2, 64, DType::kBFloat16, 24, 1);  // block size not a power of two
  d = make_data(p);
  r = run_gpu(p, d, 1, 2);
  EXPECT_EQ(r.status.code(), StatusCode::kUnsupported) << r.status.to_string();
}

// A block id out of range on the device (the host check skipped) reads nothing outside the
// pool and leaves the other sequences' results exact.
TEST(DecodeCuda, BadBlockIdOnDeviceDoesNotCrashOrLeak) {
  FS_SKIP_WITHOUT_CUDA();
  Problem p = decode_problem({100, 100}, 1, 8, 2, 128, DType::kBFloat16, 16, 5);
  ProblemData d = make_data(p);
  const Reference ref = reference(p, d);
  d.block_table[2] = 1 << 30;  // sequence 0's third page
  DeviceProblem g = upload(p, d);
  Outputs host = make_outputs(p);
  DecodeParams dp = device_decode_params(p, d, host, g);
  dp.num_splits = 1;
  dp.pages_per_split = 7;
  ASSERT_TRUE(decode(dp, nullptr).ok());
  FS_ASSERT_CUDA(cudaDeviceSynchronize());
  Outputs out = download_outputs(p, g);
  Problem second = p;
  second.seqs = {p.seqs[1]};
  Outputs out2 = make_outputs(second);
  const int64_t per_seq = int64_t{8} * 128;
  std::copy_n(static_cast<const char*>(out.o.data()) + per_seq * 2, per_seq * 2, static_cast<char*>(out2.o.data()));
  std::copy_n(out.lse.data() + 8, 8, out2.lse.data());
  Reference ref2;
  ref2.o.assign(ref.o.begin() + per_seq, ref.o.end());
  ref2.lse.assign(ref.lse.begin() + 8, ref.lse.end());
  ref2.max_abs_logit = ref.max_abs_logit;
  Tolerance tol = tolerance_for(second, ref2);
  tol.o_abs += 1e-5 + 2 * ref.p_rounding_err;
  EXPECT_EQ(compare(second, out2, ref2, tol), "");
}

}  // namespace
}  // namespace flashserve::test
