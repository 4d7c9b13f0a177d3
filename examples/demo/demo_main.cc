// A CPU attention demo (scripts/demo.sh) on the benchmarks' random workload (bench/workload.h).
// It fills a paged KV cache with random keys and values, runs varlen prefill for a batch of
// prompts and a split-K decode step for a batch of sequences, cross-checks the decode against
// itself with one split, and prints what it computed and how fast.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "attention/prefill.h"
#include "bench/timing.h"
#include "bench/workload.h"
#include "common/thread_pool.h"
#include "decode/decode.h"
#include "decode/planner.h"

using namespace flashserve;
using namespace flashserve::bench;

namespace {

int fail(const char* what, const Status& st) {
  std::fprintf(stderr, "demo: %s failed: %s\n", what, st.to_string().c_str());
  return 1;
}

double checksum(const Workload& w) {
  double s = 0;
  const int64_t n = w.total_q() * w.spec().num_heads * w.spec().head_dim;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(load_as_float(w.o(), w.spec().dtype, i));
  return s / static_cast<double>(n);
}

}  // namespace

int main() {
  std::printf("flashserve: CPU attention demo (the embedded default backend)\n");
  std::printf("threads: %d (FLASHSERVE_NUM_THREADS to change)\n\n", ThreadPool::global().num_threads());

  // Prefill: three prompts, the second reusing a cached prefix (77 new tokens after 923).
  WorkloadSpec pre;
  pre.q_lens = {1000, 77, 300};
  pre.seq_lens = {1000, 1000, 300};
  Workload pw;
  Status st = Workload::create(pre, &pw);
  if (!st.ok()) return fail("workload", st);
  PrefillParams pp = pw.prefill_params();
  Timing t;
  st = time_cpu([&] { return prefill(pp); }, 0.5, 3, &t);
  if (!st.ok()) return fail("prefill", st);
  std::printf("prefill  bf16, 32 query / 8 kv heads, head_dim 128, causal, pages of 16 tokens\n");
  std::printf("  prompts (new tokens / keys): 1000/1000, 77/1000 (cached prefix), 300/300\n");
  std::printf("  o[token 0, head 0, :4] = %.4f %.4f %.4f %.4f   mean |o| = %.4f\n",
              load_as_float(pw.o(), pre.dtype, 0), load_as_float(pw.o(), pre.dtype, 1),
              load_as_float(pw.o(), pre.dtype, 2), load_as_float(pw.o(), pre.dtype, 3), checksum(pw));
  const auto [lo, hi] = std::minmax_element(pw.lse().begin(), pw.lse().end());
  std::printf("  lse (natural log) in [%.3f, %.3f]\n", *lo, *hi);
  std::printf("  %.2f ms per batch: %.0f tokens/s, %.2f GFLOP/s\n\n", t.median_s * 1e3, pw.total_q() / t.median_s,
              pw.attention_flops() / t.median_s * 1e-9);

  // Decode: one new token for each of 8 sequences of 4096 tokens, split-K as planned.
  WorkloadSpec dec;
  dec.q_lens.assign(8, 1);
  dec.seq_lens = {4096, 4096, 4096, 4096, 1024, 1024, 17, 9000};
  Workload dw;
  st = Workload::create(dec, &dw);
  if (!st.ok()) return fail("workload", st);
  DecodeParams dp = dw.decode_params();
  DecodePlanInput in;
  in.batch = dp.batch;
  in.seq_lens = dec.seq_lens.data();
  in.num_heads = dp.num_heads;
  in.num_kv_heads = dp.num_kv_heads;
  in.head_dim = dp.head_dim;
  in.block_size = dec.block_size;
  // As if on an H200's 132 SMs, one CTA each, to show the split-K path on a small batch.
  in.shape = DecodeLaunchShape{kDecodeRowsPerCta, 1, 132};
  DecodePlan plan;
  st = plan_decode(in, &plan);
  if (!st.ok()) return fail("plan", st);
  std::vector<float> workspace(static_cast<size_t>(plan.workspace_bytes / 4));
  dp.num_splits = plan.num_splits;
  dp.pages_per_split = plan.pages_per_split;
  dp.workspace = workspace.data();
  dp.workspace_bytes = plan.workspace_bytes;
  st = time_cpu([&] { return decode(dp); }, 0.5, 5, &t);
  if (!st.ok()) return fail("decode", st);
  const int64_t n = dp.batch * dp.num_heads * dp.head_dim;
  std::vector<float> split_o(n);
  for (int64_t i = 0; i < n; ++i) split_o[i] = load_as_float(dw.o(), dec.dtype, i);
  DecodeParams one = dp;
  one.num_splits = 1;
  one.pages_per_split = plan.num_splits * plan.pages_per_split;
  st = decode(one);
  if (!st.ok()) return fail("decode (1 split)", st);
  double max_diff = 0;
  for (int64_t i = 0; i < n; ++i)
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(split_o[i] - load_as_float(dw.o(), dec.dtype, i))));
  std::printf("decode   one new token for 8 sequences (4096 x4, 1024 x2, 17, 9000 keys), bf16, same heads\n");
  std::printf("  plan for 132 workers: %d splits of %d pages, %lld work items (%.2f of a wave)\n", plan.num_splits,
              plan.pages_per_split, static_cast<long long>(plan.work_items), plan.wave_fill);
  std::printf("  max |o(split-K) - o(1 split)| = %.2e (bf16 output)\n", max_diff);
  std::printf("  %.3f ms per step: %.2f GB/s of K/V read\n", t.median_s * 1e3, dw.kv_bytes() / t.median_s * 1e-9);
  return 0;
}
