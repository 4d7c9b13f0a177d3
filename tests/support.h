// Test support: random problems with fixed seeds, their data in every storage type and
// layout (packed or paged with scattered block ids and poisoned free slots), the float64
// reference, and a comparison that reports the first failing element with the case.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attention/params.h"
#include "common/dtype.h"
#include "decode/params.h"

namespace flashserve::test {

struct SeqSpec {
  int32_t q_len = 0;
  int32_t k_len = 0;
};

struct Problem {
  std::vector<SeqSpec> seqs;
  int32_t num_heads = 1, num_kv_heads = 1, head_dim = 64;
  DType dtype = DType::kFloat32;
  bool causal = false;
  int32_t window_left = -1, window_right = -1;
  bool alibi = false;
  float softcap = 0.f;
  float logit_scale = 1.f;    // multiplies q: > 1 for large logits, << 1 for small
  int32_t block_size = 0;     // 0: packed K/V; else paged with this block size
  bool separate_pools = false;  // paged: K and V pools apart instead of the project's one pool
  uint64_t seed = 1;

  std::string describe() const;  // every field, for failure messages
  int64_t total_q() const;
  int64_t total_k() const;
};

// A byte buffer aligned for any element type.
struct Buffer {
  std::vector<double> storage;  // 8-byte aligned
  void resize(int64_t bytes) { storage.assign(static_cast<size_t>((bytes + 7) / 8), 0.0); }
  void* data() { return storage.data(); }
  const void* data() const { return storage.data(); }
};

struct ProblemData {
  // Values as the kernel sees them (already rounded to the storage type), packed.
  std::vector<float> q, k, v;  // [total_q, H, D], [total_k, Hkv, D] ×2
  std::vector<float> alibi_slopes;
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k;
  Buffer q_buf, k_buf, v_buf;  // storage-type copies of q, k, v (packed)
  // Paged K/V in one buffer with free slots set to NaN: the project's layout, one pool
  // [num_blocks, 2, Hkv, block_size, D] (a block's K, then its V), or with
  // Problem::separate_pools the K pool [num_blocks, Hkv, block_size, D] followed by the V pool.
  // K (V) of block b, kv head h, slot t at element (v_offset +) b·block_stride +
  // (h·block_size + t)·D.
  Buffer pages;
  int64_t v_offset = 0, block_stride = 0;
  int32_t num_blocks = 0;
  std::vector<int32_t> block_table;  // [batch, table_stride]
  int64_t table_stride = 0;
  std::vector<int32_t> seq_lens;
};

ProblemData make_data(const Problem& p);
// Points v's pages and strides at d's paged K/V copied to `pages` (d.pages.data() itself, or a
// device copy of it); the table and lengths are left as they are.
void point_pages(const Problem& p, const ProblemData& d, const void* pages, KVPageView* v);

// A causal decode problem: q_len new tokens for each sequence of the given lengths (each at
// least q_len: the new tokens are keys too), paged with block size bs.
Problem decode_problem(const std::vector<int>& seq_lens, int q_len, int num_heads, int num_kv_heads, int head_dim,
                       DType dtype, int block_size, uint64_t seed);
// Pages of the longest sequence (>= 1).
int32_t max_pages(const Problem& p);

// Outputs of a kernel run: o in the storage type, lse fp32, both poisoned with NaN first.
struct Outputs {
  Buffer o;
  std::vector<float> lse;
};
Outputs make_outputs(const Problem& p);

// Params describing the problem, pointing into d and out.
PrefillParams prefill_params(const Problem& p, ProblemData& d, Outputs& out);
// Decode params: every sequence must have the same q_len (q_len = seqs[0].q_len); K/V paged.
DecodeParams decode_params(const Problem& p, ProblemData& d, Outputs& out);

struct Reference {
  std::vector<double> o;    // [total_q, H, D]
  std::vector<double> lse;  // [total_q, H], -inf for rows that see no key
  double max_abs_logit = 0; // over visible keys
  // max |o_lowp - o| where o_lowp rounds each softmax weight to the storage type before P·V,
  // as tensor-core kernels do (the sum of weights stays exact): the error a correct kernel of
  // that kind makes; 0 for fp32.
  double p_rounding_err = 0;
};
// Plain float64 attention, one (sequence, head, query) at a time, from the mask's definition.
Reference reference(const Problem& p, const ProblemData& d);

struct Tolerance {
  double o_abs = 0, o_rel = 0, lse_abs = 0, lse_rel = 0;
};
// From the storage type (one unit in the last place of o) and the logits' magnitude
// (fp32 rounding of q·k grows with |q·k|).
Tolerance tolerance_for(const Problem& p, const Reference& ref);

// "" when every element is within tolerance; otherwise the first failure, the worst error and
// the problem. NaN never passes; -inf lse must be exactly -inf and its row exactly 0.
std::string compare(const Problem& p, const Outputs& out, const Reference& ref, const Tolerance& tol);
// Element-wise closeness of two kernel outputs (cross-checks); tol relative to dtype ulp.
// abs_slack is added to every element's bound (e.g. 2 × p_rounding_err between a kernel that
// rounds P and one that does not).
std::string compare_outputs(const Problem& p, const Outputs& a, const Outputs& b, double ulps, double abs_slack = 0);

}  // namespace flashserve::test
