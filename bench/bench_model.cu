// Model benchmark on the GPU: synthetic Llama-3-8B shapes in bf16 (weights generated on the
// device), decode step time at batch {1, 16, 32, 64, 256} × context {1k, 8k} next to the floor
// (weight bytes + K/V bytes) / the read bandwidth measured in the same run, with cuBLAS and (up
// to 32 rows) with the skinny GEMMs (issue 27; "skinny ms": their epilogues launched, the
// model's default, which sessions 24-26 printed as "skinny-l ms"; "skinny-r ms": with rotary + the
// K/V append in the QKV epilogue), and prefill tokens/s. Logits stay on the device.
// Then each decode projection alone, skinny_gemm against cuBLAS at 1..32 rows (the crossover),
// its weights rotated over copies that exceed the L2.
// Usage: bench_model [--quick] [--steps-only] | --gemms | --sampler | --profile-step | --mixed
// (--gemms: the projections' table alone; --steps-only: without it; --sampler: the GPU sampler's
// table alone; --profile-step: one eager decode step and its draw (FLASHSERVE_PROFILE_BATCH rows)
// between cudaProfilerStart/Stop, for ncu and bench/step_breakdown.py; --mixed: mixed steps
// (decodes and a prompt chunk) eager against the same step captured as a graph, issue 27's "try
// graphs for mixed steps")
#include <cublas_v2.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/cuda_device.h"
#include "server/model/cuda/llama_cuda.h"
#include "server/model/cuda/model_kernels.h"
#include "server/model/cuda/sampler_cuda.h"
#include "server/model/cuda/skinny_gemm.h"

using namespace flashserve;
using namespace flashserve::model;

namespace {

// A decode (or prefill) step for `batch` sequences of `ctx` keys, tokens `q` new each; blocks
// laid out one sequence after another from block 1.
ForwardBatch make_step(int batch, int ctx, int q, int block_size, int stride) {
  ForwardBatch b;
  b.num_decode = q == 1 ? batch : 0;
  b.cu_seqlens_q = {0};
  b.block_table_stride = stride;
  const int blocks_per_seq = (ctx + block_size - 1) / block_size;
  for (int s = 0; s < batch; ++s) {
    for (int i = 0; i < q; ++i) {
      b.tokens.push_back((s * 7919 + i * 31) % 128000);
      const int pos = ctx - q + i;
      b.slot_mapping.push_back(int64_t{1 + s * blocks_per_seq + pos / block_size} * block_size + pos % block_size);
    }
    b.cu_seqlens_q.push_back(static_cast<int32_t>(b.tokens.size()));
    b.seq_lens.push_back(ctx);
    for (int j = 0; j < stride; ++j) b.block_tables.push_back(j < blocks_per_seq ? 1 + s * blocks_per_seq + j : 0);
  }
  return b;
}

// Read-only bandwidth: 16-byte loads over 4 GiB, summed so nothing is optimised away.
__global__ void read_kernel(const uint4* p, int64_t n, unsigned* sink) {
  unsigned acc = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

double read_bandwidth(cudaStream_t s, const void* buf, int64_t bytes) {
  unsigned* sink;
  cudaMalloc(&sink, 4);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> times;
  for (int r = 0; r < 12; ++r) {
    cudaEventRecord(e0, s);
    read_kernel<<<132 * 16, 512, 0, s>>>(static_cast<const uint4*>(buf), bytes / 16, sink);
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    if (r >= 2) times.push_back(ms);
  }
  cudaFree(sink);
  std::sort(times.begin(), times.end());
  return bytes / (times[times.size() / 2] * 1e-3);
}

// Median seconds a call of fn(i) (i: the call's index, to rotate inputs) over reps timings of
// `each` calls back to back between two events, after 2 warm-up timings. each = 1 times one call
// alone, so the host's launch latency is inside (the step's graph replay has none); each > 1
// times calls queued behind each other, as a step's kernels are.
template <typename Fn>
double median_seconds(cudaStream_t s, int reps, Fn fn, int each = 1) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> times;
  for (int r = 0; r < reps + 2; ++r) {
    cudaEventRecord(e0, s);
    for (int i = 0; i < each; ++i) fn(r * each + i);
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    if (r >= 2) times.push_back(ms / each);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2] * 1e-3;
}

// The step's median seconds over reps runs (after 2 warm-ups); a failed step ends the program.
double time_step(LlamaCudaModel& m, const ForwardBatch& b, int reps) {
  return median_seconds(m.stream(), reps, [&](int) {
    const Status st = m.forward_device(b);
    if (!st.ok()) {
      std::fprintf(stderr, "forward: %s\n", st.to_string().c_str());
      std::exit(1);
    }
  });
}

// The GPU sampler (CudaSampler: launch and finish, the sampled ids back on the host) over
// Llama-3's vocabulary at 1, 16 and 64 rows, by rule, with top_k / top_p by the candidates
// (FLASHSERVE_SAMPLER_CANDIDATES=1) and by the whole-vocabulary bisections (=0, the default). The logits:
// a head of 300 N(5, 2) over a bulk N(-10, 2), as a model's are peaked.
void sampler_table(cudaStream_t s) {
  const int V = 128256, max_rows = 64;
  std::vector<float> row(V);
  uint64_t x = 12345;
  auto normal = [&] {  // Box-Muller from a 64-bit LCG: no <random> engine needed here
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const double u1 = (static_cast<double>(x >> 11) + 1) * 0x1.0p-53;
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const double u2 = static_cast<double>(x >> 11) * 0x1.0p-53;
    return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  };
  for (float& v : row) v = static_cast<float>(-10 + 2 * normal());
  for (int i = 0; i < 300; ++i) row[(static_cast<int64_t>(i) * 7919) % V] = static_cast<float>(5 + 2 * normal());
  float* d = nullptr;
  if (cudaMalloc(&d, static_cast<size_t>(V) * max_rows * 4) != cudaSuccess) return;
  for (int r = 0; r < max_rows; ++r) cudaMemcpy(d + static_cast<int64_t>(r) * V, row.data(), V * 4, cudaMemcpyHostToDevice);
  struct Rule {
    const char* name;
    SampleRow row;
  };
  const Rule rules[] = {{"greedy", {0.f, 0, 1.f, 0.f, 1, 0, {}}},
                        {"T=1", {1.f, 0, 1.f, 0.f, 2, 0, {}}},
                        {"top_k 50", {0.8f, 50, 1.f, 0.f, 3, 0, {}}},
                        {"top_p 0.9", {1.f, 0, 0.9f, 0.f, 4, 0, {}}},
                        {"k 50 p 0.95", {0.7f, 50, 0.95f, 0.f, 5, 0, {}}}};
  CudaSampler sampler;
  std::printf("GPU sampler, vocabulary %d, us a call (launch + finish), candidates / whole-vocabulary bisections:\n", V);
  std::printf("%-12s %16s %16s %16s\n", "rule", "1 row", "16 rows", "64 rows");
  for (const Rule& rule : rules) {
    std::printf("%-12s", rule.name);
    for (int rows : {1, 16, 64}) {
      std::vector<SampleRow> rs(static_cast<size_t>(rows), rule.row);
      double t[2];
      for (int slow = 0; slow < 2; ++slow) {
        setenv("FLASHSERVE_SAMPLER_CANDIDATES", slow ? "0" : "1", 1);
        std::vector<int32_t> tokens;
        t[slow] = median_seconds(s, 10, [&](int r) {
          for (auto& q : rs) q.step = static_cast<uint64_t>(r);
          if (!sampler.sample(d, V, rs, s, &tokens).ok()) std::exit(1);
        });
      }
      unsetenv("FLASHSERVE_SAMPLER_CANDIDATES");
      std::printf(" %7.1f / %6.1f", t[0] * 1e6, t[1] * 1e6);
    }
    std::printf("\n");
  }
  // Greedy rows that all ask for logprobs (5 and 20 top entries): on the device (the logprobs
  // kernel, CudaModelOptions::gpu_logprobs) against the host's way (the rows' logits copied back,
  // token_logprobs on each).
  std::printf("%-12s %16s %16s %16s   (logprobs: device / host, us a call)\n", "", "1 row", "16 rows", "64 rows");
  std::vector<float> host_logits(static_cast<size_t>(V) * max_rows);
  for (int top : {5, 20}) {
    std::printf("logprobs %-3d", top);
    for (int rows : {1, 16, 64}) {
      std::vector<SampleRow> rs(static_cast<size_t>(rows));
      for (auto& q : rs) q.logprobs = top;
      std::vector<int32_t> tokens;
      std::vector<TokenLogprobs> lp;
      const double dev = median_seconds(s, 10, [&](int) {
        if (!sampler.launch(d, V, rs, s, true).ok() || !sampler.finish(&tokens, &lp).ok()) std::exit(1);
      });
      const double host = median_seconds(s, 10, [&](int) {
        if (!sampler.launch(d, V, rs, s, false).ok() || !sampler.finish(&tokens).ok()) std::exit(1);
        cudaMemcpyAsync(host_logits.data(), d, static_cast<size_t>(V) * rows * 4, cudaMemcpyDeviceToHost, s);
        cudaStreamSynchronize(s);
        for (int r = 0; r < rows; ++r) lp.push_back(token_logprobs(&host_logits[static_cast<size_t>(r) * V], V, tokens[r], top));
        lp.clear();
      });
      std::printf(" %7.1f / %6.1f", dev * 1e6, host * 1e6);
    }
    std::printf("\n");
  }
  cudaFree(d);
}

// The decode projections of Llama-3-8B alone: skinny_gemm (its epilogue: bf16 out, fp32 for
// lm_head) against cuBLAS (the model's call) at 1..32 rows, weights rotated over copies of at
// least 192 MB in all (no L2 reuse), GB/s of weight bytes and the share of the read bandwidth.
// Each call is timed as the mean of 10 queued back to back (median of 20 such), as a step's
// kernels run: session 25's table timed one launch alone, the host's launch latency inside
// (~5 us, a quarter of the short projections' times). FLASHSERVE_SKINNY_SPLITS=N (the env, A/B)
// forces the skinny kernel's splits; the workspace is sized for the most (16).
void gemm_table(const LlamaConfig& c, double bw, cudaStream_t s) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t Q = int64_t{c.num_attention_heads} * c.head_dim, KV = int64_t{c.num_key_value_heads} * c.head_dim;
  struct Shape {
    const char* name;
    int64_t n, k;
    bool fp32;
  };
  const Shape shapes[] = {{"qkv", Q + 2 * KV, H, false}, {"o", H, Q, false}, {"gate|up", 2 * I, H, false},
                          {"down", H, I, false},         {"lm_head", V, H, true}};
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cublasHandle_t handle;
  cublasCreate(&handle);
  cublasSetStream(handle, s);
  __nv_bfloat16* a = nullptr;
  void* out = nullptr;
  void* ws = nullptr;
  if (cudaMalloc(&a, 32 * 14336 * 2) != cudaSuccess) {
    std::printf("gemm table: no memory\n");
    return;
  }
  model::cuda::fill_normal(a, 32 * 14336, 0.f, 1.f, 5, s);
  cudaMalloc(&out, 32 * V * 4);
  model::cuda::SkinnyWorkspace sws;
  for (const Shape& sh : shapes) {
    sws.bytes = std::max(sws.bytes, (16 * 32 * sh.n + 32 * ((sh.n + 63) / 64)) * int64_t{4});  // 16 splits
    sws.counter_count = std::max(sws.counter_count, model::cuda::skinny_gemm_counters(sh.n));
  }
  cudaMalloc(&ws, sws.bytes);
  sws.partials = ws;
  cudaMalloc(&sws.counters, sws.counter_count * sizeof(unsigned));
  cudaMemset(sws.counters, 0, sws.counter_count * sizeof(unsigned));
  const char* forced = std::getenv("FLASHSERVE_SKINNY_SPLITS");
  // For a profiler (ncu's -k and --launch-skip): FLASHSERVE_BENCH_GEMM=name and
  // FLASHSERVE_BENCH_ROWS=m keep one row of the table, FLASHSERVE_BENCH_COLUMN=skinny-l or cublas
  // one column of it (the others print 0).
  const char* only_gemm = std::getenv("FLASHSERVE_BENCH_GEMM");
  const char* only_rows = std::getenv("FLASHSERVE_BENCH_ROWS");
  const char* only_column = std::getenv("FLASHSERVE_BENCH_COLUMN");
  auto column = [&](const char* name) { return only_column == nullptr || std::strcmp(only_column, name) == 0; };
  std::printf("\ndecode projections alone (bf16 weights streamed; %% of the read bandwidth %.2f TB/s; 10 calls queued;"
              " skinny splits %s):\n", bw / 1e12, forced != nullptr ? forced : "by the rule");
  std::printf("(skinny: its epilogue in the GEMM's launch; skinny-l: in a launch of its own)\n");
  std::printf("%-8s %5s %10s %11s %10s %8s %8s %9s\n", "gemm", "rows", "skinny us", "skinny-l us", "cuBLAS us", "skinny%", "cuBLAS%",
              "cuBLAS/sk");
  for (const Shape& sh : shapes) {
    if (only_gemm != nullptr && std::strcmp(only_gemm, sh.name) != 0) continue;
    const int64_t bytes = sh.n * sh.k * 2;
    const int copies = static_cast<int>(std::max<int64_t>(2, (192ll << 20) / bytes + 1));
    std::vector<__nv_bfloat16*> w(static_cast<size_t>(copies));
    for (int i = 0; i < copies; ++i) {
      if (cudaMalloc(&w[i], bytes) != cudaSuccess) {
        std::printf("gemm table: no memory for %s\n", sh.name);
        std::exit(1);
      }
      model::cuda::fill_normal(w[i], sh.n * sh.k, 0.f, 0.02f, 100 + i, s);
    }
    for (int64_t m : {1, 2, 4, 8, 16, 24, 32}) {
      if (only_rows != nullptr && std::atoll(only_rows) != m) continue;
      model::cuda::SkinnyOutput o;
      if (sh.fp32) {
        o.kind = model::cuda::SkinnyEpilogue::kFp32;
        o.out_fp32 = static_cast<float*>(out);
      } else {
        o.out[0] = static_cast<__nv_bfloat16*>(out);
        o.cols[0] = sh.n;
      }
      Status st;
      double ts = 0, tl = 0, tc = 0;
      if (column("skinny"))
        ts = median_seconds(
            s, 20, [&](int r) { (void)(st = model::cuda::skinny_gemm(a, sh.k, w[r % copies], m, sh.n, sh.k, o, sws, sms, s)); },
            10);
      o.launch_epilogue = true;
      if (column("skinny-l"))
        tl = median_seconds(
            s, 20, [&](int r) { (void)(st = model::cuda::skinny_gemm(a, sh.k, w[r % copies], m, sh.n, sh.k, o, sws, sms, s)); },
            10);
      if (!st.ok()) std::printf("skinny_gemm: %s\n", st.to_string().c_str());
      const float alpha = 1.f, beta = 0.f;
      if (column("cublas")) tc = median_seconds(s, 20, [&](int r) {
        cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(sh.n), static_cast<int>(m), static_cast<int>(sh.k),
                     &alpha, w[r % copies], CUDA_R_16BF, static_cast<int>(sh.k), a, CUDA_R_16BF, static_cast<int>(sh.k),
                     &beta, out, sh.fp32 ? CUDA_R_32F : CUDA_R_16BF, static_cast<int>(sh.n), CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
      }, 10);
      std::printf("%-8s %5lld %10.1f %11.1f %10.1f %7.0f%% %7.0f%% %9.2f\n", sh.name, static_cast<long long>(m),
                  ts * 1e6, tl * 1e6, tc * 1e6, 100 * bytes / ts / bw, 100 * bytes / tc / bw, tc / ts);
    }
    for (__nv_bfloat16* p : w) cudaFree(p);
  }
  cublasDestroy(handle);
  cudaFree(a);
  cudaFree(out);
  cudaFree(ws);
  cudaFree(sws.counters);
}

}  // namespace

int main(int argc, char** argv) {
  auto flag = [&](const char* name) {
    for (int i = 1; i < argc; ++i)
      if (std::strcmp(argv[i], name) == 0) return true;
    return false;
  };
  const bool quick = flag("--quick"), gemms_only = flag("--gemms"), steps_only = flag("--steps-only");
  const bool sampler_only = flag("--sampler"), profile_step = flag("--profile-step"), mixed = flag("--mixed");
  if (!cuda_available()) {
    std::printf("bench_model: skipped: %s\n", cuda_unavailable_reason().c_str());
    return 0;
  }
  LlamaConfig c;
  if (!synthetic_preset("llama3-8b", &c).ok()) return 1;
  if (sampler_only) {
    cudaStream_t s;
    cudaStreamCreate(&s);
    sampler_table(s);
    return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
  }
  if (gemms_only) {
    cudaStream_t s;
    cudaStreamCreate(&s);
    void* buf = nullptr;
    const int64_t bytes = int64_t{4} << 30;
    if (cudaMalloc(&buf, bytes) != cudaSuccess) return 1;
    model::cuda::fill_normal(static_cast<__nv_bfloat16*>(buf), bytes / 2, 0.f, 1.f, 77, s);
    const double bw = read_bandwidth(s, buf, bytes);
    cudaFree(buf);
    std::printf("read-only bandwidth measured now: %.2f TB/s\n", bw / 1e12);
    gemm_table(c, bw, s);
    return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
  }
  const int bs = 16;
  const int max_ctx = 8192, max_batch = 256;
  // K/V for the largest case that fits: (64, 8k) = 512k tokens = 64 GiB on the H200; (256, 8k)
  // does not fit. On a smaller card (an H100's 80 GB) the pool is what the free memory holds
  // past 26 GiB (the 16 GB of weights, activations and workspaces), and the cases past it print n/a.
  const int64_t kv_token_bytes = int64_t{2} * c.num_hidden_layers * c.num_key_value_heads * c.head_dim * 2;
  int64_t kv_tokens = int64_t{64} * max_ctx + 16;
  if (size_t free_b = 0, total_b = 0; cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
    const int64_t room = static_cast<int64_t>(free_b) - (int64_t{26} << 30);
    kv_tokens = std::max<int64_t>(std::min(kv_tokens, room / kv_token_bytes), int64_t{1024} * 16 + 16);
  }
  CudaModelOptions opt;
  opt.block_size = bs;
  opt.num_blocks = static_cast<int32_t>(kv_tokens / bs + 2);
  opt.max_tokens_per_step = 8192;
  opt.max_batch = max_batch;
  opt.max_blocks_per_seq = max_ctx / bs;
  opt.skinny_max_rows = 32;  // the skinny columns up to 32 rows (the server's default stops at 16)
  std::unique_ptr<LlamaCudaModel> m;
  Status st = LlamaCudaModel::create(c, nullptr, 1, opt, &m);
  if (!st.ok()) {
    std::fprintf(stderr, "create: %s\n", st.to_string().c_str());
    return 1;
  }
  m->set_skinny_gemm(false);  // the cuBLAS columns are cuBLAS whatever FLASHSERVE_SKINNY_GEMM says
  m->set_skinny_launch_epilogue(true);
  m->set_skinny_rope_append(false);
  // Random K/V in the whole pool (never zeros).
  const KVStorageShape& ks = m->kv_shape();
  model::cuda::fill_normal(static_cast<__nv_bfloat16*>(m->kv().k_pages(0)), ks.bytes() / 2, 0.f, 1.f, 77, m->stream());
  cudaStreamSynchronize(m->stream());
  const double bw = read_bandwidth(m->stream(), m->kv().k_pages(0), int64_t{4} << 30);  // random K/V, 4 GiB
  std::printf("read-only bandwidth measured now: %.2f TB/s (the floor below uses it)\n", bw / 1e12);
  int dev = 0;
  cudaGetDevice(&dev);
  CudaDeviceInfo card;
  if (!cuda_device_info(dev, &card).ok()) card.name = "GPU";
  std::printf("Llama-3-8B shapes (synthetic), bf16, %s: weights %.2f GB, KV pool %.1f GB\n", card.name.c_str(),
              m->weight_bytes() / 1e9, ks.bytes() / 1e9);
  if (profile_step) {
    // One decode step (batch FLASHSERVE_PROFILE_BATCH, 1, and 1k keys; skinny GEMMs, the model's defaults, eager: one
    // launch a kernel) and its greedy draw between cudaProfilerStart and Stop, after warm-ups:
    // for `ncu --profile-from-start off` (bench/step_breakdown.py sums its kernels by part).
    m->set_skinny_gemm(true);
    m->set_cuda_graphs(false);
    CudaSampler sampler;
    const char* only = std::getenv("FLASHSERVE_PROFILE_BATCH");  // one batch an ncu run (default 1)
    const int batch = only != nullptr ? std::max(1, std::atoi(only)) : 1;
    {
      const ForwardBatch b = make_step(batch, 1024, 1, bs, opt.max_blocks_per_seq);
      const std::vector<SampleRow> rows(static_cast<size_t>(batch));
      std::vector<int32_t> tokens;
      for (int r = 0; r < 3; ++r)
        if (!m->forward_device(b).ok() || !sampler.sample(m->logits_device(), c.vocab_size, rows, m->stream(), &tokens).ok())
          return 1;
      cudaDeviceSynchronize();
      cudaProfilerStart();
      const Status fs = m->forward_device(b);
      const Status ss = sampler.sample(m->logits_device(), c.vocab_size, rows, m->stream(), &tokens);
      cudaDeviceSynchronize();
      cudaProfilerStop();
      std::printf("profiled step: batch %d, 1k keys: %s\n", batch, fs.ok() && ss.ok() ? "ok" : "failed");
    }
    return 0;
  }
  if (mixed) {
    // A mixed step: D decodes of 1k keys, then one prompt chunk of P tokens over a 1k cached
    // prefix (its own blocks after the decodes'). Eager (the server's mixed steps: the prefill by
    // its dynamic walk; then one CTA an item, as under capture), then replayed as a graph
    // (CudaModelOptions::mixed_graphs: the prefill one CTA an item, 128-key tiles). The steps
    // rewrite the same slots.
    m->set_skinny_gemm(true);  // the server's defaults (skinny GEMMs only where <= 16 rows)
    std::printf("%-8s %-8s %10s %14s %10s %12s\n", "decodes", "chunk", "eager ms", "eager 1/item", "graph ms",
                "graph/eager");
    for (auto [D, P] : {std::pair{15, 512}, std::pair{63, 512}, std::pair{255, 512}, std::pair{63, 2048}}) {
      const int ctx = 1024 + P, first = 1 + D * (1024 / bs), blocks = (ctx + bs - 1) / bs;
      if (first + blocks > opt.num_blocks) {  // a pool sized for a smaller card
        std::printf("%-8d %-8d %10s\n", D, P, "n/a (pool)");
        continue;
      }
      ForwardBatch b = make_step(D, 1024, 1, bs, opt.max_blocks_per_seq);
      for (int i = 0; i < P; ++i) {
        const int pos = 1024 + i;
        b.tokens.push_back((i * 131 + 7) % 128000);
        b.slot_mapping.push_back(int64_t{first + pos / bs} * bs + pos % bs);
      }
      b.cu_seqlens_q.push_back(static_cast<int32_t>(b.tokens.size()));
      b.seq_lens.push_back(ctx);
      for (int j = 0; j < opt.max_blocks_per_seq; ++j) b.block_tables.push_back(j < blocks ? first + j : 0);
      m->set_mixed_graphs(false);
      const double te = time_step(*m, b, quick ? 5 : 20);
      setenv("FLASHSERVE_PREFILL_WS_PERSISTENT", "0", 1);  // eager, the prefill one CTA an item (as captured)
      const double ti = time_step(*m, b, quick ? 5 : 20);
      unsetenv("FLASHSERVE_PREFILL_WS_PERSISTENT");
      m->set_mixed_graphs(true);  // the timings' two warm-ups: eager (the shape seen), then captured
      const size_t graphs = m->graph_count();
      const double tg = time_step(*m, b, quick ? 5 : 20);
      m->set_mixed_graphs(false);
      const bool replayed = m->graph_count() == graphs + 1 && m->cuda_graphs();
      std::printf("%-8d %-8d %10.3f %14.3f %10.3f %12.3f%s\n", D, P, te * 1e3, ti * 1e3, tg * 1e3, tg / te,
                  replayed ? "" : "  (no graph captured: eager both)");
    }
    return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
  }
  std::printf("%-8s %-6s %10s %10s %10s %9s %12s %10s %9s %11s %9s\n", "batch", "ctx", "eager ms", "graph ms", "floor ms",
              "floor %", "tokens/s", "skinny ms", "floor %", "skinny-r ms", "floor %");
  for (int ctx : {1024, 8192}) {
    for (int batch : {1, 16, 32, 64, 256}) {
      if (int64_t{batch} * ctx > kv_tokens - 16) {
        std::printf("%-8d %-6d %10s   (K/V of %.0f GB does not fit beside the weights)\n", batch, ctx, "n/a",
                    batch * ctx * kv_token_bytes / 1e9);
        continue;
      }
      if (quick && batch > 16) continue;
      const ForwardBatch b = make_step(batch, ctx, 1, bs, opt.max_blocks_per_seq);
      m->set_cuda_graphs(false);
      const double te = time_step(*m, b, quick ? 5 : 20);
      m->set_cuda_graphs(true);
      const double t = time_step(*m, b, quick ? 5 : 20);
      const double floor = (m->weight_bytes() + batch * ctx * kv_token_bytes) / bw;
      // With skinny GEMMs (graphs), where the step takes them, their epilogues launched (the
      // default; the in-launch epilogue, measured slower in session 24, is in the --gemms table
      // alone); then (A/B) with rotary + the K/V append in the QKV epilogue (skinny-r).
      double tk = 0, tr = 0;
      if (batch <= 32) {
        m->set_skinny_gemm(true);
        tk = time_step(*m, b, quick ? 5 : 20);
        m->set_skinny_rope_append(true);
        tr = time_step(*m, b, quick ? 5 : 20);
        m->set_skinny_rope_append(false);
        m->set_skinny_gemm(false);
      }
      std::printf("%-8d %-6d %10.3f %10.3f %10.3f %8.0f%% %12.0f", batch, ctx, te * 1e3, t * 1e3, floor * 1e3,
                  100 * floor / t, batch / t);
      if (tk > 0)
        std::printf(" %10.3f %8.0f%% %11.3f %8.0f%%", tk * 1e3, 100 * floor / tk, tr * 1e3, 100 * floor / tr);
      std::printf("%s\n", m->cuda_graphs() ? "" : " (graph capture failed: eager)");
    }
  }
  // Prefill: 4 prompts of 2048 tokens in one step.
  const ForwardBatch p = make_step(4, 2048, 2048, bs, opt.max_blocks_per_seq);
  const double tp = time_step(*m, p, quick ? 3 : 10);
  const double flops = 2.0 * 8192 * (m->weight_bytes() / 2.0);  // 2 FLOPs per weight per token
  std::printf("prefill 4x2048 tokens: %.2f ms, %.0f tokens/s, %.0f TFLOP/s (GEMMs only counted)\n", tp * 1e3,
              8192 / tp, flops / tp / 1e12);
  if (!steps_only) gemm_table(c, bw, m->stream());
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "CUDA: %s\n", cudaGetErrorString(err));
    return 1;
  }
  return 0;
}
