// The host's work for one graph-replayed decode step of the CUDA model, without a device (issue
// 27): the batch's block tables laid out at a width as the engine's batch builder does, the
// step's attention metadata and graph-mode decode plan (AttentionStepBuilder::build), and the
// metadata written into one upload buffer (write_step_metadata), for Llama-3-8B's shapes at
// 1, 64 and 256 sequences of 1.1k keys, at the width of a server's whole pool (32767 pages, what
// every graph took before session 27), of the context length (8192) and of graph_table_width's
// floor (512). Prints µs a step and the bytes to upload.
// Usage: bench_step_host
#include <chrono>
#include <cstdio>
#include <vector>

#include "server/model/attention_step.h"
#include "server/model/config.h"

using namespace flashserve;
using namespace flashserve::model;

int main() {
  LlamaConfig c;
  if (!synthetic_preset("llama3-8b", &c).ok()) return 1;
  const AttentionStepBuilder steps(c, Device::kCUDA, DType::kBFloat16);
  const int ctx = 1100, block = 16, pages = (ctx + block - 1) / block;
  std::printf("%-9s %-7s %12s %12s\n", "batch", "width", "host us", "upload MB");
  for (int B : {1, 64, 256}) {
    for (int64_t width : {32767, 8192, 512}) {
      ForwardBatch fb;
      std::vector<char> meta;
      const int reps = B == 256 ? 10 : 50;
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < reps; ++r) {
        fb.num_decode = B;
        fb.block_table_stride = width;
        fb.tokens.assign(static_cast<size_t>(B), 5);
        fb.cu_seqlens_q.resize(static_cast<size_t>(B) + 1);
        for (int b = 0; b <= B; ++b) fb.cu_seqlens_q[b] = b;
        fb.seq_lens.assign(static_cast<size_t>(B), ctx);
        fb.slot_mapping.assign(static_cast<size_t>(B), 7);
        fb.block_tables.assign(static_cast<size_t>(B * width), 0);  // the builder's null padding
        for (int b = 0; b < B; ++b)
          for (int p = 0; p < pages; ++p) fb.block_tables[b * width + p] = 1 + b * pages + p;
        DecodePlanning planning;
        planning.shape = {16, 2, 132};  // the H200's decode shape at head_dim 128
        planning.block_size = block;
        planning.graph_mode = true;
        planning.max_seq_len = static_cast<int32_t>(width * block);
        AttentionStep step;
        if (!steps.build(fb, width, &planning, &step).ok()) return 2;
        const StepMetadataLayout layout = step_metadata_layout(step);
        meta.resize(static_cast<size_t>(layout.bytes));
        write_step_metadata(fb, step, layout, meta.data());
      }
      const double us = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps * 1e6;
      std::printf("%-9d %-7lld %12.0f %12.2f\n", B, static_cast<long long>(width), us, meta.size() / 1e6);
    }
  }
  return 0;
}
