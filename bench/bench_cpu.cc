// CPU benchmark of the embedded default: paged varlen prefill (tokens/s, GFLOP/s) and
// split-K decode (GB/s of K/V read, steps/s), bf16 storage, 32 query / 8 kv heads,
// head_dim 128, page 16. Prints one table. Usage: bench_cpu [--quick]
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "attention/prefill.h"
#include "bench/timing.h"
#include "bench/workload.h"
#include "common/thread_pool.h"
#include "decode/decode.h"

using namespace flashserve;
using namespace flashserve::bench;

namespace {

struct Row {
  std::string kind, shape;
  double ms, tokens_per_s, gflops, gbps;
};

bool run_prefill(const char* shape, std::vector<int32_t> lens, double min_s, std::vector<Row>* rows) {
  WorkloadSpec spec;
  spec.q_lens = lens;
  spec.seq_lens = lens;
  Workload w;
  Status st = Workload::create(spec, &w);
  PrefillParams p = w.prefill_params();
  Timing t;
  if (st.ok()) st = time_cpu([&] { return prefill(p); }, min_s, 3, &t);
  if (!st.ok()) {
    std::fprintf(stderr, "prefill %s: %s\n", shape, st.to_string().c_str());
    return false;
  }
  rows->push_back({"prefill causal", shape, t.median_s * 1e3, w.total_q() / t.median_s,
                   w.attention_flops() / t.median_s * 1e-9, w.kv_bytes() / t.median_s * 1e-9});
  return true;
}

bool run_decode(const char* shape, int batch, int context, double min_s, std::vector<Row>* rows) {
  WorkloadSpec spec;
  spec.q_lens.assign(batch, 1);
  spec.seq_lens.assign(batch, context);
  Workload w;
  Status st = Workload::create(spec, &w);
  DecodeParams p = w.decode_params();  // num_splits = 0: decode plans for the thread pool
  Timing t;
  if (st.ok()) st = time_cpu([&] { return decode(p); }, min_s, 5, &t);
  if (!st.ok()) {
    std::fprintf(stderr, "decode %s: %s\n", shape, st.to_string().c_str());
    return false;
  }
  rows->push_back({"decode", shape, t.median_s * 1e3, batch / t.median_s, w.attention_flops() / t.median_s * 1e-9,
                   w.kv_bytes() / t.median_s * 1e-9});
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const double min_s = quick ? 0.2 : 1.0;
  std::vector<Row> rows;
  bool ok = true;
  ok &= run_prefill("1x2048", {2048}, min_s, &rows);
  ok &= run_prefill("4x512", {512, 512, 512, 512}, min_s, &rows);
  ok &= run_prefill("mixed 1000,300,77,7", {1000, 300, 77, 7}, min_s, &rows);
  ok &= run_decode("1x32k", 1, 32768, min_s, &rows);
  ok &= run_decode("16x2k", 16, 2048, min_s, &rows);
  ok &= run_decode("64x512", 64, 512, min_s, &rows);

  std::printf("\nflashserve CPU backend, %d threads, bf16, 32/8 heads, head_dim 128, page 16\n",
              ThreadPool::global().num_threads());
  std::printf("%-15s %-20s %10s %14s %10s %12s\n", "kernel", "shape", "ms", "tokens/s", "GFLOP/s", "K/V GB/s");
  for (const Row& r : rows)
    std::printf("%-15s %-20s %10.3f %14.1f %10.2f %12.3f\n", r.kind.c_str(), r.shape.c_str(), r.ms, r.tokens_per_s,
                r.gflops, r.gbps);
  return ok ? 0 : 1;
}
