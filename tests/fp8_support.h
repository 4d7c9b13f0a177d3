// FP8 pages for the attention tests (issue 25): one layer's FP8 pool holding a problem's K/V,
// written by KVStorage::append (the engine's path) with per-kv-head scales, free slots holding
// the format's NaN code, and the values the pages then hold. Used by the CPU tests
// (test_fp8_attention.cc) and the CUDA ones (test_fp8_cuda.cc, which copy the pool to the
// device).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kvcache/kv_storage.h"
#include "tests/support.h"

namespace flashserve::test {

inline uint8_t nan_code(DType t) { return t == DType::kFp8E4M3 ? 0x7f : 0x7e; }

// One layer's FP8 pool holding d's K/V at d's block table, and the values it holds.
struct Fp8Cache {
  KVStorage storage;
  ProblemData dequantized;  // d with k, v replaced by scale·fp8(code), what the pages hold
};

// Per-kv-head scales: amax of the head's K (V) over the format's max, times factor_of(h)
// (1: calibrated as vLLM's calculate_kv_scales; > 1 uses fewer codes; < 1 saturates the tail).
template <typename Factor>
Fp8Cache make_fp8_cache(const Problem& p, const ProblemData& d, DType t, Factor factor_of) {
  Fp8Cache c;
  const int32_t Hk = p.num_kv_heads, D = p.head_dim, bs = p.block_size;
  KVStorageShape sh;
  sh.num_layers = 1;
  sh.num_blocks = d.num_blocks;
  sh.num_kv_heads = Hk;
  sh.block_size = bs;
  sh.head_dim = D;
  sh.dtype = t;
  EXPECT_TRUE(KVStorage::create(Device::kCPU, sh, &c.storage).ok());
  std::memset(c.storage.k_pages(0), nan_code(t), static_cast<size_t>(sh.bytes()));  // free slots: NaN
  std::vector<float> ks(Hk), vs(Hk);
  for (int32_t h = 0; h < Hk; ++h) {
    float ka = 0, va = 0;
    for (int64_t j = 0; j < p.total_k(); ++j)
      for (int32_t x = 0; x < D; ++x) {
        ka = std::max(ka, std::fabs(d.k[(j * Hk + h) * D + x]));
        va = std::max(va, std::fabs(d.v[(j * Hk + h) * D + x]));
      }
    ks[h] = ka / fp8_max(t) * factor_of(h);
    vs[h] = va / fp8_max(t) * factor_of(h + 7);
  }
  EXPECT_TRUE(c.storage.set_scales(0, ks.data(), vs.data()).ok());
  // Slots of every key from the block table; K/V in the call's dtype, packed [total_k, Hk, D].
  std::vector<int64_t> slots;
  for (size_t b = 0; b < p.seqs.size(); ++b)
    for (int64_t j = 0; j < p.seqs[b].k_len; ++j)
      slots.push_back(int64_t{d.block_table[b * d.table_stride + j / bs]} * bs + j % bs);
  const Status st = c.storage.append(0, 1, p.dtype, d.k_buf.data(), d.v_buf.data(), slots.data(),
                                     static_cast<int64_t>(slots.size()));
  EXPECT_TRUE(st.ok()) << st.to_string();
  // What the pages hold, read back through the view.
  c.dequantized = d;
  const KVPageView pv = c.storage.view(0, nullptr, 0, nullptr);
  for (size_t i = 0; i < slots.size(); ++i)
    for (int32_t h = 0; h < Hk; ++h)
      for (int32_t x = 0; x < D; ++x) {
        const int64_t at = pv.offset_of_slot(slots[i], h) + x;
        const size_t e = (i * Hk + h) * D + x;
        c.dequantized.k[e] = ks[h] * load_as_float(pv.k_pages, t, at);
        c.dequantized.v[e] = vs[h] * load_as_float(pv.v_pages, t, at);
      }
  return c;
}

inline KVPageView view_of(const KVStorage& s, ProblemData& d) {
  return s.view(0, d.block_table.data(), d.table_stride, d.seq_lens.data());
}

}  // namespace flashserve::test
