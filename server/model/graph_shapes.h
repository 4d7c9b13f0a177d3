// The shapes a CUDA graph of a pure decode step is captured at (the CUDA model's graphs, and host
// tools that do its host work without a device: bench_engine_host, bench_step_host): plain
// arithmetic, no CUDA.
#pragma once

#include <cstdint>

namespace flashserve::model {

// The width (pages) a graph-replayed decode step lays its block tables out at, and so the longest
// context its captured split plan covers (graph mode's chunk is that context / its splits): the
// step's widest table rounded up to a power of two pages, at least kGraphMinContext tokens'
// worth, at most max_pages (max_blocks_per_seq), never below the widest (a wider step is refused
// later). Steps of one batch size share a graph a width. Before session 27 every graph took
// max_blocks_per_seq: a server sized by --num-blocks 32768 wrote and uploaded 128 KB of table a
// sequence a step (32 MB at 256 sequences), and at batch 1 its one split a sequence covered 16k
// keys (8 CTAs for a 2k context's decode).
inline constexpr int64_t kGraphMinContext = 8192;  // tokens: bench_model's graphs, as measured
inline int64_t graph_table_width(int64_t widest, int64_t max_pages, int32_t block_size) {
  int64_t w = block_size > 0 ? (kGraphMinContext + block_size - 1) / block_size : 1;
  while (w < widest) w *= 2;
  w = w < max_pages ? w : max_pages;
  return w > widest ? w : widest;
}

// The batch size a graph-replayed decode step of `batch` sequences runs at: powers of two up to
// 8, then multiples of 8 (the capture sizes serving stacks use), or the batch itself past
// max_batch. The extra rows are dummies whose logits nobody reads; a batch that wanders between
// 200 and 256 sequences then takes 8 graphs, each captured once, not 57.
inline int32_t graph_batch_size(int32_t batch, int32_t max_batch) {
  const int32_t p = batch <= 1 ? 1 : batch <= 2 ? 2 : batch <= 4 ? 4 : batch <= 8 ? 8 : (batch + 7) / 8 * 8;
  return p <= max_batch ? p : batch;
}

}  // namespace flashserve::model
